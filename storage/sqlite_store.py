"""The SQLite ledger (the embedded default): the worker's hot paths in portable SQL.

Statements are built once at import with bind parameters (only their parameters change
per batch: building the answer upsert per flush had cost a quarter of the write path);
a flush runs one statement per item through ``executemany``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Table, and_, bindparam, exists, func, select, update
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection

from flask_eval.core.errors import Status
from flask_eval.storage.leasing import WorkerLedger
from flask_eval.storage.models import CALL, DELETED_RUN, INSTANCE, JUDGMENT, RESPONSE, RUN
from flask_eval.storage.predicates import claimable, visible
from flask_eval.storage.records import CALL_FIELDS, CallRecord, JobContext, Outcome

J, C, INS, R, RN, DR = JUDGMENT.c, CALL.c, INSTANCE.c, RESPONSE.c, RUN.c, DELETED_RUN.c
#: the second response of a pairwise row (``model_b``; none for absolute grading)
RESPONSE_B = RESPONSE.alias("response_b")
RB = RESPONSE_B.c

INSERT_CHUNK = 5_000
#: ... or rows of this many characters of text, whichever comes first (responses are long)
INSERT_CHARS = 1 << 22

CLAIM = (
    update(JUDGMENT)
    .where(
        J.id.in_(bindparam("ids", expanding=True)),
        J.run_id == bindparam("b_run_id"),
        claimable(bindparam("now")),
    )
    .values(
        status=Status.RUNNING.value,
        claims=J.claims + 1,
        lease_until=bindparam("until"),
        updated_at=bindparam("now"),
    )
    .returning(J.id)
)
CONTEXTS = (
    select(
        J.id,
        J.run_id,
        J.model,
        J.model_b,
        J.instance_id,
        J.criterion,
        J.judge,
        INS.instruction,
        INS.answer,
        func.coalesce(R.text, ""),  # none for a row about an instance alone
        INS.system_prompt,
        INS.rubrics,
        RB.text,
        INS.history,
        INS.images,
        R.history,
        RB.history,
        J.claims,
    )
    .join(INSTANCE, and_(INS.run_id == J.run_id, INS.instance_id == J.instance_id))
    .outerjoin(
        RESPONSE, and_(R.run_id == J.run_id, R.model == J.model, R.instance_id == J.instance_id)
    )
    .outerjoin(
        RESPONSE_B,
        and_(RB.run_id == J.run_id, RB.model == J.model_b, RB.instance_id == J.instance_id),
    )
    .where(J.id.in_(bindparam("ids", expanding=True)))
    .order_by(J.id)
)
CACHED = (
    select(*(C[f] for f in CALL_FIELDS))
    .where(C.cache_key.in_(bindparam("keys", expanding=True)), C.parsed.is_(True))
    # not the answers of a run being deleted (its delete keeps only those other runs use)
    .where(~exists(select(DR.run_id).where(DR.run_id == C.run_id)))
    .order_by(C.id)
)
#: store a paid answer once per uid, never changing it (one of a run deleted meanwhile is
#: kept attached to no run, like the answers of a deleted run that other runs use) ...
INSERT_CALL = (
    sqlite.insert(CALL)
    .values(run_id=select(RN.id).where(RN.id == bindparam("b_run_id"), visible()).scalar_subquery())
    .on_conflict_do_nothing(index_elements=["uid"])
)
#: ... and end a judgment, never one already done
FINISH = (
    update(JUDGMENT)
    .where(J.id == bindparam("o_id"), J.status != Status.DONE.value)
    .values(
        status=bindparam("o_status"),
        score=bindparam("o_score"),
        rationale=bindparam("o_rationale"),
        reason=bindparam("o_reason"),
        detail=bindparam("o_detail"),
        call_uid=bindparam("o_call_uid"),
        value=bindparam("o_value"),
        asks=J.asks + bindparam("o_asks"),
        requests=J.requests + bindparam("o_requests"),
        lease_until=None,
        updated_at=bindparam("o_now"),
    )
)


class SqliteHotPaths(WorkerLedger):
    """SQLite's hot paths, which ``storage.store.SqliteStore`` puts before the portable
    ``storage.store.Store`` (one SQLite file: WAL, ``BEGIN IMMEDIATE``, a busy timeout)."""

    def _claim(
        self, conn: Connection, run_id: int, ids: Sequence[int], now: datetime, until: datetime
    ) -> list[JobContext]:
        params = {"ids": list(ids), "b_run_id": run_id, "now": now, "until": until}
        claimed = list(conn.execute(CLAIM, params).scalars())
        if not claimed:
            return []
        rows: Any = conn.execute(CONTEXTS, {"ids": claimed})
        return [JobContext.of_row(row[:-1], row[-1]) for row in rows]

    def _cached(self, conn: Connection, keys: Sequence[str]) -> dict[str, CallRecord]:
        found: dict[str, CallRecord] = {}
        for row in conn.execute(CACHED, {"keys": list(keys)}):
            found.setdefault(row[1], CallRecord(*row))
        return found

    def _write(
        self,
        conn: Connection,
        calls: Sequence[CallRecord],
        outcomes: Sequence[Outcome],
        now: datetime,
    ) -> int:
        if calls:
            conn.execute(
                INSERT_CALL,
                [
                    {
                        **{f: getattr(c, f) for f in CALL_FIELDS if f != "run_id"},
                        "b_run_id": c.run_id,
                        "created_at": now,
                    }
                    for c in calls
                ],
            )
        if not outcomes:
            return 0
        params = [
            {
                "o_id": o.id,
                "o_status": o.status.value,
                "o_score": o.score,
                "o_rationale": o.rationale,
                "o_reason": o.reason,
                "o_detail": o.detail,
                "o_call_uid": o.call_uid,
                "o_asks": o.asks,
                "o_requests": o.requests,
                "o_value": o.value,
                "o_now": now,
            }
            for o in outcomes
        ]
        return int(conn.execute(FINISH, params).rowcount)

    def _bulk_load(
        self,
        conn: Connection,
        table: Table,
        columns: Sequence[str],
        rows: Iterable[tuple[Any, ...]],
    ) -> None:
        names = ", ".join(f'"{c}"' for c in columns)
        marks = ", ".join("?" for _ in columns)
        # values as SQLAlchemy stores them (datetimes as its text form)
        procs = [table.c[c].type.bind_processor(conn.dialect) for c in columns]
        if any(procs):
            rows = (
                tuple(v if p is None else p(v) for p, v in zip(procs, row, strict=True))
                for row in rows
            )
        sql = f'INSERT INTO "{table.name}" ({names}) VALUES ({marks})'
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            chunk: list[tuple[Any, ...]] = []
            size = 0
            for row in rows:
                chunk.append(row)
                size += sum(len(v) for v in row if isinstance(v, str))
                if len(chunk) >= INSERT_CHUNK or size >= INSERT_CHARS:
                    cursor.executemany(sql, chunk)
                    chunk, size = [], 0
            if chunk:
                cursor.executemany(sql, chunk)
        finally:
            cursor.close()

    def _ledger_id(self, conn: Connection, before: bool) -> int:
        """The largest ledger id: a new row takes the next one, and the run's transaction
        holds SQLite's only write lock meanwhile."""
        return int(conn.exec_driver_sql("SELECT coalesce(max(id), 0) FROM judgment").scalar_one())

    def _insert_ignore(
        self, conn: Connection, table: Table, rows: Iterable[dict[str, Any]]
    ) -> None:
        stmt = sqlite.insert(table).on_conflict_do_nothing()
        batch: list[dict[str, Any]] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= INSERT_CHUNK:
                conn.execute(stmt, batch)
                batch = []
        if batch:
            conn.execute(stmt, batch)
