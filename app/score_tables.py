"""A run's judgments as the report's score table, and the breakdowns and point estimates
of a table (the report use case, app/report.py, builds on them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flask_eval.core.probes import is_twin
from flask_eval.core.stored import StoredConfig
from flask_eval.core.types import DOMAINS, sample_of
from flask_eval.report.breakdown import Aggregation, Breakdown, KeyOrders, report_breakdown
from flask_eval.report.consistency import SelfConsistency, consistency_rows, merge_samples
from flask_eval.report.metrics import BIGGEN_CAPABILITIES, Row
from flask_eval.report.people_table import split_people
from flask_eval.report.probe_filter import without_twins
from flask_eval.report.scores import InstanceGroups, ScoreTable, build_coded
from flask_eval.rubrics import codec
from flask_eval.rubrics.kind import NO_MODEL
from flask_eval.rubrics.skills import SkillSet
from flask_eval.storage import analytics
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store


def score_table(
    store: Store, run_id: int, judges: Sequence[str] = (), domain_order: Sequence[str] = ()
) -> ScoreTable:
    """Every judgment of a run as the report's score table (judge columns in the order
    given, then any other judge of the run)."""
    p = analytics.pivot(store, run_id, judges)
    return _table(p, p.judges, p.state, p.score, domain_order)


def _table(
    p: analytics.Pivot,
    judges: Sequence[str],
    state: Any,
    score: Any,
    domain_order: Sequence[str],
) -> ScoreTable:
    k = p.keys
    return build_coded(
        (k.models, k.instances, k.criteria),
        (k.model, k.instance, k.criterion),
        judges,
        state,
        score,
        InstanceGroups(p.difficulty, p.domains, domain_order, p.capability, p.task, p.turn),
    )


def config_judges(config: StoredConfig) -> list[str]:
    """Judge names of a run's config (of each sample, in a run of repeated judgments)."""
    return list(config.judge_names)


def judge_of(name: str, config: StoredConfig) -> str:
    """The judge whose sample the ledger's judge ``name`` is, in a run of repeated
    judgments; ``name`` itself otherwise."""
    parsed = sample_of(name) if config.samples > 1 else None
    return name if parsed is None else parsed[0]


def run_tables(store: Store, run: RunInfo) -> tuple[ScoreTable, list[SelfConsistency]]:
    """The run's score table, judge columns in the order the run was given them, and,
    for a run of repeated judgments, each judge's self-consistency: its samples merged
    into one column scored by their mean (report/consistency.py)."""
    table, consistency, _ = _run_tables(store, run)
    return table, consistency


def _run_tables(
    store: Store, run: RunInfo, calls: bool = False
) -> tuple[ScoreTable, list[SelfConsistency], analytics.Pivot]:
    """:func:`run_tables` and the pivot they come from (read ``calls`` too: the
    position check's, on PostgreSQL)."""
    p = analytics.pivot(store, run.id, config_judges(run.config), calls=calls)
    judges, state, score, consistency = p.judges, p.state, p.score, []
    if run.config.samples > 1:
        merged = merge_samples(p.judges, p.state, p.score)
        judges, state, score = merged.judges, merged.state, merged.score
        consistency = consistency_rows(merged, p.score, p.state)
    table = without_twins(_table(p, judges, state, score, DOMAINS))
    return table, consistency, p


def run_table(store: Store, run: RunInfo) -> ScoreTable:
    """The run's score table (:func:`run_tables`)."""
    return run_tables(store, run)[0]


def breakdown_for(table: ScoreTable, skillset: SkillSet) -> Breakdown:
    """The report's breakdowns of ``table``: FLASK's, plus BiGGen's overall and the
    capability and task dimensions when its instances carry them, and the turn dimension
    when they are turns of conversations (then capabilities are MT-Bench's categories,
    without BiGGen's overall). Criteria the skillset does not know (an instance's own
    rubric, e.g. BiGGen's) have no ability."""
    ability_of = {s.name: s.ability for s in skillset}
    orders = KeyOrders(
        skill=skillset.names,
        ability=tuple(skillset.abilities),
        domain=DOMAINS,
        capability=ordered_capabilities(table),
        task=ordered_tasks(table),
    )
    return report_breakdown(
        ability_of,
        orders=orders,
        capabilities=bool(table.capabilities),
        tasks=bool(table.tasks),
        turns=table.conversations,
        partial_abilities=any(s not in ability_of for s in table.skills),
    )


def task_capability(table: ScoreTable) -> dict[str, str]:
    """Each task of the table's instances -> its capability (BiGGen Bench)."""
    out: dict[str, str] = {}
    for t, c in zip(table.task.tolist(), table.capability.tolist(), strict=True):
        if t >= 0 and c >= 0:
            out.setdefault(table.tasks[t], table.capabilities[c])
    return out


def ordered_capabilities(table: ScoreTable) -> list[str]:
    """The table's capabilities in BiGGen's order, then any other by name."""
    known = [c for c in BIGGEN_CAPABILITIES if c in table.capabilities]
    return [*known, *sorted(set(table.capabilities) - set(known))]


def ordered_tasks(table: ScoreTable) -> list[str]:
    """Tasks grouped by capability (:func:`ordered_capabilities`), by name within one;
    tasks of no capability last."""
    of = task_capability(table)
    rank = {c: i for i, c in enumerate(ordered_capabilities(table))}
    return sorted(table.tasks, key=lambda t: (t not in of, rank.get(of.get(t, ""), 0), t))


def table_rows(table: ScoreTable, skillset: SkillSet) -> list[Row]:
    """Every breakdown's point estimates from a score table, in report order."""
    return Aggregation(table, breakdown_for(table, skillset)).rows()


def report_rows(store: Store, run: RunInfo) -> list[Row]:
    """The tables `run` and `demo` print: as `report` computes them, without intervals."""
    judges = split_people(run_table(store, run))[0]  # people have a section of their own
    return table_rows(judges, codec.from_data(run.config.skills))


def config_models(config: StoredConfig) -> list[str]:
    """Model names of a run's config, in the order the run was given them (a probe's
    twins are no models of their own: ``core.probes``; nor is the stand-in ``''`` that
    holds a generation's earlier answers: ``app.turns``)."""
    return [m for m in config.models if not is_twin(m) and m != NO_MODEL]
