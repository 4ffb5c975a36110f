"""`runs delete`: a run removed in bounded chunks, each its own short transaction
(docs/design/ledger-scale.md, docs/design/delivery.md).

1. *Tombstone* (one short transaction, the run's row locked): the run is written to
   ``deleted_run``. From then on it is invisible: `runs`, `status`, `find_run` and the
   viewer skip it, the workers drop its queued messages (``Store.run_config_text`` says
   it is gone), stop sending its claimed calls (``existing_runs``), and a paid answer
   written for it is kept attached to no run.
2. *Judgments*, then the run's other rows (people's rating items among them), ``chunk``
   at a time by id range (the primary key), each chunk a transaction of its own: other
   writers wait at most one chunk (SQLite: the database's one write lock; PostgreSQL:
   nothing of another run is locked).
3. *Paid answers*: those that judgments of other runs point at are kept, attached to no
   run (found from this run's answers once its own judgments are gone, a join); the
   others are deleted, by id range.
4. *The run* (one short transaction): what came late (an answer written meanwhile is
   detached), the run's row, its tallies.

A delete interrupted midway leaves a tombstoned run, invisible, which the next delete of
any run finishes first (``unfinished``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlalchemy import Table, delete, func, insert, select, update
from sqlalchemy.engine import Connection

from flask_eval.storage.models import (
    BATCH,
    BATCH_CALL,
    CALL,
    CALL_TALLY,
    DELETED_RUN,
    IMAGE,
    INSTANCE,
    INSTANCE_DOMAIN,
    JUDGE_HALT,
    JUDGMENT,
    JUDGMENT_TALLY,
    RATING_ITEM,
    REPORT_SNAPSHOT,
    RESPONSE,
    RUN,
    utcnow,
)
from flask_eval.storage.predicates import visible

if TYPE_CHECKING:
    from flask_eval.storage.leasing import WorkerLedger

J, C, RN, D, INS = JUDGMENT.c, CALL.c, RUN.c, DELETED_RUN.c, INSTANCE.c
C2 = CALL.alias("mine").c

#: rows deleted per transaction (~0.1-0.3 s each on PostgreSQL)
CHUNK = 10_000


def unfinished(conn: Connection) -> list[int]:
    """Runs whose delete was interrupted: tombstoned, their row still there."""
    return [int(r[0]) for r in conn.execute(select(RN.id).where(~visible()).order_by(RN.id))]


def tombstone(store: WorkerLedger, run_id: int) -> None:
    """Step 1: make the run invisible (NoResultFound if there is no such run)."""
    with store.engine.begin() as conn:
        stmt = select(RN.name).where(RN.id == run_id)
        if store.dialect == "postgresql":
            stmt = stmt.with_for_update()
        name = conn.execute(stmt).scalar_one()
        # SQLite may give a deleted run's id to the next run: one tombstone per id
        conn.execute(delete(DELETED_RUN).where(D.run_id == run_id))
        conn.execute(insert(DELETED_RUN).values(run_id=run_id, name=name, deleted_at=utcnow()))


def _bounds(conn: Connection, table: Table, run_id: int) -> tuple[int, int] | None:
    low, high = conn.execute(
        select(func.min(table.c.id), func.max(table.c.id)).where(table.c.run_id == run_id)
    ).one()
    return None if low is None else (int(low), int(high))


def _by_range(
    store: WorkerLedger,
    table: Table,
    run_id: int,
    chunk: int,
    step: Callable[[], None],
    statement: Callable[[Any, Any], Any],
) -> None:
    """Run ``statement(low, high)`` over the run's rows of ``table`` in id ranges."""
    with store.engine.connect() as conn:
        bounds = _bounds(conn, table, run_id)
    if bounds is None:
        return
    low, high = bounds
    while low <= high:
        with store.engine.begin() as conn:
            conn.execute(statement(low, low + chunk))
        step()
        low += chunk


def _deleting(table: Table, run_id: int) -> Callable[[Any, Any], Any]:
    return lambda low, high: delete(table).where(
        table.c.run_id == run_id, table.c.id >= low, table.c.id < high
    )


def remove_rows(store: WorkerLedger, run_id: int, chunk: int, step: Callable[[], None]) -> None:
    """Steps 2 and 3."""
    for table in (JUDGMENT, RATING_ITEM, BATCH_CALL, BATCH):
        _by_range(store, table, run_id, chunk, step, _deleting(table, run_id))
    with store.engine.begin() as conn:  # a few rows
        for table in (JUDGE_HALT, REPORT_SNAPSHOT):
            conn.execute(delete(table).where(table.c.run_id == run_id))
    per = max(1, chunk // 32)  # instances per chunk (a response per model, a few domains)
    while True:
        with store.engine.begin() as conn:
            ids = list(
                conn.execute(
                    select(INS.instance_id)
                    .where(INS.run_id == run_id)
                    .order_by(INS.instance_id)
                    .limit(per)
                ).scalars()
            )
            if not ids:
                break
            for table in (RESPONSE, INSTANCE_DOMAIN, INSTANCE):
                conn.execute(
                    delete(table).where(table.c.run_id == run_id, table.c.instance_id.in_(ids))
                )
        step()
    mine = select(C2.uid).where(C2.run_id == run_id)
    used_elsewhere = select(J.call_uid).where(J.call_uid.in_(mine))  # its own rows are gone
    with store.engine.connect() as conn:  # a read: nothing waits for it
        used = list(
            conn.execute(
                select(C.id).where(C.run_id == run_id, C.uid.in_(used_elsewhere))
            ).scalars()
        )
    for start in range(0, len(used), chunk):
        with store.engine.begin() as conn:
            conn.execute(
                update(CALL).where(C.id.in_(used[start : start + chunk])).values(run_id=None)
            )
        step()
    _by_range(store, CALL, run_id, chunk, step, _deleting(CALL, run_id))


def finish(store: WorkerLedger, run_id: int) -> None:
    """Step 4."""
    with store.engine.begin() as conn:
        stmt = select(RN.id).where(RN.id == run_id)
        if store.dialect == "postgresql":
            stmt = stmt.with_for_update()
        if conn.execute(stmt).first() is None:
            return
        conn.execute(update(CALL).where(C.run_id == run_id).values(run_id=None))  # late
        # anything the chunks did not reach (none, usually: each is an indexed no-op)
        for table in (
            JUDGMENT,
            RATING_ITEM,
            BATCH_CALL,
            BATCH,
            JUDGE_HALT,
            REPORT_SNAPSHOT,
            RESPONSE,
            INSTANCE_DOMAIN,
            INSTANCE,
            IMAGE,
        ):
            conn.execute(delete(table).where(table.c.run_id == run_id))
        conn.execute(delete(RUN).where(RN.id == run_id))
        for table in (JUDGMENT_TALLY, CALL_TALLY):
            conn.execute(delete(table).where(table.c.run_id == run_id))
