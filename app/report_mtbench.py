"""The MT-Bench section of a run's report (``report.mtbench``): for a run whose instances
are turns of conversations, its single-answer scores and pairwise tallies as FastChat's
``show_result.py`` computes them."""

from __future__ import annotations

from flask_eval.app.score_tables import config_models
from flask_eval.core.people import is_person
from flask_eval.report.mtbench import MTBench, pairwise_section, single_scores
from flask_eval.report.pairwise import Comparison
from flask_eval.report.scores import ScoreTable
from flask_eval.storage import analytics
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store


def mtbench_section(store: Store, run: RunInfo, table: ScoreTable) -> MTBench | None:
    """The MT-Bench section of ``run`` (None when no instance is a turn of a
    conversation): single scores of ``table`` (the run's judges, people apart), and for
    a pairwise run its judges' comparisons (a probe's twins left out)."""
    turn_of = analytics.instance_turns(store, run.id)
    if not turn_of:
        return None
    models = config_models(run.config)
    section = MTBench(single=single_scores(table, models))
    if run.config.pairwise is not None:
        done = analytics.pairwise_rows(store, run.id).done
        records = [Comparison(*row) for row in done if not is_person(row[4])]
        section.pairwise, section.notes = pairwise_section(records, turn_of, models)
        if records and not section.pairwise:
            section.notes.append(
                "MT-Bench pairwise needs each comparison judged in both orders (a run with "
                "--swap, the default): this run has none"
            )
    return section
