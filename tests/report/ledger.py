"""Runs written straight into a ledger, for report tests: planned as `run` plans them
(``app.pipeline.prepare`` and ``producer.plan.run_config``), finished by a function of
each row instead of by judges (in-process, no simulator, no network)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import update

from flask_eval.app import pipeline
from flask_eval.core.spec import run_spec
from flask_eval.producer.plan import run_config
from flask_eval.storage.models import JUDGMENT
from flask_eval.storage.records import OpenRow as Row  # a ledger row: id, model, model_b, ...
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store

#: what a row becomes: (status, score) or (status, score, call_uid); None leaves it pending
Outcome = tuple[str, int | None] | tuple[str, int | None, str | None] | None


def planned_run(store: Store, name: str, **prepare: Any) -> RunInfo:
    """A run planned as `flask-eval run` plans it (``prepare``'s keywords: inputs, judges,
    pairwise...), its ledger pending."""
    plan = pipeline.prepare(run_spec(run_name=name, **prepare))
    config = run_config(plan.inputs, plan.judges, plan.judging(), plan.instances_path)
    run, _ = store.create_run(
        name=plan.name,
        fingerprint=plan.fingerprint,
        mode=plan.mode,
        config=config,
        instances=plan.inputs.instances,
        response_sets=plan.inputs.response_sets,
        judges=[j.name for j in plan.judges],
        pairs=plan.pairs,
    )
    return run


def finish(store: Store, run: RunInfo, outcome: Callable[[Row], Outcome]) -> list[Row]:
    """Write ``outcome(row)`` into every row of the run (in id order); returns the rows."""
    j = JUDGMENT.c
    with store.engine.begin() as conn:
        rows = [
            Row(*r)
            for r in conn.execute(
                JUDGMENT.select()
                .with_only_columns(j.id, j.model, j.model_b, j.instance_id, j.criterion, j.judge)
                .where(j.run_id == run.id)
                .order_by(j.id)
            )
        ]
        for row in rows:
            result = outcome(row)
            if result is None:
                continue
            status, score, *call = result
            values: dict[str, Any] = {"status": status, "score": score}
            if call:
                values["call_uid"] = call[0]
            conn.execute(update(JUDGMENT).where(j.id == row.id).values(**values))
    return rows


def every_ending(row: Row, scored: Callable[[Row, str], Outcome]) -> Outcome:
    """Each way a row ends, by its id: pending, failed with and without an answer, N/A,
    and (judge ``split``) scored by two calls for one response, interleaved by id; the
    other rows ``scored(row, call)``, ``call`` their call's uid."""
    base = f"{row.judge}-{row.model}-{row.instance_id}"
    k = row.id % 7
    if k == 0:
        return None  # pending
    if k == 1:
        return "failed", None, None if row.id % 2 else base  # with and without an answer
    if k == 2:
        return "done", None, base  # N/A
    if row.judge == "split":  # two calls for one response, interleaved by id
        return "done", 1 + row.id % 3, f"{base}-{row.id % 2}"
    return scored(row, base)


def judges(*names: str) -> Sequence[str]:
    """``--judge`` values for judges that are never called (the ledger is written here)."""
    return [f"{name}=openai/{name}" for name in names]
