"""PostgreSQL's fast paths: a worker's claims, cache lookups and write-behind flushes
as a few statements with array parameters, and COPY for the producer's bulk inserts.

The portable path (``Store`` on SQLite) runs one UPDATE per finished row through
``executemany`` and expands ``IN (...)`` lists. On PostgreSQL every column instead goes
as one array, joined through ``unnest(...)`` or matched with ``= ANY(...)``, so a
statement of any size has constant SQL and a handful of parameters. The statements go
to the driver as written (``exec_driver_sql``), with binary parameters (``%(name)b``):
psycopg then sends each array element length-prefixed instead of quoting it into an
array literal, which had been most of a flush's CPU. Measured alone: a 64-call flush
took 2.0 ms of CPU with text parameters, 0.8 ms with binary ones; a 96-row claim 1.4 ms
in two statements, 0.5 ms in one (docs/design/concurrency.md).

The rules are those of the portable path:

- a row is claimed only if pending, or running on a lease that has expired;
- an answer is stored once per cache key, and a parsed answer replaces an unparsed one;
- a row already done is never changed.

One statement cannot touch a row twice (``ON CONFLICT DO UPDATE`` refuses to), so
duplicates within a flush are merged first, the way successive statements would have
ended: a later answer replaces an unparsed one (so the first parsed answer is kept), and
a later outcome replaces any but ``done`` (so the first ``done`` is kept).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Connection

from storage.models import Status
from storage.records import CallRecord, JobContext, Outcome

#: claim the rows still to judge and return what judging them needs, in one statement
CLAIM_CONTEXTS = f"""
    WITH claimed AS (
        UPDATE judgment AS j SET
            status = '{Status.RUNNING.value}', attempts = j.attempts + 1,
            lease_until = %(until)b, updated_at = %(now)b
        WHERE j.id = ANY(CAST(%(ids)b AS integer[]))
          AND (j.status = '{Status.PENDING.value}'
               OR (j.status = '{Status.RUNNING.value}' AND j.lease_until < %(now)b))
        RETURNING j.id, j.run_id, j.model, j.instance_id, j.skill, j.judge
    )
    SELECT c.id, c.run_id, c.model, c.instance_id, c.skill, c.judge,
           i.instruction, i.answer, r.text
    FROM claimed AS c
    JOIN instance AS i ON i.run_id = c.run_id AND i.instance_id = c.instance_id
    JOIN response AS r
      ON r.run_id = c.run_id AND r.model = c.model AND r.instance_id = c.instance_id
    ORDER BY c.id
"""

CACHED = """
    SELECT cache_key, run_id, judge, raw, parsed, prompt_tokens, completion_tokens, cost,
           latency_ms
    FROM call WHERE cache_key = ANY(CAST(%(keys)b AS varchar[])) AND parsed IS true
"""

UPSERT_CALLS = """
    INSERT INTO call (cache_key, run_id, judge, raw, parsed, prompt_tokens,
                      completion_tokens, cost, latency_ms, created_at)
    SELECT v.*, CAST(%(now)b AS timestamptz) FROM unnest(
        CAST(%(cache_key)b AS varchar[]), CAST(%(run_id)b AS integer[]),
        CAST(%(judge)b AS varchar[]), CAST(%(raw)b AS text[]), CAST(%(parsed)b AS boolean[]),
        CAST(%(prompt_tokens)b AS integer[]), CAST(%(completion_tokens)b AS integer[]),
        CAST(%(cost)b AS float8[]), CAST(%(latency_ms)b AS float8[])
    ) AS v
    ON CONFLICT (cache_key) DO UPDATE SET
        raw = excluded.raw, parsed = excluded.parsed,
        prompt_tokens = excluded.prompt_tokens,
        completion_tokens = excluded.completion_tokens,
        latency_ms = excluded.latency_ms, cost = excluded.cost,
        run_id = excluded.run_id, judge = excluded.judge
    WHERE call.parsed IS false
