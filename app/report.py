"""The report use case: a run's judgments from the ledger, through the report's math,
into one :class:`report.document.Report` that every format renders."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from tqdm import tqdm

from core.errors import InputError
from core.redact import redact
from core.types import DOMAINS
from report import references
from report.agreement import Agreement, agreement_rows
from report.bootstrap import DEFAULT_CONFIDENCE, DEFAULT_REPLICATES, DEFAULT_SEED, instance_weights
from report.breakdown import Aggregation, flask_breakdown
from report.document import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_TEMPERATURE,
    JudgeSettings,
    Report,
    ranked_models,
    with_intervals,
)
from report.ensemble import EnsembleSpec, add_ensembles
from report.intervals import cell_intervals, comparisons
from report.metrics import Row
from report.scores import ScoreTable, build
from rubrics import codec
from rubrics.skills import SkillSet
from storage import analytics, queries
from storage.records import RunInfo
from storage.store import Store
from workers.judge import PROVIDERS, judge_class


def score_table(
    store: Store, run_id: int, judges: Sequence[str] = (), domain_order: Sequence[str] = ()
) -> ScoreTable:
    """Every judgment of a run as the report's score table (judge columns in the order
    given, then any other judge of the run)."""
    p = analytics.pivot(store, run_id, judges)
    return build(p.cells, p.judges, p.state, p.score, p.difficulty, p.domains, domain_order)


def config_judges(config: dict[str, Any]) -> list[str]:
    """Judge names of a run's config: a list of names, or of objects with a ``name``."""
    names = []
    for entry in config.get("judges") or ():
        name = entry.get("name") if isinstance(entry, dict) else entry
        if isinstance(name, str) and name:
            names.append(name)
    return names


def run_table(store: Store, run: RunInfo) -> ScoreTable:
    """The run's score table, judge columns in the order the run was given them."""
    return score_table(store, run.id, config_judges(run.config), domain_order=DOMAINS)


def table_rows(table: ScoreTable, skillset: SkillSet) -> list[Row]:
    """Every breakdown's point estimates from a score table, in report order."""
    breakdown = flask_breakdown(
        {s.name: s.ability for s in skillset},
        skill_order=skillset.names,
        ability_order=tuple(skillset.abilities),
        domain_order=DOMAINS,
    )
    return Aggregation(table, breakdown).rows()


def report_rows(store: Store, run: RunInfo) -> list[Row]:
    """The tables `run` and `demo` print: as `report` computes them, without intervals."""
    return table_rows(run_table(store, run), codec.from_data(run.config["skills"]))


def _with_references(
    table: ScoreTable, refs: Sequence[references.Reference]
) -> tuple[ScoreTable, list[str]]:
    table, unmatched = references.attach(table, refs)
    notes = [
        f"reference {ref.name}: {missed} of {len(ref.scores)} scores match no judged "
        "(model, instance, skill) of the run and are left out"
        for ref, missed in zip(refs, unmatched, strict=True)
        if missed
    ]
    return table, notes


def _takes_temperature(spec: str) -> bool:
    provider = spec.split("/", 1)[0].strip()
    return provider not in PROVIDERS or judge_class(provider).takes_temperature


def judge_settings(config: Mapping[str, Any]) -> list[JudgeSettings]:
    """How each judge of a run was sampled, from its config (``JudgeConfig.to_data()``
    entries, or bare names in older runs); unset values are the defaults a call uses,
    Anthropic specs have the provider's default temperature; text is redacted."""
    settings = []
    for entry in config.get("judges") or ():
        data = entry if isinstance(entry, Mapping) else {"name": entry}
        name = str(data.get("name") or data.get("spec") or "")
        if not name:
            continue
        spec = str(data.get("spec") or name)
        max_tokens = data.get("max_tokens")
        temperature = data.get("temperature")
        if not _takes_temperature(spec):
            temperature = None  # the provider's default applies
        elif temperature is None:
            temperature = DEFAULT_TEMPERATURE
        settings.append(
            JudgeSettings(
                name=redact(name),
                spec=redact(spec),
                max_tokens=int(max_tokens) if max_tokens is not None else DEFAULT_MAX_TOKENS,
                temperature=None if temperature is None else float(temperature),
            )
        )
    return settings


def build_report(
    store: Store,
    run: RunInfo,
    *,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
    ensembles: Sequence[EnsembleSpec] = (),
    ensemble_judges: Sequence[str] = (),
    refs: Sequence[references.Reference] = (),
    progress: bool = True,
    timings: dict[str, float] | None = None,
) -> Report:
    """All breakdowns of a run with bootstrap intervals, paired comparisons and agreement.

    ``replicates=0`` skips the bootstrap (no intervals). ``timings``, when given, receives
    the seconds spent in each phase.
    """
    skillset = codec.from_data(run.config["skills"])
    ability_of = {s.name: s.ability for s in skillset}
    breakdown = flask_breakdown(
        ability_of,
        skill_order=skillset.names,
        ability_order=tuple(skillset.abilities),
        domain_order=DOMAINS,
    )
    clock = [time.perf_counter()]

    def lap(name: str) -> None:
        now = time.perf_counter()
        if timings is not None:
            timings[name] = round(now - clock[0], 4)
        clock[0] = now

    bar = tqdm(
        total=1,
        desc=f"report {run.name}",
        unit="step",
        disable=not progress,
        file=sys.stderr,
        dynamic_ncols=True,
    )
    try:
        base = run_table(store, run)
        bar.update(1)
        lap("query")
        try:
            table = add_ensembles(base, ensembles, ensemble_judges)
        except ValueError as exc:
            raise InputError(f"--ensemble: {exc}") from None
        aggregation = Aggregation(table, breakdown)
        bar.total = 1 + aggregation.steps + 2
        rows = aggregation.rows()
        lap("means")
        weights = instance_weights(len(table.instances), replicates, seed)
        intervals = cell_intervals(aggregation, weights, confidence, progress=bar.update)
        lap("intervals")
        ranking = ranked_models(rows, table.models)
        pairs = comparisons(table, weights, confidence, model_order=ranking)
        bar.update(1)
        lap("comparisons")
        rated, notes = _with_references(base, refs)
        agreement = agreement_rows(rated, skill_order=skillset.names)
        bar.update(1)
        lap("agreement")
    finally:
        bar.close()
    coverage = queries.coverage(store, run.id)
    report_rows = with_intervals(rows, intervals)
    lap("rows")
    return Report(
        run=run.name,
        rows=report_rows,
        comparisons=pairs,
        agreement=agreement,
        bootstrap={
            "replicates": replicates,
            "seed": seed,
            "confidence": confidence,
            "unit": "instance",
            "method": "percentile",
            "instances": len(table.instances),
        },
        coverage=coverage,
        models=list(table.models),
        judges=list(table.judges),
        skills=list(skillset.names),
        abilities=list(skillset.abilities),
        ability_of=ability_of,
        domains=list(table.domains),
        notes=notes,
        judge_settings=judge_settings(run.config),
    )


def agreement_for_run(
    store: Store, run: RunInfo, refs: Sequence[references.Reference] = ()
) -> tuple[list[Agreement], list[str]]:
    skillset = codec.from_data(run.config["skills"])
    table, notes = _with_references(run_table(store, run), refs)
    return agreement_rows(table, skill_order=skillset.names), notes
