"""The report use case: a run's judgments from the ledger, through the report's math,
into one :class:`report.document.Report` that every format renders."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from tqdm import tqdm

from flask_eval.app.batches import duplicate_notes
from flask_eval.app.calibration import CalibrationAsk, CalibrationInputs, calibration_parts
from flask_eval.app.progress import run_progress
from flask_eval.app.report_judges import judge_costs, judge_protocols, judge_settings
from flask_eval.app.report_mtbench import conversation_groups, mtbench_section
from flask_eval.app.report_people import people_section, people_verdicts
from flask_eval.app.score_tables import (
    _run_tables,
    breakdown_for,
    config_models,
    judge_of,
    ordered_capabilities,
    ordered_tasks,
    run_table,
    task_capability,
)
from flask_eval.core.errors import InputError
from flask_eval.core.people import is_person
from flask_eval.core.stored import StoredPairwise
from flask_eval.report import references
from flask_eval.report.agreement import Agreement, agreement_rows
from flask_eval.report.biggen import llm_judge_notes
from flask_eval.report.bootstrap import (
    DEFAULT_CONFIDENCE,
    DEFAULT_REPLICATES,
    DEFAULT_SEED,
    instance_weights,
)
from flask_eval.report.breakdown import Aggregation
from flask_eval.report.document import (
    ReferenceMean,
    Report,
    definitions,
    ranked_models,
    with_intervals,
)
from flask_eval.report.ensemble import EnsembleSpec, add_ensembles
from flask_eval.report.instance_sums import Replicates
from flask_eval.report.intervals import cell_intervals, comparisons
from flask_eval.report.pairwise import Comparison, instances_of
from flask_eval.report.pairwise_labels import Label, label_accuracy
from flask_eval.report.pairwise_report import PairwiseReport, PairwiseRunData
from flask_eval.report.pairwise_report import build as build_pairwise
from flask_eval.report.patterns import patterns_of_counts
from flask_eval.report.people import PeopleSettings
from flask_eval.report.people_data import ScoreRow
from flask_eval.report.people_table import split_people, with_columns
from flask_eval.report.scores import ScoreTable
from flask_eval.rubrics import codec, kinds
from flask_eval.rubrics.grading import protocols_scale
from flask_eval.storage import analytics, queries
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store

_T = TypeVar("_T")


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


@dataclass(frozen=True)
class Extras:
    """What a report adds to a run's judges: virtual judges combining them (``ensembles``
    of ``ensemble_judges``, default all) and reference scores to compare them with."""

    ensembles: Sequence[EnsembleSpec] = ()
    ensemble_judges: Sequence[str] = ()
    refs: Sequence[references.Reference] = ()
    #: ``--calibrate PEOPLE``: the judges calibrated to these people (None: not asked)
    calibrate: str | None = None
    #: ``--suggest-labels N``: about N cells for people to label next (0: none)
    suggest_labels: int = 0
    #: ``--label-probabilities FILE``: (model, instance, skill) -> inclusion probability
    label_probabilities: Mapping[tuple[str, str, str], float] | None = None


#: a report of the run's judges only
NO_EXTRAS = Extras()


def build_report(
    store: Store,
    run: RunInfo,
    *,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
    extras: Extras = NO_EXTRAS,
    progress: bool = True,
    timings: dict[str, float] | None = None,
) -> Report:
    """All breakdowns of a run with bootstrap intervals, paired comparisons and agreement.

    ``replicates=0`` skips the bootstrap (no intervals). ``timings``, when given, receives
    the seconds spent in each phase.
    """
    ensembles, ensemble_judges, refs = extras.ensembles, extras.ensemble_judges, extras.refs
    kind = kinds.of(run.config.kind)
    if not kind.scores:  # a kind whose rows read values scores nothing (rubrics/kinds.py)
        raise InputError(kind.refusal(run.name))
    skillset = codec.from_data(run.config.skills)
    ability_of = {s.name: s.ability for s in skillset}
    # read before the judgments: a report whose rows were read in progress says so
    how_far = run_progress(store, run)
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
        base, consistency, read = _run_tables(store, run, calls=True)
        full = base  # with people's columns: what calibration reads
        # people's columns: their own section, beside the judges' tables
        base, people_rated = split_people(base)
        consistency = [c for c in consistency if not is_person(c.judge)]
        bar.update(1)
        lap("query")
        # beside the breakdowns, in one thread: what releases the GIL (the position
        # check's whole-array numpy, the bootstrap's draws, the run's coverage and costs
        # read from the store); the breakdowns, intervals, comparisons and agreement here
        # (their bincounts and Python loops hold it). Each part is pure of the others.
        aside = ThreadPoolExecutor(max_workers=1, thread_name_prefix="report")
        checked = aside.submit(
            _timed, timings, "positions (aside)", analytics.positions_of_pivot, read
        )
        del read  # the pivot's arrays: not held through the statistics once checked
        # the base table's instances: ensembles add judge columns, never instances
        weighing = aside.submit(_weights, len(base.instances), replicates, seed)
        reads = aside.submit(lambda: (queries.coverage(store, run.id), judge_costs(store, run)))
        try:
            try:
                table = add_ensembles(base, ensembles, ensemble_judges)
            except ValueError as exc:
                raise InputError(f"--ensemble: {exc}") from None
            people_rated = with_columns(people_rated, table, base.judges)  # ensembles too
            aggregation = Aggregation(table, breakdown_for(table, skillset))
            bar.total = 1 + aggregation.steps + 2
            rows = aggregation.rows()
            calibrated, suggested = calibration_parts(
                store,
                run,
                CalibrationAsk(
                    extras.calibrate,
                    extras.suggest_labels,
                    confidence,
                    seed,
                    extras.label_probabilities,
                ),
                CalibrationInputs(
                    full, table, list(aggregation.members()) if extras.calibrate else [], refs
                ),
            )
            lap("means")
            weights = weighing.result()
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
            counted = checked.result()
            coverage, costs = reads.result()
            lap("aside")  # waited for what ran beside
        finally:
            aside.shutdown(wait=False, cancel_futures=True)
    finally:
        bar.close()
    report_rows = with_intervals(rows, intervals)
    lap("rows")
    if counted is None:  # SQLite: counted by the ledger
        counted = analytics.position_counts(store, run.id)
    found = patterns_of_counts(
        ((judge_of(j, run.config), p, s, n) for j, p, s, n in counted), base.judges
    )
    lap("patterns")
    notes += [p.note() for p in found if p.flagged]
    if consistency:
        notes.append(
            f"each judge was asked {run.config.samples} times per item (--samples): its "
            "score is the mean of its samples, and the agreement between judges is computed "
            "on those means; Self-consistency compares a judge's samples with each other"
        )
    if table.capabilities and not table.conversations:
        notes += llm_judge_notes(table.instances, judge_protocols(run.config))
    notes += duplicate_notes(store, run.id)
    pairwise, verdict_rows = (
        _pairwise_parts(store, run, replicates=replicates, seed=seed, confidence=confidence)
        if run.config.pairwise is not None
        else (None, [])
    )
    lap("pairwise")
    mtbench = mtbench_section(store, run, base)
    settings = PeopleSettings(
        replicates=replicates,
        seed=seed,
        confidence=confidence,
        ability_of=ability_of,
        skill_order=skillset.names,
        ability_order=tuple(skillset.abilities),
        model_order=ranking,
        judge_order=table.judges,
    )
    people = people_section(people_rated.rows, verdict_rows, settings, run)
    lap("people")
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
            "instances": pairwise.instances if pairwise is not None else len(table.instances),
        },
        coverage=coverage,
        models=list(table.models),
        judges=list(table.judges),
        skills=[*skillset.names, *(s for s in table.skills if s not in ability_of)],
        abilities=list(skillset.abilities),
        ability_of=ability_of,
        domains=list(table.domains),
        capabilities=ordered_capabilities(table),
        tasks=ordered_tasks(table),
        definitions=definitions(table),
        notes=notes,
        judge_settings=judge_settings(run.config),
        pairwise=pairwise,
        task_capability=task_capability(table),
        reference_means=[
            ReferenceMean(*m) for m in references.model_means(rated, [r.name for r in refs])
        ],
        position_patterns=[p.as_dict() for p in found],
        scale=protocols_scale(judge_protocols(run.config).values()),
        costs=costs,
        self_consistency=consistency,
        progress=how_far,
        people=people,
        calibration=calibrated,
        suggestions=suggested,
        mtbench=mtbench,
    )


def _weights(instances: int, replicates: int, seed: int) -> Replicates:
    """The bootstrap's weights, ready for the intervals' and comparisons' products."""
    return Replicates.of(instance_weights(instances, replicates, seed))