"""

FINISH = f"""
    UPDATE judgment AS j SET
        status = v.status, score = v.score, rationale = v.rationale, reason = v.reason,
        detail = v.detail, call_key = v.call_key, lease_until = NULL,
        updated_at = CAST(%(now)b AS timestamptz)
    FROM unnest(
        CAST(%(id)b AS integer[]), CAST(%(status)b AS varchar[]), CAST(%(score)b AS integer[]),
        CAST(%(rationale)b AS text[]), CAST(%(reason)b AS varchar[]),
        CAST(%(detail)b AS text[]), CAST(%(call_key)b AS varchar[])
    ) AS v(id, status, score, rationale, reason, detail, call_key)
    WHERE j.id = v.id AND j.status <> '{Status.DONE.value}'
"""


def claim_contexts(
    conn: Connection, ids: Sequence[int], now: datetime, lease_seconds: float
) -> list[JobContext]:
    until = now + timedelta(seconds=lease_seconds)
    params = {"ids": list(ids), "now": now, "until": until}
    return [JobContext(*row) for row in conn.exec_driver_sql(CLAIM_CONTEXTS, params)]


def cached_calls(conn: Connection, keys: Sequence[str]) -> dict[str, CallRecord]:
    rows = conn.exec_driver_sql(CACHED, {"keys": list(keys)})
    return {r[0]: CallRecord(*r) for r in rows}


def write(
    conn: Connection, calls: Sequence[CallRecord], outcomes: Sequence[Outcome], now: datetime
) -> int:
    """One flush: the answers, then the outcomes. Returns the rows finished."""
    if calls:
        conn.exec_driver_sql(UPSERT_CALLS, call_params(calls, now))
    if not outcomes:
        return 0
    return int(conn.exec_driver_sql(FINISH, outcome_params(outcomes, now)).rowcount)


_CALL_FIELDS = (
    "cache_key",
    "run_id",
    "judge",
    "raw",
    "parsed",
    "prompt_tokens",
    "completion_tokens",
    "cost",
    "latency_ms",
)
_OUTCOME_FIELDS = ("id", "score", "rationale", "reason", "detail", "call_key")


def call_params(calls: Sequence[CallRecord], now: datetime) -> dict[str, Any]:
    """One array per column, one element per distinct cache key."""
    merged: dict[str, CallRecord] = {}
    for c in calls:
        kept = merged.get(c.cache_key)
        if kept is None or not kept.parsed:
            merged[c.cache_key] = c
    rows = list(merged.values())
    params: dict[str, Any] = {f: [getattr(c, f) for c in rows] for f in _CALL_FIELDS}
    params["now"] = now
    return params


def outcome_params(outcomes: Sequence[Outcome], now: datetime) -> dict[str, Any]:
    """One array per column, one element per distinct row."""
    merged: dict[int, Outcome] = {}
    for o in outcomes:
        kept = merged.get(o.id)
        if kept is None or kept.status != Status.DONE:
            merged[o.id] = o
    rows = list(merged.values())
    params: dict[str, Any] = {f: [getattr(o, f) for o in rows] for f in _OUTCOME_FIELDS}
    params["status"] = [o.status.value for o in rows]
    params["now"] = now
    return params


def copy_insert_ignore(conn: Connection, table: Table, rows: Iterable[dict[str, Any]]) -> None:
    """``INSERT ... ON CONFLICT DO NOTHING`` of many rows, through COPY.

    The rows are copied into a temporary table with the target's column types, then
    inserted from it in one statement, so rows that exist are skipped exactly as by the
    portable path.
    A 24,000-call run (72,000 ledger rows) took the producer 4.3 s of CPU instead of 6.8 s.
    """
    it = iter(rows)
    first = next(it, None)
    if first is None:
        return
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
        with cursor.copy(f'COPY "{temp}" ({names}) FROM STDIN') as copy:
            copy.write_row([first[c] for c in columns])
            for row in it:
                copy.write_row([row[c] for c in columns])
        cursor.execute(
            f'INSERT INTO "{table.name}" ({names}) SELECT {names} FROM "{temp}" '
            "ON CONFLICT DO NOTHING"
        )
        cursor.execute(f'DROP TABLE "{temp}"')
    finally:
        cursor.close()
