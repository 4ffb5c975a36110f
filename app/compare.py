"""`flask-eval compare BASE NEW`: the runs (or models of one run) named on the command
line, read from the store and compared with ``report.compare``.

BASE and NEW are each ``RUN`` or ``RUN:MODEL``. Two runs without a model compare every
model they share, each with itself (``models`` narrows it to those); ``RUN:MODEL`` on
both sides compares those two models (of one run or of two). A run in progress is
compared on what is finished, and the comparison's notes say how much is pending.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from flask_eval.app.progress import run_progress
from flask_eval.app.score_tables import breakdown_for, run_table
from flask_eval.core.errors import InputError
from flask_eval.report.compare import CompareSettings, Comparison, Pair, compare
from flask_eval.report.compare_align import UnknownJudge
from flask_eval.report.people_table import split_people
from flask_eval.report.scores import ScoreTable
from flask_eval.rubrics import codec, kinds
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store

MODEL_SEP = ":"


@dataclass(frozen=True)
class Side:
    """One side of a comparison as named: a run, and a model of it or None (all)."""

    spec: str
    run: RunInfo
    model: str | None


def parse_side(store: Store, spec: str) -> Side:
    """``RUN`` or ``RUN:MODEL`` (a run whose own name has a colon is found whole first)."""
    run = store.find_run(spec)
    if run is not None:
        return Side(spec, run, None)
    name, sep, model = spec.rpartition(MODEL_SEP)
    if sep and name and model:
        run = store.find_run(name)
        if run is not None:
            return Side(spec, run, model)
    raise InputError(f"no run named {spec!r} in the database (`flask-eval runs` lists them)")


def _check_kind(run: RunInfo) -> None:
    kind = kinds.of(run.config.kind)
    if not kind.scores:
        raise InputError(kind.refusal(run.name))
    if run.config.pairwise is not None:
        raise InputError(
            f"run {run.name} is a pairwise run: compare compares absolute scores; "
            f"`flask-eval report {run.name}` reports its preferences"
        )


def _table(store: Store, run: RunInfo) -> ScoreTable:
    return split_people(run_table(store, run))[0]  # people's columns are not judges


def pairs_of(
    base: Side, new: Side, tables: tuple[ScoreTable, ScoreTable], models: Sequence[str]
) -> list[Pair]:
    """The pairs of models compared (InputError for a model a side lacks)."""
    b_models, n_models = tables[0].models, tables[1].models
    for side, have in ((base, b_models), (new, n_models)):
        if side.model is not None and side.model not in have:
            known = ", ".join(have) or "none with finished judgments"
            raise InputError(
                f"{side.spec}: run {side.run.name} has no model {side.model!r} (models: {known})"
            )
    if (base.model is None) != (new.model is None):
        raise InputError("name a model on both sides (RUN:MODEL RUN:MODEL) or on neither (--model)")
    if base.model is not None and new.model is not None:
        if models:
            raise InputError("--model: the models are named in RUN:MODEL already")
        return [Pair(base.model, new.model)]
    for m in models:
        for side, have in ((base, b_models), (new, n_models)):
            if m not in have:
                raise InputError(f"--model: run {side.run.name} has no model {m!r}")
    shared = [m for m in b_models if m in set(n_models)]
    chosen = list(dict.fromkeys(models)) or shared
    if not chosen:
        raise InputError(
            f"runs {base.run.name} and {new.run.name} have no model in common; name one "
            "on each side: compare RUN:MODEL RUN:MODEL"
        )
    return [Pair(m, m) for m in chosen]


def _pending(store: Store, run: RunInfo) -> str | None:
    how_far = run_progress(store, run)
    if how_far.pending <= 0:
        return None
    return (
        f"run {run.name} is in progress: {how_far.pending:,} of {how_far.total:,} judgments "
        "pending; compared on what is finished"
    )


def compare_runs(
    store: Store,
    base_spec: str,
    new_spec: str,
    settings: CompareSettings,
    models: Sequence[str] = (),
) -> Comparison:
    """The comparison the command prints (InputError for anything it cannot compare)."""
    base, new = parse_side(store, base_spec), parse_side(store, new_spec)
    for side in (base, new):
        _check_kind(side.run)
    runs = {side.run.id: side.run for side in (base, new)}  # one run named twice: once
    notes = [n for run in runs.values() if (n := _pending(store, run)) is not None]
    base_table = _table(store, base.run)
    new_table = base_table if new.run.id == base.run.id else _table(store, new.run)
    pairs = pairs_of(base, new, (base_table, new_table), models)
    breakdown = breakdown_for(base_table, codec.from_data(base.run.config.skills))
    try:
        result = compare(base_table, new_table, pairs, breakdown, settings, (base.spec, new.spec))
    except UnknownJudge as exc:
        raise InputError(f"--judge: {exc}") from None
    except ValueError as exc:
        raise InputError(str(exc)) from None
    paired = sum(d.paired for d in result.dropped)
    if not result.judges:
        raise InputError(f"{base.spec} and {new.spec} share no judge: nothing to compare")
    if paired == 0:
        raise InputError(
            f"{base.spec} and {new.spec} have no judgment in common scored on both sides "
            "(same model, instance, criterion and judge): nothing to compare"
        )
    return _with_notes(result, notes)


def _with_notes(result: Comparison, notes: Sequence[str]) -> Comparison:
    return replace(result, notes=(*notes, *result.notes))