def _timed(timings: dict[str, float] | None, name: str, fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)``, its seconds into ``timings[name]`` when given."""
    started = time.perf_counter()
    out = fn(*args)
    if timings is not None:
        timings[name] = round(time.perf_counter() - started, 4)
    return out


def pairwise_report(
    store: Store,
    run: RunInfo,
    *,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
) -> PairwiseReport:
    """Win rates, ratings (anchored at the run's baseline, else the first of its models
    as the run was given them: the same anchor for `run` and `report`), position and
    length bias of a pairwise run, with intervals resampling instances."""
    return _pairwise_parts(store, run, replicates=replicates, seed=seed, confidence=confidence)[0]


def _pairwise_parts(
    store: Store,
    run: RunInfo,
    *,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
) -> tuple[PairwiseReport, list[ScoreRow]]:
    """:func:`pairwise_report` of the run's judges, and the verdicts (people's and judges')
    of the items people gave a verdict on (none: no people)."""
    settings = run.config.pairwise or StoredPairwise()
    data = analytics.pairwise_rows(store, run.id)
    verdicts = people_verdicts(data.done)
    records = [Comparison(*row) for row in data.done if not is_person(row[4])]
    instances = instances_of(records)
    weights = instance_weights(len(instances), replicates, seed)
    models = config_models(run.config)
    turns, categories = conversation_groups(store, run.id)
    baseline = settings.baseline
    seen = {m for c in records for m in (c.first, c.second)}
    anchor = baseline if baseline is not None and baseline in seen else None
    if anchor is None:
        order = [m for m in models if m in seen] or sorted(seen)
        anchor = order[0] if order else None
    result = build_pairwise(
        records,
        weights,
        instances,
        models=[m for m in models if m in seen],
        anchor=anchor,
        run_data=PairwiseRunData(
            lengths=data.lengths,
            texts=store.run_texts(run.id)[1],  # lengths and markdown of the controlled figures
            failed={k: n for k, n in data.failed.items() if not is_person(k[0])},
            turns=turns,
            categories=categories,
        ),
        confidence=confidence,
        both_orders=settings.swap,
    )
    gold = settings.labels
    if gold:  # an imported set's gold labels (Auto-J, HHH): each judge's accuracy
        labels = [Label(*label) for label in gold]
        groups = analytics.instance_tasks(store, run.id)
        result.label_accuracy = label_accuracy(records, labels, groups)
    open_rows = sum(n for key, n in data.pending.items() if not is_person(key[0]))
    if open_rows:
        result.notes.append(f"{open_rows} pairwise judgments are not finished and are left out")
    return result, verdicts


def agreement_for_run(
    store: Store, run: RunInfo, refs: Sequence[references.Reference] = ()
) -> tuple[list[Agreement], list[str]]:
    skillset = codec.from_data(run.config.skills)
    table, notes = _with_references(split_people(run_table(store, run))[0], refs)
    return agreement_rows(table, skill_order=skillset.names), notes
