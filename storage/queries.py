"""Read-side queries: status counts, coverage, costs and the runs overview (the export is
``storage/exports.py``).

The report's numbers come from one pivot query in ``storage/analytics.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select, text

from flask_eval.core.errors import Status
from flask_eval.core.people import is_person
from flask_eval.core.stored import StoredConfig
from flask_eval.rubrics.kind import NO_MODEL
from flask_eval.storage import tally
from flask_eval.storage.models import (
    CALL,
    INSTANCE,
    INSTANCE_DOMAIN,
    JUDGMENT,
    REPLAYED,
    RESPONSE,
    UNTRUSTED,
    utcnow,
)
from flask_eval.storage.predicates import claimable, model_not_twin, person
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store

J, C, INS, DOM, R = JUDGMENT.c, CALL.c, INSTANCE.c, INSTANCE_DOMAIN.c, RESPONSE.c


@dataclass(frozen=True)
class StatusCounts:
    run: str
    total: int
    done: int
    failed: int
    pending: int  # pending + running: not finished yet
    failed_by_reason: dict[str, int] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    cost: float = 0.0
    #: of ``prompt_tokens``: read from the providers' prompt caches / written to them
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    #: calls made through a provider's batch API (of ``calls``)
    batch_calls: int = 0
    #: calls whose usage was not trusted, counted and costed at a safe estimate (of ``calls``)
    untrusted: int = 0
    #: people's rows (``human/...``), never in the counts above (which are the judges'):
    #: not rated yet (status ``waiting``), rated, and flagged "cannot judge"
    waiting: int = 0
    rated: int = 0
    flagged: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "total": self.total,
            "done": self.done,
            "failed": self.failed,
            "pending": self.pending,
            "failed_by_reason": self.failed_by_reason,
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "batch_calls": self.batch_calls,
            "untrusted_usage_calls": self.untrusted,
            "cost": round(self.cost, 6),
            **(
                {"people": {"rated": self.rated, "flagged": self.flagged, "waiting": self.waiting}}
                if self.rated or self.flagged or self.waiting
                else {}
            ),
        }


def status(store: Store, run_id: int, run_name: str) -> StatusCounts:
    """The run's judgments by status and failure reason and its paid calls summed: a few
    dozen rows of the tallies on PostgreSQL (``storage.tally``), the ledger grouped on
    SQLite."""
    with store.engine.connect() as conn:
        counts: dict[str, int] = {}
        people: dict[str, int] = {}
        reasons: dict[str | None, int] = {}
        for judge, status_, reason, n in tally.judgment_counts(conn, run_id):
            if is_person(judge):
                people[status_] = people.get(status_, 0) + n
                continue
            counts[status_] = counts.get(status_, 0) + n
            if status_ == Status.FAILED.value:
                reasons[reason] = reasons.get(reason, 0) + n
        sums = [0.0] * 7
        for sums_of_judge in tally.call_totals(conn, run_id).values():
            sums = [a + b for a, b in zip(sums, sums_of_judge.values(), strict=True)]
        calls, batched, ptok, ctok, cached, written, cost = sums
        untrusted = conn.execute(_untrusted(run_id)).scalar_one()
    done = counts.get(Status.DONE.value, 0)
    failed = counts.get(Status.FAILED.value, 0)
    open_ = counts.get(Status.PENDING.value, 0) + counts.get(Status.RUNNING.value, 0)
    return StatusCounts(
        run=run_name,
        total=done + failed + open_,
        done=done,
        failed=failed,
        pending=open_,
        failed_by_reason={str(k): int(v) for k, v in sorted(reasons.items(), key=str)},
        prompt_tokens=int(ptok),
        completion_tokens=int(ctok),
        calls=int(calls),
        cost=float(cost),
        cached_tokens=int(cached),
        cache_write_tokens=int(written),
        batch_calls=int(batched),
        untrusted=int(untrusted),
        waiting=people.get(Status.WAITING.value, 0),
        rated=people.get(Status.DONE.value, 0),
        flagged=people.get(Status.FAILED.value, 0),
    )


def _untrusted(run_id: int) -> Any:
    """The count of the run's calls whose usage was not trusted (``ix_call_untrusted``)."""
    return select(func.count()).select_from(CALL).where(C.run_id == run_id, text(UNTRUSTED))


