"""The People section of a run's report (``report.people``): the raters' and judges'
scores of the items people rated, gathered from what the report read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from flask_eval.app.score_tables import config_models, judge_of
from flask_eval.core.people import is_person
from flask_eval.report.people import PeopleSettings, people_report
from flask_eval.report.people_data import PeopleReport, ScoreRow
from flask_eval.storage.records import RunInfo


def people_section(
    rated: Sequence[ScoreRow],
    verdicts: Sequence[ScoreRow],
    settings: PeopleSettings,
    run: RunInfo,
) -> PeopleReport | None:
    """The People section of a run: of its scores, else of its pairwise verdicts (a
    judge's samples merged into the judge); None without people."""
    if not verdicts:
        return people_report(rated, settings)
    seen = {m for r in verdicts for m in (r.model, r.model_b)}
    models = [m for m in config_models(run.config) if m in seen]
    pairwise = replace(
        settings, model_order=models, judge_of=lambda name: judge_of(name, run.config)
    )
    return people_report(verdicts, pairwise, pairwise=True)


def people_verdicts(done: Sequence[tuple[str, str, str, str, str, int]]) -> list[ScoreRow]:
    """The verdicts of every judge and person (``analytics.pairwise_rows``' done rows) on
    the items a person gave a verdict on."""
    rated = {(m, mb, iid, c) for iid, m, mb, c, judge, _ in done if is_person(judge)}
    return [
        ScoreRow(judge, m, mb, iid, c, float(v))
        for iid, m, mb, c, judge, v in done
        if (m, mb, iid, c) in rated
    ]
