"""The store: runs, inputs and the judgment ledger. All SQL writes live here.

Every write is idempotent: inserts ignore rows that exist, and a judgment only moves
forward (pending -> running -> done/failed), so a redelivered or duplicated message
changes nothing that is already done.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import Table, func, select, update
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection, Engine

from flask_eval.exceptions import RunConflictError
from producer.schema import Instance, ResponseSet
from storage import bulk, statements
from storage.db import make_engine
from storage.models import (
    CALL,
    INSTANCE,
    INSTANCE_DOMAIN,
    JUDGMENT,
    RESPONSE,
    RUN,
    Status,
    utcnow,
)
from storage.records import CallRecord, JobContext, Outcome, PlannedCall, RunInfo
from storage.retry import transient_retry

INSERT_CHUNK = 5_000

J, C, INS, DOM, R, RN = JUDGMENT.c, CALL.c, INSTANCE.c, INSTANCE_DOMAIN.c, RESPONSE.c, RUN.c


def _outcome_params(o: Outcome) -> dict[str, Any]:
    return {
        "o_id": o.id,
        "o_status": o.status.value,
        "o_score": o.score,
        "o_rationale": o.rationale,
        "o_reason": o.reason,
        "o_detail": o.detail,
        "o_call_key": o.call_key,
        "o_now": utcnow(),
    }


class Store:
    """The SQL store behind one engine (SQLite file or PostgreSQL)."""

    def __init__(self, url_or_engine: str | Engine) -> None:
        self.engine = (
            make_engine(url_or_engine) if isinstance(url_or_engine, str) else url_or_engine
        )
        self.dialect = self.engine.dialect.name

    def close(self) -> None:
        self.engine.dispose()

    # -- runs and inputs ---------------------------------------------------------------

    @transient_retry
    def find_run(self, name: str | None = None) -> RunInfo | None:
        """The run called ``name``, or the latest run when ``name`` is None."""
        stmt = select(RUN)
        stmt = stmt.where(RN.name == name) if name is not None else stmt.order_by(RN.id.desc())
        with self.engine.connect() as conn:
            row = conn.execute(stmt.limit(1)).mappings().first()
        if row is None:
            return None
        return RunInfo(
            row["id"], row["name"], row["fingerprint"], row["mode"], json.loads(row["config"])
        )

    @transient_retry
    def run_by_id(self, run_id: int) -> RunInfo:
        with self.engine.connect() as conn:
            row = conn.execute(select(RUN).where(RN.id == run_id)).mappings().one()
        return RunInfo(
            row["id"], row["name"], row["fingerprint"], row["mode"], json.loads(row["config"])
        )

    @transient_retry
    def set_dispatched(self, run_id: int, queue: str | None) -> None:
        """The queue to which every open call of the run was sent, or None when some were
        held back (see workers/sweeper.py)."""
        with self.engine.begin() as conn:
            config = json.loads(conn.execute(select(RN.config).where(RN.id == run_id)).scalar_one())
            config["dispatched"] = queue
            conn.execute(update(RUN).where(RN.id == run_id).values(config=json.dumps(config)))

    def create_run(
        self,
        *,
        name: str,
        fingerprint: str,
        mode: str,
        config: dict[str, Any],
        instances: Sequence[Instance],
        response_sets: Sequence[ResponseSet],
        judges: Sequence[str],
    ) -> tuple[RunInfo, bool]:
        """Create the run with its inputs and pending ledger, in one transaction.

        Returns (run, created). Reusing a name with a different fingerprint raises
        RunConflictError and writes nothing.
        """
        existing = self.find_run(name)
        if existing is not None:
            if existing.fingerprint != fingerprint:
                raise RunConflictError(
                    f"run {name!r} exists with different inputs, judges or mode; "
                    "pick another --run name to start a new run"
                )
            return existing, False
        by_id = {inst.id: inst for inst in instances}
        with self.engine.begin() as conn:
            run_id = conn.execute(
                RUN.insert()
                .values(
                    name=name,
                    fingerprint=fingerprint,
                    mode=mode,
                    config=json.dumps(config, sort_keys=True),
                    created_at=utcnow(),
                )
                .returning(RN.id)
            ).scalar_one()
            self._insert_ignore(
                conn,
                INSTANCE,
                (
                    {
                        "run_id": run_id,
                        "instance_id": i.id,
                        "instruction": i.instruction,
                        "answer": i.answer,
                        "skills": json.dumps(list(i.skills)),
                        "difficulty": i.difficulty,
                    }
                    for i in instances
                ),
            )
            self._insert_ignore(
                conn,
                INSTANCE_DOMAIN,
                (
                    {"run_id": run_id, "instance_id": i.id, "domain": d}
                    for i in instances
                    for d in dict.fromkeys(i.domains)
                ),
            )
            self._insert_ignore(
                conn,
                RESPONSE,
                (
                    {
                        "run_id": run_id,
                        "model": r.model,
                        "instance_id": r.instance_id,
                        "text": r.text,
                    }
                    for rs in response_sets
                    for r in rs.responses
                ),
            )
            now = utcnow()
            self._insert_ignore(
                conn,
                JUDGMENT,
                (
                    {
                        "run_id": run_id,
                        "model": r.model,
                        "instance_id": r.instance_id,
                        "skill": skill,
                        "judge": judge,
                        "status": Status.PENDING.value,
                        "attempts": 0,
                        "created_at": now,
                        "updated_at": now,
                    }
                    for rs in response_sets
                    for r in rs.responses
                    for judge in judges
                    for skill in by_id[r.instance_id].skills
                ),
            )
        if self.dialect == "postgresql":
            # Fresh bulk-loaded tables have no statistics yet; without them the planner
            # joins the worker's lookups by sequential scans.
            with self.engine.connect() as conn:
                conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                    "ANALYZE judgment, instance, instance_domain, response"
                )
        return RunInfo(run_id, name, fingerprint, mode, config), True

    def _insert_ignore(
        self, conn: Connection, table: Table, rows: Iterable[dict[str, Any]]
    ) -> None:
        if self.dialect == "postgresql":
            bulk.copy_insert_ignore(conn, table, rows)
            return
        stmt = sqlite.insert(table).on_conflict_do_nothing()
        batch: list[dict[str, Any]] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= INSERT_CHUNK:
                conn.execute(stmt, batch)
                batch = []
        if batch:
            conn.execute(stmt, batch)

    # -- planning ----------------------------------------------------------------------

    def open_calls(self, run: RunInfo) -> list[list[int]]:
        """Ledger ids still to judge, grouped into judge calls."""
        return [c.ids for c in self.open_call_details(run)]

    def open_call_details(self, run: RunInfo) -> list[PlannedCall]:
        """The judge calls still to make, with what each is about.

        Pending rows, plus running rows whose lease has expired (their worker died).
        In ``instance`` mode one call covers all skills of (model, instance, judge);
        in ``skill`` mode each row is its own call.
        """
        stmt = (
            select(J.id, J.model, J.instance_id, J.judge, J.skill)
            .where(
                J.run_id == run.id,
                statements.claimable(utcnow()),
            )
            .order_by(J.judge, J.model, J.instance_id, J.id)
        )
        with self.engine.connect() as conn:
            rows = conn.execute(stmt).all()
        if run.mode == "skill":
            return [PlannedCall([r.id], r.model, r.instance_id, r.judge, [r.skill]) for r in rows]
        groups: dict[tuple[str, str, str], PlannedCall] = {}
        for r in rows:
            key = (r.judge, r.model, r.instance_id)
            call = groups.setdefault(key, PlannedCall([], r.model, r.instance_id, r.judge, []))
            call.ids.append(r.id)
            call.skills.append(r.skill)
        return list(groups.values())

    def reset_failed(self, run_id: int, reasons: Sequence[str] | None = None) -> int:
        """Send failed rows (optionally only some reasons) back to pending."""
        stmt = update(JUDGMENT).where(J.run_id == run_id, J.status == Status.FAILED.value)
        if reasons:
            stmt = stmt.where(J.reason.in_(list(reasons)))
        with self.engine.begin() as conn:
            result = conn.execute(
                stmt.values(
                    status=Status.PENDING.value, reason=None, detail=None, updated_at=utcnow()
                )
            )
        return int(result.rowcount)

    # -- the worker side ---------------------------------------------------------------

    @transient_retry
    def claim(self, ids: Sequence[int], lease_seconds: float) -> list[int]:
        """Mark rows running for ``lease_seconds``; returns the ids this caller now owns.

        Rows that are done, failed, or running under a live lease are not claimed, so
        two deliveries of one message do not both pay for the same judgment.
        """
        if not ids:
            return []
        with self.engine.begin() as conn:
            return self._claim(conn, ids, lease_seconds)

    @staticmethod
    def _claim(conn: Connection, ids: Sequence[int], lease_seconds: float) -> list[int]:
        now = utcnow()
        params = {"ids": list(ids), "now": now, "until": now + timedelta(seconds=lease_seconds)}
        return sorted(conn.execute(statements.CLAIM, params).scalars().all())

    @transient_retry
    def claim_contexts(self, ids: Sequence[int], lease_seconds: float) -> list[JobContext]:
        """Claim ``ids`` and return what is needed to judge the rows this caller now owns."""
        if not ids:
            return []
        with self.engine.begin() as conn:
            if self.dialect == "postgresql":  # claim and load in one statement
                return bulk.claim_contexts(conn, ids, utcnow(), lease_seconds)
            claimed = self._claim(conn, ids, lease_seconds)
            if not claimed:
                return []
            return [JobContext(*row) for row in conn.execute(statements.CONTEXTS, {"ids": claimed})]

    @transient_retry
    def extend_leases(self, ids: Sequence[int], lease_seconds: float) -> int:
        """Heartbeat: keep the rows this worker is still judging leased to it."""
        if not ids:
            return 0
        until = utcnow() + timedelta(seconds=lease_seconds)
        with self.engine.begin() as conn:
            return int(conn.execute(statements.EXTEND, {"ids": list(ids), "until": until}).rowcount)

    @transient_retry
    def contexts(self, ids: Sequence[int]) -> list[JobContext]:
        if not ids:
            return []
        with self.engine.connect() as conn:
            return [
                JobContext(*row) for row in conn.execute(statements.CONTEXTS, {"ids": list(ids)})
            ]

    @transient_retry
    def cached_calls(self, keys: Sequence[str]) -> dict[str, CallRecord]:
        """Parsed answers already paid for, by cache key (prompt, judge and parameters)."""
        if not keys:
            return {}
        unique = list(set(keys))
        with self.engine.connect() as conn:
            if self.dialect == "postgresql":
                return bulk.cached_calls(conn, unique)
            rows = conn.execute(statements.CACHED, {"keys": unique}).all()
        return {r[0]: CallRecord(*r) for r in rows}

    @transient_retry
    def write(self, calls: Sequence[CallRecord] = (), outcomes: Sequence[Outcome] = ()) -> int:
        """Keep paid answers and final states in one transaction. Returns rows finished.

        An answer is stored once per cache key; a parsed answer replaces an unparsed one.
        A row already done is never changed.
        """
        if self.dialect == "postgresql":  # the whole flush as arrays: storage/bulk.py
            with self.engine.begin() as conn:
                return bulk.write(conn, calls, outcomes, utcnow())
        with self.engine.begin() as conn:
            if calls:
                conn.execute(statements.SQLITE_UPSERT_CALL, [self._call_params(c) for c in calls])
            if not outcomes:
                return 0
            return int(
                conn.execute(statements.FINISH, [_outcome_params(o) for o in outcomes]).rowcount
            )

    def finish(self, outcomes: Sequence[Outcome]) -> int:
        return self.write((), outcomes)

    @staticmethod
    def _call_params(c: CallRecord) -> dict[str, Any]:
        return {**vars(c), "created_at": utcnow()}

    @transient_retry
    def count_open(self, run_id: int) -> int:
        stmt = select(func.count()).where(
            J.run_id == run_id,
            J.status.in_([Status.PENDING.value, Status.RUNNING.value]),
        )
        with self.engine.connect() as conn:
            return int(conn.execute(stmt).scalar_one())
