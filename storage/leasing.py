"""The ledger's worker side: claims and leases, halts and worker heartbeats.

A mixin of ``storage.store.Store`` (kept apart to keep each module readable); the
dialects implement ``_claim`` and ``_insert_ignore`` (``storage.sqlite_store``,
``storage.postgres_store``).

A claim takes a row for ``lease_seconds`` and returns its claim count as the claim's
token (``JobContext.claims``): every later claim of the row raises the count, so a worker
can tell, in one statement for all its rows, which of them are still its own
(:meth:`WorkerLedger.extend_leases`) before it pays for them again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Table, delete, func, select, tuple_, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.elements import ColumnElement

from flask_eval.core.errors import Status
from flask_eval.storage.models import JUDGE_HALT, JUDGMENT, RUN, WORKER, utcnow
from flask_eval.storage.predicates import visible
from flask_eval.storage.records import Halt, JobContext
from flask_eval.storage.retry import transient_retry

J, RN = JUDGMENT.c, RUN.c


def _held(held: Mapping[int, int]) -> ColumnElement[bool]:
    """The rows of ``held`` (row id -> claim token) still under those claims."""
    return tuple_(J.id, J.claims).in_(list(held.items()))


def _aware(moment: datetime) -> datetime:
    """SQLite hands timestamps back without their zone (they were stored in UTC)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