def judge_costs(store: Store, run_id: int) -> list[dict[str, Any]]:
    """Per judge of the run's paid calls, by judge name: calls, batched calls, prompt
    tokens (and of them, those read from and written to the prompt cache), completion
    tokens and cost, as metered by the workers."""
    stmt = (
        select(
            C.judge,
            func.count(C.id),
            func.count(C.id).filter(C.batch.is_(True)),
            func.coalesce(func.sum(C.prompt_tokens), 0),
            func.coalesce(func.sum(C.cached_tokens), 0),
            func.coalesce(func.sum(C.cache_write_tokens), 0),
            func.coalesce(func.sum(C.completion_tokens), 0),
            func.coalesce(func.sum(C.cost), 0.0),
            func.count(C.id).filter(C.usage_note.is_not(None)),
        )
        .where(C.run_id == run_id)
        .group_by(C.judge)
        .order_by(C.judge)
    )
    keys = (
        "judge",
        "calls",
        "batch_calls",
        "prompt_tokens",
        "cached_tokens",
        "cache_write_tokens",
        "completion_tokens",
        "cost",
        "untrusted",
    )
    with store.engine.connect() as conn:
        rows = conn.execute(stmt).all()
    return [
        dict(zip(keys, (str(r[0]), *(int(v) for v in r[1:7]), float(r[7]), int(r[8])), strict=True))
        for r in rows
    ]


def coverage(store: Store, run_id: int) -> dict[str, tuple[int, int]]:
    """model -> (instances answered, instances in the run); a probe's twins are no
    models of their own (``core.probes``)."""
    with store.engine.connect() as conn:
        total = conn.execute(
            select(func.count()).select_from(INSTANCE).where(INS.run_id == run_id)
        ).scalar_one()
        rows = conn.execute(
            select(R.model, func.count())
            .where(R.run_id == run_id, model_not_twin(R.model))
            .group_by(R.model)
            .order_by(R.model)
        ).all()
    return {m: (int(n), int(total)) for m, n in rows}


def stale_open_runs(store: Store, older_than: float, queue: str) -> list[RunInfo]:
    """Runs with rows still to judge (see ``statements.claimable``) untouched for
    ``older_than`` seconds, whose producer sent every open call to ``queue``."""
    now = utcnow()
    stmt = (
        select(J.run_id)
        .where(J.updated_at < now - timedelta(seconds=older_than), claimable(now))
        .group_by(J.run_id)
    )
    with store.engine.connect() as conn:
        ids = [int(r[0]) for r in conn.execute(stmt)]
    runs = [store.run_by_id(i) for i in ids]
    return [r for r in runs if r.config.dispatched == queue]


