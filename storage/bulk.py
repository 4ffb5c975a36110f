"""PostgreSQL's fast write paths: a write-behind flush in two statements, and COPY for
the producer's bulk inserts.

The portable path (``Store.write`` on SQLite) runs one UPDATE per finished row through
``executemany``. On PostgreSQL each flush instead sends every column as one array and
joins ``unnest(...)`` against the table, so a flush of any size is two statements with
constant SQL (prepared once by the server) and a handful of parameters. With 16 calls
per flush that halved the write path's CPU (0.16 to 0.08 ms per call, measured alone);
with 5 per flush both paths cost the same, as each flush's fixed cost dominates.

The rules are those of the portable path:

- an answer is stored once per cache key, and a parsed answer replaces an unparsed one;
- a row already done is never changed.

One statement cannot touch a row twice (``ON CONFLICT DO UPDATE`` refuses to), so
duplicates within a flush are merged first, the way successive statements would have
ended: a later answer replaces an unparsed one (so the first parsed answer is kept), and
a later outcome replaces any but ``done`` (so the first ``done`` is kept).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Table, text
from sqlalchemy.engine import Connection

from storage.models import Status
from storage.records import CallRecord, Outcome

UPSERT_CALLS = text(
    """
    INSERT INTO call (cache_key, run_id, judge, raw, parsed, prompt_tokens,
                      completion_tokens, cost, latency_ms, created_at)
    SELECT v.*, CAST(:now AS timestamptz) FROM unnest(
        CAST(:cache_key AS varchar[]), CAST(:run_id AS integer[]),
        CAST(:judge AS varchar[]), CAST(:raw AS text[]), CAST(:parsed AS boolean[]),
        CAST(:prompt_tokens AS integer[]), CAST(:completion_tokens AS integer[]),
        CAST(:cost AS float8[]), CAST(:latency_ms AS float8[])
    ) AS v
    ON CONFLICT (cache_key) DO UPDATE SET
        raw = excluded.raw, parsed = excluded.parsed,
        prompt_tokens = excluded.prompt_tokens,
        completion_tokens = excluded.completion_tokens,
        latency_ms = excluded.latency_ms, cost = excluded.cost,
        run_id = excluded.run_id, judge = excluded.judge
    WHERE call.parsed IS false
    """
)

FINISH = text(
    """
    UPDATE judgment AS j SET
        status = v.status, score = v.score, rationale = v.rationale, reason = v.reason,
        detail = v.detail, call_key = v.call_key, lease_until = NULL,
        updated_at = CAST(:now AS timestamptz)
    FROM unnest(
        CAST(:id AS integer[]), CAST(:status AS varchar[]), CAST(:score AS integer[]),
        CAST(:rationale AS text[]), CAST(:reason AS varchar[]), CAST(:detail AS text[]),
        CAST(:call_key AS varchar[])
    ) AS v(id, status, score, rationale, reason, detail, call_key)
    WHERE j.id = v.id AND j.status <> :done
    """
)

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
    params["done"] = Status.DONE.value
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