class WorkerLedger:
    """What workers do in the ledger beyond writing their results."""

    engine: Engine
    dialect: str

    # -- the dialect's hot paths ---------------------------------------------------------

    def _claim(
        self, conn: Connection, run_id: int, ids: Sequence[int], now: datetime, until: datetime
    ) -> list[JobContext]:
        """Claim the rows of ``run_id`` among ``ids`` that are still to judge; return what
        judging them needs."""
        raise NotImplementedError

    def _insert_ignore(
        self, conn: Connection, table: Table, rows: Iterable[dict[str, Any]]
    ) -> None:
        """``INSERT ... ON CONFLICT DO NOTHING`` of many rows."""
        raise NotImplementedError

    def _bulk_load(
        self,
        conn: Connection,
        table: Table,
        columns: Sequence[str],
        rows: Iterable[tuple[Any, ...]],
    ) -> None:
        """Insert many new rows (``columns`` of each tuple) that cannot conflict: a new
        run's, streamed (COPY on PostgreSQL), in the caller's transaction."""
        raise NotImplementedError

    def _ledger_id(self, conn: Connection, before: bool) -> int:
        """Around a new run's ledger load, in its transaction: the last ledger id handed
        out, taken ``before`` the rows and after them. When the two differ by the rows'
        count, the rows took the ids in between, in the order they were loaded."""
        raise NotImplementedError

    def _extend(self, conn: Connection, held: Mapping[int, int], until: datetime) -> set[int]:
        """Lease the rows of ``held`` still under those claims until ``until``; their ids.
        Portable: a row-value ``IN`` list (PostgreSQL overrides it)."""
        stmt = (
            update(JUDGMENT)
            .where(_held(held), J.status == Status.RUNNING.value)
            .values(lease_until=until)
            .returning(J.id)
        )
        return {int(i) for i in conn.execute(stmt).scalars()}

    # -- claims and leases ----------------------------------------------------------------

    @transient_retry
    def claim_contexts(
        self, run_id: int, ids: Sequence[int], lease_seconds: float
    ) -> list[JobContext]:
        """Claim the rows of ``run_id`` among ``ids`` that are still to judge, for
        ``lease_seconds``; return what judging them needs, in id order.

        Rows that are done, failed, running under a live lease, or of another run are not
        claimed, so two deliveries of one message never both pay for the same judgment.
        """
        if not ids:
            return []
        now = utcnow()
        with self.engine.begin() as conn:
            return self._claim(conn, run_id, ids, now, now + timedelta(seconds=lease_seconds))

    @transient_retry
    def leased(self, run_id: int, ids: Sequence[int]) -> tuple[list[int], float]:
        """Which of ``ids`` (rows a delivery could not claim) are running: under a lease
        that is still live (another delivery is judging them, or a worker died and its
        lease has not run out yet), or one that ran out since the claim looked; and the
        seconds until the last of those leases runs out (0 when all have). A lease that
        ran out between the claim and this look is one more row to look at again, never
        one to forget: on a broker that does not lose messages nothing else would send
        it again."""
        if not ids:
            return [], 0.0
        now = utcnow()
        stmt = select(J.id, J.lease_until).where(
            J.id.in_(list(ids)),
            J.run_id == run_id,
            J.status == Status.RUNNING.value,
            J.lease_until.is_not(None),  # a lease to wait for: claimable once it runs out
        )
        with self.engine.connect() as conn:
            rows = conn.execute(stmt).all()
        if not rows:
            return [], 0.0
        last = max(_aware(r.lease_until) for r in rows)
        return sorted(int(r.id) for r in rows), max(0.0, (last - now).total_seconds())

    @transient_retry
    def live_leases(self, run_id: int) -> tuple[int, float]:
        """The rows of ``run_id`` running under a lease that is still live (a process is
        judging them, or one was killed and its lease has not run out yet), and the
        seconds until the last of those leases runs out, as they stand now."""
        now = utcnow()
        stmt = select(func.count(), func.max(J.lease_until)).where(
            J.run_id == run_id, J.status == Status.RUNNING.value, J.lease_until >= now
        )
        with self.engine.connect() as conn:
            rows, last = conn.execute(stmt).one()
        if not rows or last is None:
            return 0, 0.0
        return int(rows), max(0.0, (_aware(last) - now).total_seconds())

    @transient_retry
    def release(self, ids: Sequence[int]) -> int:
        """Give claimed rows back unjudged (pending, the claim not counted)."""
        if not ids:
            return 0
        stmt = (
            update(JUDGMENT)
            .where(J.id.in_(list(ids)), J.status == Status.RUNNING.value)
            .values(status=Status.PENDING.value, lease_until=None, claims=J.claims - 1)
        )
        with self.engine.begin() as conn:
            return int(conn.execute(stmt).rowcount)

    @transient_retry
    def extend_leases(self, held: Mapping[int, int], lease_seconds: float) -> set[int]:
        """Heartbeat: renew the leases of the rows this worker still holds, ``held``
        being row id -> its claim's token (``JobContext.claims``); returns the ids renewed.
        A row missing from the answer is no longer this worker's: finished, claimed again
        by another worker after its lease ran out, or deleted with its run."""
        if not held:
            return set()
        until = utcnow() + timedelta(seconds=lease_seconds)
        with self.engine.begin() as conn:
            return self._extend(conn, held, until)

    @transient_retry
    def give_back(self, held: Mapping[int, int]) -> int:
        """Give rows this worker claimed and will not judge back to pending (``held``: row
        id -> its claim's token), unless they are no longer its own."""
        if not held:
            return 0
        stmt = (
            update(JUDGMENT)
            .where(_held(held), J.status == Status.RUNNING.value)
            .values(status=Status.PENDING.value, lease_until=None, claims=J.claims - 1)
        )
        with self.engine.begin() as conn:
            return int(conn.execute(stmt).rowcount)

    @transient_retry
    def existing_runs(self, run_ids: Iterable[int]) -> set[int]:
        """Which of ``run_ids`` still exist (the others were deleted)."""
        wanted = sorted(set(run_ids))
        if not wanted:
            return set()
        with self.engine.connect() as conn:
            stmt = select(RN.id).where(RN.id.in_(wanted), visible())  # not being deleted
            return {int(i) for i in conn.execute(stmt).scalars()}

    # -- halts and workers -------------------------------------------------------------

    @transient_retry
    def halt(self, run_id: int, judge: str, reason: str, detail: str) -> None:
        """Record that ``judge`` stops for this run (the first halt is kept; nothing for a
        run deleted meanwhile)."""
        row = {
            "run_id": run_id,
            "judge": judge,
            "reason": reason,
            "detail": detail,
            "created_at": utcnow(),
        }
        try:
            with self.engine.begin() as conn:
                if conn.execute(select(RN.id).where(RN.id == run_id)).first() is not None:
                    self._insert_ignore(conn, JUDGE_HALT, [row])
        except IntegrityError:
            if self.existing_runs([run_id]):
                raise

    @transient_retry
    def halts(self, run_id: int) -> dict[str, Halt]:
        H = JUDGE_HALT.c
        stmt = select(H.judge, H.reason, H.detail).where(H.run_id == run_id)
        with self.engine.connect() as conn:
            return {r.judge: Halt(r.judge, r.reason, r.detail) for r in conn.execute(stmt)}

    @transient_retry
    def clear_halts(self, run_id: int) -> int:
        with self.engine.begin() as conn:
            return int(
                conn.execute(delete(JUDGE_HALT).where(JUDGE_HALT.c.run_id == run_id)).rowcount
            )

    @transient_retry
    def finished_by_judge(self, run_id: int, judge: str) -> dict[tuple[str, str | None], int]:
        """(status, reason) -> rows, over the finished rows of one judge of a run."""
        stmt = (
            select(J.status, J.reason, func.count())
            .where(
                J.run_id == run_id,
                J.judge == judge,
                J.status.in_([Status.DONE.value, Status.FAILED.value]),
            )
            .group_by(J.status, J.reason)
        )
        with self.engine.connect() as conn:
            return {(str(s), r): int(n) for s, r, n in conn.execute(stmt)}

    @transient_retry
    def beat(self, name: str, queue: str, started_at: datetime, **said: str | int | None) -> None:
        """A worker process says it is alive and uses this database; ``said``: what else
        it says (``host``, ``pid``, ``in_flight``, ``calls``, ``metrics_url``)."""
        now = utcnow()
        with self.engine.begin() as conn:
            done = conn.execute(
                update(WORKER).where(WORKER.c.name == name).values(seen_at=now, queue=queue, **said)
            ).rowcount
            if not done:
                self._insert_ignore(
                    conn,
                    WORKER,
                    [
                        {
                            "name": name,
                            "queue": queue,
                            "started_at": started_at,
                            "seen_at": now,
                            **said,
                        }
                    ],
                )

    def forget_worker(self, name: str) -> None:
        """A worker that stopped withdraws its announcement (no retry: it is leaving)."""
        with self.engine.begin() as conn:
            conn.execute(delete(WORKER).where(WORKER.c.name == name))

    @transient_retry
    def live_workers(self, queue: str, within: float) -> list[str]:
        """Workers on ``queue`` that announced themselves in the last ``within`` seconds."""
        since = utcnow() - timedelta(seconds=within)
        stmt = select(WORKER.c.name).where(WORKER.c.queue == queue, WORKER.c.seen_at >= since)
        with self.engine.connect() as conn:
            return [str(r[0]) for r in conn.execute(stmt)]
