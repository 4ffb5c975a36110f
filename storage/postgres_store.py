"""The PostgreSQL ledger: the worker's hot paths as a few statements with array
parameters, and COPY for the producer's bulk inserts.

Every column of a batch goes as one array, joined through ``unnest(...)`` or matched with
``= ANY(...)``, so a statement of any size has constant SQL and a handful of parameters.
The statements go to the driver as written (``exec_driver_sql``) with binary parameters
(``%(name)b``): psycopg then sends each array element length-prefixed instead of quoting
it into an array literal, which had been most of a flush's CPU. Measured alone: a 64-call
flush took 2.0 ms of CPU with text parameters, 0.8 ms with binary ones; a 96-row claim
1.4 ms in two statements, 0.5 ms in one (docs/design/concurrency.md).

The rules are those of ``storage.sqlite_store`` (``tests/storage/test_store.py`` runs both):

- a row is claimed only if it belongs to the message's run and is pending, or running on
  a lease that has expired;
- a paid answer is inserted once per uid and never changed;
- a row already done is never changed.

One statement cannot touch a row twice (``UPDATE ... FROM`` takes one source row per
target row), so outcomes for one row within a flush are merged first, the way
successive statements would have ended: a later outcome replaces any but ``done`` (so the
first ``done`` is kept), and the counters add up.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection

from flask_eval.core.errors import Status
from flask_eval.storage.leasing import WorkerLedger
from flask_eval.storage.records import CALL_FIELDS, CallRecord, JobContext, Outcome

#: claim the rows still to judge and return what judging them needs, in one statement
#: (``rb``: the second response of a pairwise row; NULL for absolute grading; ``r``: none
#: for a row about an instance alone, whose model is none)
CLAIM_CONTEXTS = f"""
    WITH claimed AS (
        UPDATE judgment AS j SET
            status = '{Status.RUNNING.value}', claims = j.claims + 1,
            lease_until = %(until)b, updated_at = %(now)b
        WHERE j.id = ANY(CAST(%(ids)b AS integer[])) AND j.run_id = %(run_id)b
          AND (j.status = '{Status.PENDING.value}'
               OR (j.status = '{Status.RUNNING.value}' AND j.lease_until < %(now)b))
        RETURNING j.id, j.run_id, j.model, j.model_b, j.instance_id, j.criterion, j.judge,
                  j.claims
    )
    SELECT c.id, c.run_id, c.model, c.model_b, c.instance_id, c.criterion, c.judge,
           i.instruction, i.answer, COALESCE(r.text, ''), i.system_prompt, i.rubrics, rb.text,
           i.history, i.images, r.history, rb.history, c.claims
    FROM claimed AS c
    JOIN instance AS i ON i.run_id = c.run_id AND i.instance_id = c.instance_id
    LEFT JOIN response AS r
      ON r.run_id = c.run_id AND r.model = c.model AND r.instance_id = c.instance_id
    LEFT JOIN response AS rb
      ON rb.run_id = c.run_id AND rb.model = c.model_b AND rb.instance_id = c.instance_id
    ORDER BY c.id
"""


#: (not the answers of a run being deleted: its delete keeps only those other runs use)
CACHED = f"""
    SELECT DISTINCT ON (cache_key) {", ".join(CALL_FIELDS)}
    FROM call WHERE cache_key = ANY(CAST(%(keys)b AS varchar[])) AND parsed IS true
      AND NOT EXISTS (SELECT 1 FROM deleted_run AS d WHERE d.run_id = call.run_id)
    ORDER BY cache_key, id
"""

#: a paid answer of a run deleted meanwhile (or being deleted: tombstoned) is kept, attached
#: to no run (``run_id`` NULL), like the answers of a deleted run that other runs use
INSERT_CALLS = f"""
    INSERT INTO call ({", ".join(CALL_FIELDS)}, created_at)
    SELECT v.uid, v.cache_key,
           (SELECT r.id FROM run AS r WHERE r.id = v.run_id
            AND NOT EXISTS (SELECT 1 FROM deleted_run AS d WHERE d.run_id = r.id)), v.judge,
           v.raw, v.parsed, v.finish, v.prompt_tokens, v.completion_tokens, v.cost,
           v.latency_ms, v.cached_tokens, v.cache_write_tokens, v.batch, v.usage_note,
           CAST(%(now)b AS timestamptz)
    FROM unnest(
        CAST(%(uid)b AS varchar[]), CAST(%(cache_key)b AS varchar[]),
        CAST(%(run_id)b AS integer[]), CAST(%(judge)b AS varchar[]), CAST(%(raw)b AS text[]),
        CAST(%(parsed)b AS boolean[]), CAST(%(finish)b AS varchar[]),
        CAST(%(prompt_tokens)b AS integer[]), CAST(%(completion_tokens)b AS integer[]),
        CAST(%(cost)b AS float8[]), CAST(%(latency_ms)b AS float8[]),
        CAST(%(cached_tokens)b AS integer[]), CAST(%(cache_write_tokens)b AS integer[]),
        CAST(%(batch)b AS boolean[]), CAST(%(usage_note)b AS text[])
    ) AS v({", ".join(CALL_FIELDS)})
    ON CONFLICT (uid) DO NOTHING