def runs_overview(store: Store) -> list[dict[str, Any]]:
    """Every run, newest first: name, created, models, judges, done/failed/total, cost."""
    from flask_eval.storage.models import CALL_TALLY, JUDGMENT_TALLY, RUN
    from flask_eval.storage.predicates import visible

    RN, T, CT = RUN.c, JUDGMENT_TALLY.c, CALL_TALLY.c
    with store.engine.connect() as conn:
        runs = conn.execute(
            select(RN.id, RN.name, RN.created_at, RN.config).where(visible()).order_by(RN.id.desc())
        ).all()
        counts = tally.status_by_run(conn, [int(r[0]) for r in runs])
        # models: those with responses (a pairwise baseline may only appear as model_b);
        # a probe's twins are no models of their own, nor is the stand-in holding a
        # generation's earlier answers (``app.turns``: its model is ``''``)
        answered: dict[int, int] = dict(
            conn.execute(
                select(R.run_id, func.count(func.distinct(R.model)))
                .where(model_not_twin(R.model), R.model != NO_MODEL)
                .group_by(R.run_id)
            ).all()
        )
        of_run = (  # PostgreSQL: the tally's judges (a run's rows are not read)
            select(T.run_id, func.count(func.distinct(T.judge)))
            .where(T.n != 0, ~person(T.judge))
            .group_by(T.run_id)
            if store.dialect == "postgresql"
            else select(J.run_id, func.count(func.distinct(J.judge)))
            .where(~person(J.judge))
            .group_by(J.run_id)
        )
        sizes = {int(r[0]): (int(answered.get(r[0], 0)), int(r[1])) for r in conn.execute(of_run)}
        costs = {
            int(r[0]): (float(r[1] or 0.0), int(r[2] or 0), int(r[3] or 0))
            for r in conn.execute(
                select(
                    CT.run_id,
                    func.sum(CT.cost),
                    func.sum(CT.cached_tokens),
                    func.sum(CT.cache_write_tokens),
                ).group_by(CT.run_id)
                if store.dialect == "postgresql"  # the tally, not every paid call
                else select(
                    C.run_id,
                    func.sum(C.cost),
                    func.sum(C.cached_tokens),
                    func.sum(C.cache_write_tokens),
                )
                .where(C.run_id.is_not(None))
                .group_by(C.run_id)
            )
        }
    overview = []
    for run_id, name, created, config in runs:
        by_status = counts.get(int(run_id), {})
        models, judges = sizes.get(int(run_id), (0, 0))
        cost, cached, written = costs.get(int(run_id), (0.0, 0, 0))
        overview.append(
            {
                "name": str(name),
                "created": created.strftime("%Y-%m-%d %H:%M") if created else "",
                "models": models,
                "judges": judges,
                "done": by_status.get(Status.DONE.value, 0),
                "failed": by_status.get(Status.FAILED.value, 0),
                "total": sum(  # people's rows not rated yet are not counted
                    n for s, n in by_status.items() if s != Status.WAITING.value
                ),
                "cost": cost,
                "judge_configs": StoredConfig.from_text(config).judges,
                "cached_tokens": cached,
                "cache_write_tokens": written,
            }
        )
    return overview


@dataclass(frozen=True)
class FailureCause:
    """The failed judgments of one judge for one reason, with one of their details."""

    judge: str
    reason: str
    count: int
    detail: str


def failure_causes(store: Store, run_id: int) -> list[FailureCause]:
    """Per judge and failure reason: how many judgments failed, and one detail (the
    least, in text order: any of them says the cause), most failures first."""
    stmt = (
        select(J.judge, J.reason, func.count(), func.min(J.detail))
        .where(J.run_id == run_id, J.status == Status.FAILED.value)
        .group_by(J.judge, J.reason)
    )
    with store.engine.connect() as conn:
        rows = conn.execute(stmt).all()
    causes = [FailureCause(str(j), str(r), int(n), str(d or "")) for j, r, n, d in rows]
    return sorted(causes, key=lambda c: (-c.count, c.judge, c.reason))


def cache_answered(store: Store, run_id: int) -> int:
    """Judge calls of the run answered from the answer cache (an answer paid before,
    by this run or another): the distinct answers of its judgments that sent no request."""
    stmt = select(func.count(func.distinct(J.call_uid))).where(
        J.run_id == run_id,
        text(REPLAYED),  # ix_judgment_replayed's rows
    )
    with store.engine.connect() as conn:
        return int(conn.execute(stmt).scalar_one())


@dataclass(frozen=True)
class DoneValue:
    """A done row of a generation or annotation run: what it read (``value``), its
    rationale, and the paid answer it was read from (``finish``: why the provider stopped;
    ``length`` marks a response cut off by its token limit; None when the answer is
    gone)."""

    instance_id: str
    criterion: str
    judge: str
    value: str | None
    rationale: str | None
    finish: str | None
    prompt_tokens: int
    completion_tokens: int
    cost: float


def done_values(store: Store, run_id: int) -> list[DoneValue]:
    """Every done row of ``run_id`` with its value and answer, by instance and judge."""
    stmt = (
        select(
            J.instance_id,
            J.criterion,
            J.judge,
            J.value,
            J.rationale,
            C.finish,
            C.prompt_tokens,
            C.completion_tokens,
            C.cost,
        )
        .select_from(JUDGMENT)
        .outerjoin(CALL, C.uid == J.call_uid)
        .where(J.run_id == run_id, J.status == Status.DONE.value)
        .order_by(J.instance_id, J.judge, J.criterion)
    )
    with store.engine.connect() as conn:
        return [
            DoneValue(
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                int(r[6] or 0),
                int(r[7] or 0),
                float(r[8] or 0.0),
            )
            for r in conn.execute(stmt)
        ]
