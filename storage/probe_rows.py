"""What a judge card reads of a run (``app.probe_card``): every finished row of the ledger,
the responses' texts and each judge's calls (their latency and cost), in three
statements."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select

from flask_eval.core.errors import Status
from flask_eval.storage.models import CALL, JUDGMENT, RESPONSE
from flask_eval.storage.store import Store

J, R, C = JUDGMENT.c, RESPONSE.c, CALL.c


@dataclass(frozen=True)
class LedgerRow:
    """One finished row (done or failed): ``score`` None when done means N/A."""

    judge: str
    model: str
    model_b: str
    instance: str
    criterion: str
    done: bool
    score: int | None
    reason: str | None


@dataclass(frozen=True)
class CallStats:
    """One judge's (or sample's) calls in the run: how many, their mean latency and their
    total cost (USD)."""

    judge: str
    calls: int
    latency_ms: float
    cost: float


def finished_rows(store: Store, run_id: int) -> list[LedgerRow]:
    """The run's done and failed rows, in the ledger's order."""
    stmt = (
        select(J.judge, J.model, J.model_b, J.instance_id, J.criterion, J.status, J.score, J.reason)
        .where(J.run_id == run_id)
        .where(J.status.in_((Status.DONE.value, Status.FAILED.value)))
        .order_by(J.id)
    )
    with store.engine.connect() as conn:
        return [
            LedgerRow(
                str(judge),
                str(model),
                str(model_b),
                str(instance),
                str(criterion),
                status == Status.DONE.value,
                None if score is None else int(score),
                None if reason is None else str(reason),
            )
            for judge, model, model_b, instance, criterion, status, score, reason in conn.execute(
                stmt
            )
        ]


def response_texts(store: Store, run_id: int) -> dict[tuple[str, str], str]:
    """(model, instance) -> the response's text, every response of the run."""
    stmt = select(R.model, R.instance_id, R.text).where(R.run_id == run_id)
    with store.engine.connect() as conn:
        return {(str(m), str(i)): str(t) for m, i, t in conn.execute(stmt)}


def call_stats(store: Store, run_id: int) -> list[CallStats]:
    """Per judge name (a sample's own), the run's calls: count, mean latency, cost."""
    stmt = (
        select(C.judge, func.count(), func.avg(C.latency_ms), func.sum(C.cost))
        .where(C.run_id == run_id)
        .group_by(C.judge)
        .order_by(C.judge)
    )
    with store.engine.connect() as conn:
        return [
            CallStats(str(judge), int(n), float(latency or 0.0), float(cost or 0.0))
            for judge, n, latency, cost in conn.execute(stmt)
        ]