"""

FINISH = f"""
    UPDATE judgment AS j SET
        status = v.status, score = v.score, rationale = v.rationale, reason = v.reason,
        detail = v.detail, call_uid = v.call_uid, value = v.value, asks = j.asks + v.asks,
        requests = j.requests + v.requests, lease_until = NULL,
        updated_at = CAST(%(now)b AS timestamptz)
    FROM unnest(
        CAST(%(id)b AS integer[]), CAST(%(status)b AS varchar[]), CAST(%(score)b AS integer[]),
        CAST(%(rationale)b AS text[]), CAST(%(reason)b AS varchar[]),
        CAST(%(detail)b AS text[]), CAST(%(call_uid)b AS varchar[]),
        CAST(%(asks)b AS integer[]), CAST(%(requests)b AS integer[]), CAST(%(value)b AS text[])
    ) AS v(id, status, score, rationale, reason, detail, call_uid, asks, requests, value)
    WHERE j.id = v.id AND j.status <> '{Status.DONE.value}'
"""

#: renew the leases of the rows still under the worker's claims (2,048 rows: ~40 ms and
#: 3-5 ms of CPU; a row-value IN list, planned as one index scan per row OR-ed: ~140 ms)
EXTEND = f"""
    UPDATE judgment AS j SET lease_until = %(until)b
    FROM unnest(CAST(%(ids)b AS integer[]), CAST(%(claims)b AS integer[])) AS v(id, claims)
    WHERE j.id = v.id AND j.claims = v.claims AND j.status = '{Status.RUNNING.value}'
    RETURNING j.id
"""

#: characters of COPY text sent at a time (a bulk load's rows are formatted here: psycopg's
#: write_row takes ~8 us a row, this ~2)
COPY_BUFFER = 1 << 20
#: COPY's text format: a backslash, tab, newline or carriage return in a value is escaped
_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_COPY_SPECIAL = re.compile(r"[\\\t\n\r]")


def _copy_text(value: Any) -> str:
    """One value in COPY's text format (NULL as \\N; a datetime with its offset)."""
    if value is None:
        return "\\N"
    if isinstance(value, str):
        return value.translate(_COPY_ESCAPES) if _COPY_SPECIAL.search(value) else value
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


#: values of a column whose text is remembered (a new run's ledger repeats its run id,
#: models, instances, criteria, judges, status and timestamp on millions of rows)
MEMO_VALUES = 100_000
#: strings longer than this are formatted each time (texts: seldom repeated, and large)
MEMO_CHARS = 256


def _copy(cursor: Any, table: str, columns: Sequence[str], rows: Iterable[tuple[Any, ...]]) -> None:
    """COPY ``rows`` into ``table``, their text formatted here and sent a buffer at a time
    (PostgreSQL ingests while this process makes the next rows). Each column remembers
    the text of its short values (a dictionary look-up instead of a call per value:
    ~2.5x faster on a new run's ledger). Values equal in Python are one value to the
    column (1 and 1.0 in a float column, an instant in two time zones); booleans, equal
    to 0 and 1 but not their text, are not looked up."""
    names = ", ".join(f'"{c}"' for c in columns)
    memos: list[dict[Any, str]] = [{} for _ in columns]
    with cursor.copy(f'COPY "{table}" ({names}) FROM STDIN') as copy:
        lines: list[str] = []
        size = 0
        for row in rows:
            parts = []
            for memo, value in zip(memos, row, strict=True):
                text = memo.get(value) if type(value) is not bool else None
                if text is None:
                    text = _copy_text(value)
                    if len(memo) < MEMO_VALUES and (
                        type(value) is not bool
                        and (not isinstance(value, str) or len(value) <= MEMO_CHARS)
                    ):
                        memo[value] = text
                parts.append(text)
            line = "\t".join(parts)
            lines.append(line)
            size += len(line)
            if size >= COPY_BUFFER:
                copy.write("\n".join(lines) + "\n")
                lines, size = [], 0
        if lines:
            copy.write("\n".join(lines) + "\n")


#: fewer rows than this are inserted with one plain statement instead of COPY
SMALL_INSERT = 64

_OUTCOME_FIELDS = (
    "id",
    "score",
    "rationale",
    "reason",
    "detail",
    "call_uid",
    "asks",
    "requests",
    "value",
)


