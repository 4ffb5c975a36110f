"""The provider batches in the ledger: parked calls, batches and their states.

A judge call of a batch judge lives for minutes to a day, longer than any worker's lease,
so its states are rows (``batch_call``), and so is each provider batch (``batch``): any
worker can carry on where a dead one stopped (docs/design/batches.md). Every step is one
transaction that moves rows forward only:

- :meth:`BatchLedger.park`: the call is written ``planned``, and its judgments stay
  ``running`` under a lease that outlives the batch (no sweep sends them again);
- :meth:`BatchLedger.create_batch`: the batch row (our tag) is written and its calls
  assigned to it *before* the provider hears of it;
- :meth:`BatchLedger.record`: the provider's id, state and counts;
- :meth:`BatchLedger.requeue` / :meth:`BatchLedger.fail_batch`: calls the provider did not
  answer go back to ``planned`` (or fail for good after ``max_tries``);
- :meth:`BatchLedger.retake` then :meth:`BatchLedger.mark_collected`: the judgments are
  taken back under a worker's lease, judged from the results, and the calls closed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from flask_eval.core.errors import Status
from flask_eval.storage.batch_rows import (
    BATCH_COLUMNS,
    CALL_COLUMNS,
    COLLECTED,
    CREATED,
    DUPLICATE,
    FAILED,
    OPEN_BATCH_STATES,
    PLANNED,
    SUBMITTED,
    BatchInfo,
    OpenCall,
    Parked,
    batch_row,
    open_call,
)
from flask_eval.storage.models import BATCH, BATCH_CALL, CALL, JUDGMENT, LANE_LEASE, RUN, utcnow
from flask_eval.storage.records import JobContext
from flask_eval.storage.retry import transient_retry
from flask_eval.storage.sqlite_store import CONTEXTS
from flask_eval.storage.store import Store

B, BC, J, L = BATCH.c, BATCH_CALL.c, JUDGMENT.c, LANE_LEASE.c


class BatchLedger:
    """The batch tables of one store (SQLite or PostgreSQL: portable SQL only)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.engine = store.engine

    # -- parking -------------------------------------------------------------------------

    @transient_retry
    def park(self, calls: Sequence[Parked], until: datetime) -> int:
        """Write ``calls`` as ``planned`` (a call already parked is left as it is) and keep
        their judgments ``running`` until ``until``; how many were new."""
        if not calls:
            return 0
        now = utcnow()
        with self.engine.begin() as conn:
            known = set(
                conn.execute(select(BC.uid).where(BC.uid.in_([c.uid for c in calls]))).scalars()
            )
            fresh = [c for c in calls if c.uid not in known]
            if fresh:
                conn.execute(
                    insert(BATCH_CALL),
                    [
                        {
                            "uid": c.uid,
                            "run_id": c.run_id,
                            "judge": c.judge,
                            "state": PLANNED,
                            "rows": json.dumps(list(c.rows)),
                            "cache_key": c.cache_key,
                            "request": json.dumps(c.request),
                            "tokens": c.tokens,
                            "tries": 0,
                            "created_at": now,
                            "updated_at": now,
                        }
                        for c in fresh
                    ],
                )
            ids = [i for c in calls for i in c.rows]
            conn.execute(
                update(JUDGMENT)
                .where(J.id.in_(ids), J.status == Status.RUNNING.value)
                # a new claim token: a worker's heartbeat can no longer renew (shorten) it
                .values(lease_until=until, claims=J.claims + 1, updated_at=now)
            )
        return len(fresh)

    # -- what is open --------------------------------------------------------------------

    @transient_retry
    def open_judges(self) -> list[tuple[int, str]]:
        """(run, judge) pairs with planned calls or open batches, oldest run first."""
        calls = select(BC.run_id, BC.judge).where(BC.state == PLANNED)
        batches = select(B.run_id, B.judge).where(B.state.in_(OPEN_BATCH_STATES))
        with self.engine.connect() as conn:
            pairs = {(int(r), str(j)) for r, j in conn.execute(calls.union(batches))}
        return sorted(pairs)

    @transient_retry
    def planned(self, run_id: int, judge: str, limit: int) -> list[OpenCall]:
        stmt = (
            select(*CALL_COLUMNS)
            .where(BC.state == PLANNED, BC.run_id == run_id, BC.judge == judge)
            .order_by(BC.id)
            .limit(limit)
        )
        with self.engine.connect() as conn:
            return [open_call(r) for r in conn.execute(stmt)]

    @transient_retry
    def queued_tokens(self, run_id: int, judge: str) -> int:
        """Estimated prompt tokens of this judge's calls in open batches."""
        stmt = select(func.coalesce(func.sum(BC.tokens), 0)).where(
            BC.state == SUBMITTED, BC.run_id == run_id, BC.judge == judge
        )
        with self.engine.connect() as conn:
            return int(conn.execute(stmt).scalar_one())

    @transient_retry
    def open_batches(self, run_id: int | None = None) -> list[BatchInfo]:
        stmt = select(*BATCH_COLUMNS).where(B.state.in_(OPEN_BATCH_STATES)).order_by(B.id)
        if run_id is not None:
            stmt = stmt.where(B.run_id == run_id)
        with self.engine.connect() as conn:
            return [batch_row(r) for r in conn.execute(stmt)]

    @transient_retry
    def batches(self, run_id: int) -> list[BatchInfo]:
        """Every batch of a run, oldest first (``run`` and ``status`` show them)."""
        stmt = select(*BATCH_COLUMNS).where(B.run_id == run_id).order_by(B.id)
        with self.engine.connect() as conn:
            return [batch_row(r) for r in conn.execute(stmt)]

    @transient_retry
    def summary(self, run_id: int) -> dict[str, dict[str, dict[str, int]]]:
        """A run's batch judges: judge -> {"batches": state -> count, "calls": state ->
        count} (``status`` shows it; two grouped counts, whatever the run's size)."""
        out: dict[str, dict[str, dict[str, int]]] = {}
        with self.engine.connect() as conn:
            for key, column, table in (("batches", B, BATCH), ("calls", BC, BATCH_CALL)):
                stmt = (
                    select(column.judge, column.state, func.count())
                    .select_from(table)
                    .where(column.run_id == run_id)
                    .group_by(column.judge, column.state)
                )
                for judge, state, n in conn.execute(stmt):
                    entry = out.setdefault(str(judge), {"batches": {}, "calls": {}})
                    entry[key][str(state)] = int(n)
        return out

    @transient_retry
    def duplicates(self, run_id: int) -> dict[str, int]:
        """Per judge, the answers its provider returned beyond the first of a batch request
        (each stored as a paid call: ``status`` and the report say so)."""
        C = CALL.c
        stmt = (
            select(C.judge, func.count())
            .where(C.run_id == run_id, C.finish == DUPLICATE)
            .group_by(C.judge)
        )
        with self.engine.connect() as conn:
            return {str(j): int(n) for j, n in conn.execute(stmt)}

    @transient_retry
    def calls_of(self, tag: str) -> list[OpenCall]:
        stmt = select(*CALL_COLUMNS).where(BC.batch_uid == tag).order_by(BC.id)
        with self.engine.connect() as conn:
            return [open_call(r) for r in conn.execute(stmt)]

    @transient_retry
    def call_states(self, run_id: int) -> dict[str, int]:
        """Calls of a run by state."""
        stmt = select(BC.state, func.count()).where(BC.run_id == run_id).group_by(BC.state)
        with self.engine.connect() as conn:
            return {str(s): int(n) for s, n in conn.execute(stmt)}

    # -- a batch's life ------------------------------------------------------------------

    @transient_retry
    def create_batch(
        self, tag: str, run_id: int, judge: str, provider: str, call_ids: Sequence[int]
    ) -> list[int]:
        """Write batch ``tag`` and assign to it those of ``call_ids`` still planned (their
        ids), before anything is sent; nothing when the run is gone."""
        now = utcnow()
        with self.engine.begin() as conn:
            if conn.execute(select(RUN.c.id).where(RUN.c.id == run_id)).first() is None:
                return []
            taken = list(
                conn.execute(
                    update(BATCH_CALL)
                    .where(BC.id.in_(list(call_ids)), BC.state == PLANNED)
                    .values(state=SUBMITTED, batch_uid=tag, updated_at=now)
                    .returning(BC.id)
                ).scalars()
            )
            if taken:
                conn.execute(
                    insert(BATCH).values(
                        uid=tag,
                        run_id=run_id,
                        judge=judge,
                        provider=provider,
                        state=CREATED,
                        provider_state="",
                        size=len(taken),
                        succeeded=0,
                        failed=0,
                        files="{}",
                        created_at=now,
                    )
                )
        return sorted(int(i) for i in taken)

    @transient_retry
    def record(
        self,
        tag: str,
        provider_id: str,
        provider_state: str,
        *,
        succeeded: int = 0,
        failed: int = 0,
        expires_at: datetime | None = None,
        files: Mapping[str, str] | None = None,
    ) -> None:
        """The provider holds batch ``tag`` as ``provider_id``: what it said of it."""
        now = utcnow()
        values: dict[str, Any] = {
            "provider_id": provider_id,
            "provider_state": provider_state[:40],
            "succeeded": succeeded,
            "failed": failed,
        }
        if expires_at is not None:
            values["expires_at"] = expires_at
        if files:
            values["files"] = json.dumps(dict(files))
        with self.engine.begin() as conn:
            conn.execute(
                update(BATCH)
                .where(B.uid == tag, B.state == CREATED)
                .values(state=SUBMITTED, submitted_at=now)
            )
            conn.execute(update(BATCH).where(B.uid == tag).values(**values))

    @transient_retry
    def requeue(self, uids: Sequence[str], detail: str, max_tries: int) -> list[OpenCall]:
        """Calls the provider did not answer go back to ``planned`` (another batch takes
        them), or fail for good once they were in ``max_tries`` batches; the calls failed."""
        if not uids:
            return []
        now = utcnow()
        with self.engine.begin() as conn:
            open_ = or_(BC.state == SUBMITTED, BC.state == PLANNED)
            conn.execute(
                update(BATCH_CALL)
                .where(BC.uid.in_(list(uids)), open_)
                .values(tries=BC.tries + 1, detail=detail, updated_at=now)
            )
            spent = and_(BC.uid.in_(list(uids)), open_, BC.tries >= max_tries)
            gone = [open_call(r) for r in conn.execute(select(*CALL_COLUMNS).where(spent))]
            conn.execute(update(BATCH_CALL).where(spent).values(state=FAILED))
            conn.execute(
                update(BATCH_CALL)
                .where(BC.uid.in_(list(uids)), BC.state == SUBMITTED)
                .values(state=PLANNED, batch_uid=None)
            )
        return gone

    @transient_retry
    def end_batch(self, tag: str, state: str, detail: str | None = None) -> None:
        """Batch ``tag`` is over: ``collected`` or ``failed``."""
        with self.engine.begin() as conn:
            conn.execute(
                update(BATCH)
                .where(B.uid == tag, B.state.in_(OPEN_BATCH_STATES))
                .values(state=state, detail=detail, ended_at=utcnow())
            )

    @transient_retry
    def mark_collected(self, uids: Sequence[str]) -> None:
        if uids:
            with self.engine.begin() as conn:
                conn.execute(
                    update(BATCH_CALL)
                    .where(BC.uid.in_(list(uids)))
                    .values(state=COLLECTED, updated_at=utcnow())
                )

    @transient_retry
    def retake(self, ids: Sequence[int], lease_seconds: float) -> list[JobContext]:
        """The judgments of a collected call, taken back under this worker's lease (a new
        claim token): those still ``running`` (none a deleted run's or one done since)."""
        if not ids:
            return []
        now = utcnow()
        with self.engine.begin() as conn:
            taken = list(
                conn.execute(
                    update(JUDGMENT)
                    .where(J.id.in_(list(ids)), J.status == Status.RUNNING.value)
                    .values(
                        claims=J.claims + 1,
                        lease_until=now + timedelta(seconds=lease_seconds),
                        updated_at=now,
                    )
                    .returning(J.id)
                ).scalars()
            )
            if not taken:
                return []
            rows: Any = conn.execute(CONTEXTS, {"ids": taken})
            return [JobContext.of_row(row[:-1], row[-1]) for row in rows]

    # -- the lane's lease ----------------------------------------------------------------

    @transient_retry
    def take_lease(self, name: str, holder: str, seconds: float) -> bool:
        """Hold duty ``name`` for ``seconds`` (renewed by its holder; taken over by anyone
        once it ran out). Whether ``holder`` holds it now."""
        now = utcnow()
        until = now + timedelta(seconds=seconds)
        try:
            with self.engine.begin() as conn:
                moved = conn.execute(
                    update(LANE_LEASE)
                    .where(L.name == name, or_(L.holder == holder, L.until < now))
                    .values(holder=holder, until=until)
                ).rowcount
                if moved:
                    return True
                if conn.execute(select(L.name).where(L.name == name)).first() is not None:
                    return False
                conn.execute(insert(LANE_LEASE).values(name=name, holder=holder, until=until))
                return True
        except IntegrityError:  # another worker inserted it first
            return False
