"""Read-side queries of the live view (`flask-eval status --watch`, app/progress.py): a
run's progress per judge, its recent rate, the live workers, the unfinished runs.

Each is a few grouped counts, whatever the run's size: the live view polls these once
per refresh, never the ledger per judgment (docs/design/events.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import func, select

from flask_eval.core.errors import Status
from flask_eval.storage.models import CALL, JUDGMENT, RUN, WORKER, utcnow
from flask_eval.storage.store import Store

J, C, W = JUDGMENT.c, CALL.c, WORKER.c
FINISHED = (Status.DONE.value, Status.FAILED.value)


@dataclass
class JudgeCounts:
    """One judge of a run, now: its rows by status (``leased``: running under a lease
    that has not run out), failures by reason, what it finished and paid for in the last
    ``window`` seconds, and its tokens and cost so far."""

    judge: str
    total: int = 0
    done: int = 0
    failed: int = 0
    leased: int = 0
    failed_by_reason: dict[str, int] = field(default_factory=dict)
    finished_recently: int = 0
    calls_recently: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0


def judge_counts(store: Store, run_id: int, window: float) -> dict[str, JudgeCounts]:
    """Every judge of ``run_id``, by name."""
    now = utcnow()
    since = now - timedelta(seconds=window)
    out: dict[str, JudgeCounts] = {}

    def of(judge: object) -> JudgeCounts:
        return out.setdefault(str(judge), JudgeCounts(str(judge)))

    with store.engine.connect() as conn:
        rows = conn.execute(
            select(J.judge, J.status, J.reason, func.count())
            .where(J.run_id == run_id).group_by(J.judge, J.status, J.reason)
        )  # fmt: skip
        for judge, status, reason, n in rows:
            c = of(judge)
            c.total += int(n)
            if status == Status.DONE.value:
                c.done += int(n)
            elif status == Status.FAILED.value:
                c.failed += int(n)
                c.failed_by_reason[str(reason)] = c.failed_by_reason.get(str(reason), 0) + int(n)
        leased = conn.execute(
            select(J.judge, func.count())
            .where(J.run_id == run_id, J.status == Status.RUNNING.value, J.lease_until > now)
            .group_by(J.judge)
        )  # fmt: skip
        for judge, n in leased:
            of(judge).leased = int(n)
        recent = conn.execute(
            select(J.judge, func.count())
            .where(J.run_id == run_id, J.status.in_(FINISHED), J.updated_at >= since)
            .group_by(J.judge)
        )  # fmt: skip
        for judge, n in recent:
            of(judge).finished_recently = int(n)
        paid = conn.execute(
            select(C.judge, func.count(C.id), func.count(C.id).filter(C.created_at >= since),
                   func.coalesce(func.sum(C.prompt_tokens), 0),
                   func.coalesce(func.sum(C.completion_tokens), 0),
                   func.coalesce(func.sum(C.cost), 0.0))
            .where(C.run_id == run_id).group_by(C.judge)
        )  # fmt: skip
        for judge, calls, recent_calls, ptok, ctok, cost in paid:
            c = of(judge)
            c.calls, c.calls_recently = int(calls), int(recent_calls)
            c.prompt_tokens, c.completion_tokens, c.cost = int(ptok), int(ctok), float(cost)
    return out


@dataclass(frozen=True)
class WorkerInfo:
    """A worker process as its last heartbeat described it."""

    name: str
    queue: str
    host: str
    pid: int
    started_at: datetime
    seen_at: datetime
    in_flight: int
    calls: int
    metrics_url: str | None


def workers(store: Store, within: float, queue: str | None = None) -> list[WorkerInfo]:
    """Workers seen in the last ``within`` seconds (on ``queue``, or any), by name."""
    since = utcnow() - timedelta(seconds=within)
    stmt = select(W.name, W.queue, W.host, W.pid, W.started_at, W.seen_at, W.in_flight,
                  W.calls, W.metrics_url).where(W.seen_at >= since).order_by(W.name)  # fmt: skip
    if queue is not None:
        stmt = stmt.where(W.queue == queue)
    with store.engine.connect() as conn:
        return [
            WorkerInfo(str(r.name), str(r.queue), str(r.host or ""), int(r.pid or 0),
                       r.started_at, r.seen_at, int(r.in_flight or 0), int(r.calls or 0),
                       r.metrics_url)
            for r in conn.execute(stmt)
        ]  # fmt: skip


def unfinished_runs(store: Store) -> list[str]:
    """The names of the runs with judgments pending or running, oldest first."""
    open_ = (Status.PENDING.value, Status.RUNNING.value)
    stmt = (
        select(RUN.c.name).where(RUN.c.id.in_(
            select(J.run_id).where(J.status.in_(open_)).distinct()
        )).order_by(RUN.c.id)
    )  # fmt: skip
    with store.engine.connect() as conn:
        return [str(r[0]) for r in conn.execute(stmt)]