def _merge_outcomes(outcomes: Sequence[Outcome]) -> list[Outcome]:
    """One outcome per row, as successive single-row statements would have ended."""
    merged: dict[int, Outcome] = {}
    for o in outcomes:
        kept = merged.get(o.id)
        if kept is None:
            merged[o.id] = o
        elif kept.status == Status.DONE:  # the first done stays; its counters grow
            merged[o.id] = replace(
                kept, asks=kept.asks + o.asks, requests=kept.requests + o.requests
            )
        else:
            merged[o.id] = replace(o, asks=kept.asks + o.asks, requests=kept.requests + o.requests)
    return list(merged.values())


class PostgresHotPaths(WorkerLedger):
    """PostgreSQL's hot paths, which ``storage.store.PostgresStore`` puts before the
    portable ``storage.store.Store`` (a connection pool; arrays and COPY)."""

    def _claim(
        self, conn: Connection, run_id: int, ids: Sequence[int], now: datetime, until: datetime
    ) -> list[JobContext]:
        params = {"ids": list(ids), "run_id": run_id, "now": now, "until": until}
        rows = conn.exec_driver_sql(CLAIM_CONTEXTS, params)
        return [JobContext.of_row(row[:-1], row[-1]) for row in rows]

    def _extend(self, conn: Connection, held: Mapping[int, int], until: datetime) -> set[int]:
        params = {"ids": list(held), "claims": list(held.values()), "until": until}
        return {int(r[0]) for r in conn.exec_driver_sql(EXTEND, params)}

    def _cached(self, conn: Connection, keys: Sequence[str]) -> dict[str, CallRecord]:
        rows = conn.exec_driver_sql(CACHED, {"keys": list(keys)})
        return {r[1]: CallRecord(*r) for r in rows}

    def _write(
        self,
        conn: Connection,
        calls: Sequence[CallRecord],
        outcomes: Sequence[Outcome],
        now: datetime,
    ) -> int:
        if calls:
            params: dict[str, Any] = {f: [getattr(c, f) for c in calls] for f in CALL_FIELDS}
            params["now"] = now
            conn.exec_driver_sql(INSERT_CALLS, params)
        if not outcomes:
            return 0
        rows = _merge_outcomes(outcomes)
        finish: dict[str, Any] = {f: [getattr(o, f) for o in rows] for f in _OUTCOME_FIELDS}
        finish["status"] = [o.status.value for o in rows]
        finish["now"] = now
        return int(conn.exec_driver_sql(FINISH, finish).rowcount)

    def _bulk_load(
        self,
        conn: Connection,
        table: Table,
        columns: Sequence[str],
        rows: Iterable[tuple[Any, ...]],
    ) -> None:
        """Straight into the table through COPY: PostgreSQL ingests while this process
        makes the next rows (a new run's rows cannot conflict)."""
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            _copy(cursor, table.name, columns, rows)
        finally:
            cursor.close()

    def _ledger_id(self, conn: Connection, before: bool) -> int:
        """The ledger's sequence: a value taken before the rows (one id is never used),
        this session's last one after them; a COPY takes its rows' ids in row order, so
        no other writer came in between when the two are the rows' count apart."""
        call = "nextval" if before else "currval"
        sql = f"SELECT {call}(pg_get_serial_sequence('judgment', 'id'))"
        return int(conn.exec_driver_sql(sql).scalar_one())

    def _insert_ignore(
        self, conn: Connection, table: Table, rows: Iterable[dict[str, Any]]
    ) -> None:
        """Through COPY into a temporary table with the target's column types, then one
        ``INSERT ... SELECT ... ON CONFLICT DO NOTHING``: rows that exist are skipped
        exactly as by SQLite's path. A 24,000-call run (72,000 ledger rows) took the
        producer 4.3 s of CPU instead of 6.8 s."""
        it = iter(rows)
        head = list(itertools.islice(it, SMALL_INSERT))
        if len(head) < SMALL_INSERT:  # a few rows: a plain statement costs less than COPY
            if head:
                conn.execute(postgresql.insert(table).on_conflict_do_nothing(), head)
            return
        first, it = head[0], itertools.chain(head[1:], it)
        columns = list(first)
        types = [table.c[c].type.compile(dialect=conn.dialect) for c in columns]
        temp = f"_copy_{table.name}"
        names = ", ".join(f'"{c}"' for c in columns)
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(
                f'CREATE TEMP TABLE "{temp}" ('
                + ", ".join(f'"{c}" {t}' for c, t in zip(columns, types, strict=True))
                + ") ON COMMIT DROP"
            )
            _copy(
                cursor,
                temp,
                columns,
                (tuple(row[c] for c in columns) for row in itertools.chain([first], it)),
            )
            cursor.execute(
                f'INSERT INTO "{table.name}" ({names}) SELECT {names} FROM "{temp}" '
                "ON CONFLICT DO NOTHING"
            )
            cursor.execute(f'DROP TABLE "{temp}"')
        finally:
            cursor.close()

    def _after_bulk_load(self) -> None:
        # Fresh bulk-loaded tables have no statistics yet; without them the planner joins
        # the worker's lookups by sequential scans.
        with self.engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                "ANALYZE judgment, instance, instance_domain, response"
            )
