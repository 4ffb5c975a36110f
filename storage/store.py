"""The ledger: runs, their inputs, the judgments and every paid call. All SQL writes.

``Store(url)`` is one interface with two implementations side by side, chosen by the URL:
:class:`SqliteStore` (the embedded default) and :class:`PostgresStore` (at scale). What
both do the same way lives here, in portable SQLAlchemy Core; each implementation writes
only the worker's hot paths (claims, answer-cache lookups, write-behind flushes, bulk
inserts) in its own dialect, in ``storage.sqlite_store`` and ``storage.postgres_store``.
``tests/storage/test_store.py`` holds both to the same behaviour.

Every write is idempotent: inserts ignore rows that exist, a paid answer is stored once
per ``uid`` and never changed, and a judgment only moves forward (pending -> running ->
done/failed), so a redelivered or duplicated message changes nothing that is done.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from flask_eval.core.errors import RunConflictError, Status
from flask_eval.core.images import attached
from flask_eval.core.stored import StoredConfig
from flask_eval.core.types import Instance, ResponseSet
from flask_eval.rubrics import kinds
from flask_eval.rubrics.kind import INSTANCE as ABOUT_INSTANCE
from flask_eval.storage import deletion, predicates, tally
from flask_eval.storage.db import make_engine
from flask_eval.storage.leasing import WorkerLedger
from flask_eval.storage.models import (
    CALL,
    DELETED_RUN,
    INSTANCE,
    INSTANCE_DOMAIN,
    JUDGMENT,
    RESPONSE,
    RUN,
    utcnow,
)
from flask_eval.storage.planning import Pair, RunRows, insert_run_rows
from flask_eval.storage.postgres_store import PostgresHotPaths
from flask_eval.storage.predicates import open_rows_selects, person
from flask_eval.storage.records import (
    CallRecord,
    OpenRow,
    Outcome,
    RunInfo,
    as_stored,
    instance_of,
)
from flask_eval.storage.retry import transient_retry
from flask_eval.storage.sqlite_store import SqliteHotPaths

J, C, INS, DOM, R, RN = JUDGMENT.c, CALL.c, INSTANCE.c, INSTANCE_DOMAIN.c, RESPONSE.c, RUN.c


def _run_info(row: Any) -> RunInfo:
    return RunInfo(
        row["id"],
        row["name"],
        row["fingerprint"],
        row["mode"],
        StoredConfig.from_text(row["config"]),
    )


class Store(WorkerLedger):
    """The SQL ledger behind one engine; ``Store(url)`` returns the dialect's store."""

    dialect: str

    def __new__(cls, url_or_engine: str | Engine) -> Store:
        if cls is not Store:
            return super().__new__(cls)
        engine = make_engine(url_or_engine) if isinstance(url_or_engine, str) else url_or_engine
        if engine.dialect.name == "postgresql":
            store: Store = super().__new__(PostgresStore)
        else:
            store = super().__new__(SqliteStore)
        store.engine = engine
        return store

    def __init__(self, url_or_engine: str | Engine) -> None:
        if not hasattr(self, "engine"):  # a subclass built directly
            self.engine = (
                make_engine(url_or_engine) if isinstance(url_or_engine, str) else url_or_engine
            )
        self.dialect = self.engine.dialect.name

    def close(self) -> None:
        self.engine.dispose()

    # -- the dialect's hot paths ---------------------------------------------------------

    def _cached(self, conn: Connection, keys: Sequence[str]) -> dict[str, CallRecord]:
        """The first answer read (wholly or in part) for each of ``keys``."""
        raise NotImplementedError

    def _write(
        self,
        conn: Connection,
        calls: Sequence[CallRecord],
        outcomes: Sequence[Outcome],
        now: datetime,
    ) -> int:
        """Insert paid answers (once per uid) and end judgments (never one done)."""
        raise NotImplementedError

    # -- runs and inputs ---------------------------------------------------------------

    @transient_retry
    def find_run(self, name: str | None = None) -> RunInfo | None:
        """The run called ``name``, or the latest run when ``name`` is None."""
        stmt = select(RUN).where(predicates.visible())  # not one being deleted
        stmt = stmt.where(RN.name == name) if name is not None else stmt.order_by(RN.id.desc())
        with self.engine.connect() as conn:
            row = conn.execute(stmt.limit(1)).mappings().first()
        return None if row is None else _run_info(row)

    @transient_retry
    def run_by_id(self, run_id: int) -> RunInfo:
        with self.engine.connect() as conn:
            row = conn.execute(select(RUN).where(RN.id == run_id)).mappings().one()
        return _run_info(row)

    @transient_retry
    def run_config_text(self, run_id: int) -> str | None:
        """The stored configuration of a run as text (None: no such run), so that a worker
        can tell cheaply whether it changed."""
        stmt = select(RN.config).where(RN.id == run_id, predicates.visible())
        with self.engine.connect() as conn:
            text = conn.execute(stmt).scalar_one_or_none()
        return None if text is None else str(text)

    @transient_retry
    def is_deleted(self, run_id: int) -> bool:
        with self.engine.connect() as conn:
            stmt = select(DELETED_RUN.c.run_id).where(DELETED_RUN.c.run_id == run_id)
            return conn.execute(stmt).first() is not None

    @transient_retry
    def update_config(self, run_id: int, change: Callable[[StoredConfig], StoredConfig]) -> RunInfo:
        """Store ``change`` of the run's stored configuration, atomically."""
        with self.engine.begin() as conn:
            stmt = select(RN.config).where(RN.id == run_id)
            if self.dialect == "postgresql":
                stmt = stmt.with_for_update()
            text = change(StoredConfig.from_text(conn.execute(stmt).scalar_one())).to_text()
            conn.execute(update(RUN).where(RN.id == run_id).values(config=text))
        return self.run_by_id(run_id)

    def set_dispatched(self, run_id: int, queue: str | None) -> None:
        """The queue to which every open call of the run was sent, or None when some were
        held back (see workers/sweeper.py)."""
        self.update_config(run_id, lambda config: config.with_queue(queue))

    def create_run(
        self,
        *,
        name: str,
        fingerprint: str | Callable[[], str],
        mode: str,
        config: StoredConfig | Mapping[str, Any],
        instances: Sequence[Instance],
        response_sets: Sequence[ResponseSet],
        judges: Sequence[str],
        pairs: Sequence[Pair] | None = None,
    ) -> tuple[RunInfo, bool]:
        """Create the run with its inputs and pending ledger, in one transaction.

        ``pairs`` (ordered (first, second) model pairs) plans a pairwise ledger instead of
        an absolute one (``storage.planning``). Returns (run, created). Reusing a name with
        a different fingerprint raises RunConflictError and writes nothing. Two producers
        creating the same run at once: one creates it, the other finds it (and resumes it,
        or conflicts). ``fingerprint`` may be a function that returns it: called only once
        the new run's rows are loaded (it may be computing meanwhile, in a thread).
        """
        if not isinstance(config, StoredConfig):  # its data (read through the decoder)
            config = StoredConfig.from_data(config)
        existing = self.find_run(name)
        if existing is None:
            try:
                return self._create(
                    name, fingerprint, mode, config, instances, response_sets, judges, pairs
                ), True
            except IntegrityError:
                existing = self.find_run(name)  # created by someone else meanwhile
                if existing is None:
                    raise
        if existing.fingerprint != (fingerprint if isinstance(fingerprint, str) else fingerprint()):
            raise RunConflictError(
                f"run {name!r} exists with different inputs, judges or mode; "
                "pick another --run name to start a new run"
            )
        return existing, False

    def _create(
        self,
        name: str,
        fingerprint: str | Callable[[], str],
        mode: str,
        config: StoredConfig,
        instances: Sequence[Instance],
        response_sets: Sequence[ResponseSet],
        judges: Sequence[str],
        pairs: Sequence[Pair] | None,
    ) -> RunInfo:
        now = utcnow()
        known = fingerprint if isinstance(fingerprint, str) else ""  # else set after the rows
        with self.engine.begin() as conn:
            run_id = conn.execute(
                RUN.insert()
                .values(
                    name=name,
                    fingerprint=known,
                    mode=mode,
                    config=config.to_text(),
                    created_at=now,
                )
                .returning(RN.id)
            ).scalar_one()
            conn.execute(delete(DELETED_RUN).where(DELETED_RUN.c.run_id == run_id))
            # a kind whose rows are about an instance alone: no model, no response
            about_instances = kinds.of(config.kind).subject == ABOUT_INSTANCE
            images = attached(r for i in instances for r in i.images)  # read: bytes held
            made_of = RunRows(instances, response_sets, judges, pairs, about_instances, images)
            ledger = insert_run_rows(self, conn, run_id, made_of, now)
            if not isinstance(fingerprint, str):  # in the rows' transaction
                fingerprint = fingerprint()
                conn.execute(RUN.update().where(RN.id == run_id).values(fingerprint=fingerprint))
        self._after_bulk_load()
        return RunInfo(run_id, name, fingerprint, mode, config, ledger)

    def _after_bulk_load(self) -> None:
        """Called after a run's rows were inserted."""

    @transient_retry
    def delete_run(
        self, run_id: int, chunk: int = deletion.CHUNK, step: Callable[[], None] = lambda: None
    ) -> None:
        """Remove a run, its inputs, its ledger and the paid answers no other run uses;
        leave a tombstone so that its queued messages are dropped by the workers.

        In bounded chunks, each its own short transaction, after the tombstone has made
        the run invisible (``storage.deletion``): other writers wait one chunk at most,
        never the whole delete (``step`` is called after each chunk). A worker's answer
        for the run written meanwhile is kept attached to no run (see :meth:`write`).
        The answers other runs use are found from this run's answers (a join), never by a
        ``NOT IN`` over every other judgment: that one is a nested loop once the other
        runs' answers no longer fit the planner's hash (137 s for 13,968 judgments among
        81,584 on PostgreSQL; docs/design/delivery.md). A delete interrupted midway is
        finished by the next one.
        """
        with self.engine.connect() as conn:
            left = [i for i in deletion.unfinished(conn) if i != run_id]
        deletion.tombstone(self, run_id)
        for gone in (*left, run_id):
            deletion.remove_rows(self, gone, chunk, step)
            deletion.finish(self, gone)

    @transient_retry
    def run_texts(
        self, run_id: int
    ) -> tuple[dict[str, tuple[str, str]], dict[tuple[str, str], str]]:
        """The run's texts: instance id -> (instruction, reference), and (model, instance
        id) -> response (for cost estimates of what is still to judge)."""
        with self.engine.connect() as conn:
            instances = {
                str(r[0]): (str(r[1]), str(r[2]))
                for r in conn.execute(
                    select(INS.instance_id, INS.instruction, INS.answer).where(INS.run_id == run_id)
                )
            }
            responses = {
                (str(r[0]), str(r[1])): str(r[2])
                for r in conn.execute(
                    select(R.model, R.instance_id, R.text).where(R.run_id == run_id)
                )
            }
        return instances, responses

    @transient_retry
    def instances(self, run_id: int, ids: Sequence[str] | None = None) -> dict[str, Instance]:
        """The run's instances as they were given (system prompt, own rubrics, capability
        and task included), by id: all of them, or those among ``ids``."""
        stmt = select(INSTANCE).where(INS.run_id == run_id)
        domains = select(DOM.instance_id, DOM.domain).where(DOM.run_id == run_id)
        if ids is not None:
            wanted = list(dict.fromkeys(ids))
            stmt = stmt.where(INS.instance_id.in_(wanted))
            domains = domains.where(DOM.instance_id.in_(wanted))
        with self.engine.connect() as conn:
            rows = conn.execute(stmt.order_by(INS.instance_id)).mappings().all()
            of: dict[str, list[str]] = {}
            for iid, domain in conn.execute(domains):
                of.setdefault(str(iid), []).append(str(domain))
        return {
            str(r["instance_id"]): instance_of(r, sorted(of.get(str(r["instance_id"]), ())))
            for r in rows
        }

    # -- planning ----------------------------------------------------------------------

    @transient_retry
    def open_rows(self, run_id: int, after: int = 0, limit: int | None = None) -> list[OpenRow]:
        """The rows still to judge, in id order (a subject's criteria are planned next to
        each other): pending, plus running rows whose lease has expired (their worker
        died); ``after`` and ``limit`` page through them (keyset on the primary key)."""
        pending, expired = open_rows_selects(run_id, after, limit, utcnow())
        with self.engine.connect() as conn:
            rows = conn.execute(pending).all()
            late = conn.execute(expired).all()
        if late:  # few: merged in id order, the page cut at ``limit``
            rows = sorted([*rows, *late], key=lambda row: int(row[0]))[:limit]
        return [OpenRow(*row) for row in rows]

    @transient_retry
    def reset_failed(self, run_id: int, reasons: Sequence[str] | None = None) -> int:
        """Send failed rows (optionally only some reasons) back to pending. People's rows
        (``human/RATER``) are never sent: a flagged rating stays flagged, for no provider
        answers it."""
        stmt = update(JUDGMENT).where(
            J.run_id == run_id,
            J.status == Status.FAILED.value,
            ~person(J.judge),
        )
        if reasons:
            stmt = stmt.where(J.reason.in_(list(reasons)))
        with self.engine.begin() as conn:
            result = conn.execute(
                stmt.values(
                    status=Status.PENDING.value, reason=None, detail=None, updated_at=utcnow()
                )
            )
        return int(result.rowcount)

    @transient_retry
    def count_open(self, run_id: int) -> int:
        with self.engine.connect() as conn:
            counts = tally.status_totals(conn, run_id)
        return counts.get(Status.PENDING.value, 0) + counts.get(Status.RUNNING.value, 0)

    # -- the worker side (claims and leases: storage/leasing.py) ------------------------

    @transient_retry
    def cached_calls(self, keys: Sequence[str]) -> dict[str, CallRecord]:
        """Answers already paid for and read, by cache key (prompt, judge, parameters);
        the first such answer of each key."""
        if not keys:
            return {}
        with self.engine.connect() as conn:
            return self._cached(conn, list(dict.fromkeys(keys)))

    def write(self, calls: Sequence[CallRecord] = (), outcomes: Sequence[Outcome] = ()) -> int:
        """Keep paid answers and final states in one transaction; returns rows finished.

        Outages are not retried here: the worker's write-behind keeps the data and retries
        for as long as the database is away (workers/writer.py). A paid answer of a run
        deleted meanwhile is kept attached to no run; if the run's delete commits while
        this write waits for it (PostgreSQL checks the answer's run then), the write is
        made again, and then sees the run gone. No secret value of the environment, NUL
        or lone surrogate is written (``records.as_stored``: every way an answer reaches
        the ledger ends here).
        """
        calls, outcomes = as_stored(calls, outcomes)
        try:
            return self._write_once(calls, outcomes)
        except IntegrityError:
            if not calls:
                raise
            return self._write_once(calls, outcomes)

    def _write_once(self, calls: Sequence[CallRecord], outcomes: Sequence[Outcome]) -> int:
        with self.engine.begin() as conn:
            return self._write(conn, calls, outcomes, utcnow())

    @transient_retry
    def finish(self, outcomes: Sequence[Outcome]) -> int:
        return self.write((), outcomes)


class SqliteStore(SqliteHotPaths, Store):
    """The ledger in one SQLite file (WAL, ``BEGIN IMMEDIATE``, a busy timeout)."""


class PostgresStore(PostgresHotPaths, Store):
    """The ledger in PostgreSQL (a connection pool; arrays and COPY on the hot paths)."""
