"""Read-side queries of the live view (`flask-eval status --watch`, app/progress.py): a
run's progress per judge, its recent rate, the live workers, the unfinished runs.

Each is a few grouped counts (the tallies on PostgreSQL, ``storage.tally``, then the
running rows and the last minute's on their indexes), whatever the run's size: the live
view polls these once per refresh, never the ledger per judgment (docs/design/events.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import func, select

from flask_eval.core.errors import Status
from flask_eval.core.people import is_person
from flask_eval.storage import tally
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
    """Every judge of ``run_id``, by name (people are no judges: the live view counts
    calls to providers; ``storage.queries.status`` counts people's ratings)."""
    now = utcnow()
    since = now - timedelta(seconds=window)
    out: dict[str, JudgeCounts] = {}

    def of(judge: object) -> JudgeCounts:
        return out.setdefault(str(judge), JudgeCounts(str(judge)))

    with store.engine.connect() as conn:
        for judge, status, reason, n in tally.judgment_counts(conn, run_id):
            if is_person(judge):
                continue
            c = of(judge)
            c.total += n
            if status == Status.DONE.value:
                c.done += n
            elif status == Status.FAILED.value:
                c.failed += n
                c.failed_by_reason[str(reason)] = c.failed_by_reason.get(str(reason), 0) + n
        leased = conn.execute(  # the running rows alone, on ix_judgment_run_status
            select(J.judge, func.count())
            .where(J.run_id == run_id, J.status == Status.RUNNING.value, J.lease_until > now)
            .group_by(J.judge)
        )
        for judge, n in leased:
            of(judge).leased = int(n)
        recent = conn.execute(  # the last minute alone, on ix_judgment_run_updated
            select(J.judge, func.count())
            .where(J.run_id == run_id, J.updated_at >= since, J.status.in_(FINISHED))
            .group_by(J.judge)
        )
        for judge, n in recent:
            if is_person(str(judge)):
                continue
            of(judge).finished_recently = int(n)
        for judge, sums in tally.call_totals(conn, run_id).items():
            c = of(judge)
            c.calls = int(sums["calls"])
            c.prompt_tokens, c.completion_tokens = (
                int(sums["prompt_tokens"]),
                int(sums["completion_tokens"]),
            )
            c.cost = float(sums["cost"])
        paid = conn.execute(  # the last minute alone, on ix_call_run_created
            select(C.judge, func.count(C.id))
            .where(C.run_id == run_id, C.created_at >= since)
            .group_by(C.judge)
        )
        for judge, n in paid:
            of(judge).calls_recently = int(n)
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
    stmt = (
        select(
            W.name,
            W.queue,
            W.host,
            W.pid,
            W.started_at,
            W.seen_at,
            W.in_flight,
            W.calls,
            W.metrics_url,
        )
        .where(W.seen_at >= since)
        .order_by(W.name)
    )
    if queue is not None:
        stmt = stmt.where(W.queue == queue)
    with store.engine.connect() as conn:
        return [
            WorkerInfo(
                str(r.name),
                str(r.queue),
                str(r.host or ""),
                int(r.pid or 0),
                r.started_at,
                r.seen_at,
                int(r.in_flight or 0),
                int(r.calls or 0),
                r.metrics_url,
            )
            for r in conn.execute(stmt)
        ]


def unfinished_runs(store: Store) -> list[str]:
    """The names of the runs with judgments pending or running, oldest first."""
    with store.engine.connect() as conn:
        ids = tally.runs_with_open(conn)
        stmt = select(RUN.c.name).where(RUN.c.id.in_(ids)).order_by(RUN.c.id)
        return [str(r[0]) for r in conn.execute(stmt)]
