"""PostgreSQL: a run's judgments and paid calls counted as they are written (schema
version 9, docs/design/ledger-scale.md).

``judgment_tally`` holds, per (run, judge, status, reason), how many judgments are in it;
``call_tally``, per (run, judge), the calls paid and their tokens and cost. Statement
triggers on ``judgment`` and ``call`` keep them: each statement adds what it inserted
and takes away what it deleted, grouped (an ``UPDATE`` both, from its transition tables),
so every writer (claims, outcomes, resets, bundle imports, deletes) is counted without
knowing of it, in its own transaction. A status (`flask-eval status`, the live view)
then reads a few dozen rows instead of grouping a run's millions of judgments.

The rows of a tally are upserted in key order, so two statements touching the same keys
wait for each other and never deadlock. SQLite (the embedded store, one writer) keeps
grouping the ledger itself: these tables stay empty there.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event, func, select
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel

from flask_eval.core.errors import Status
from flask_eval.storage.models import CALL, CALL_TALLY, JUDGMENT, JUDGMENT_TALLY
from flask_eval.storage.predicates import person

J, C = JUDGMENT.c, CALL.c

_KEY = "run_id, judge, status, reason"
_J_ROWS = "run_id, judge, status, coalesce(reason, '') AS reason"
_C_SUMS = (
    "calls",
    "batch_calls",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "cost",
)
_C_ROWS = (
    "run_id, judge, 1 AS calls, CASE WHEN batch THEN 1 ELSE 0 END AS batch_calls, "
    "prompt_tokens, completion_tokens, cached_tokens, cache_write_tokens, cost"
)


def _judgment_upsert(source: str) -> str:
    return f"""
        INSERT INTO judgment_tally AS t ({_KEY}, n)
        SELECT {_KEY}, sum(d) FROM ({source}) AS x GROUP BY {_KEY}
        HAVING sum(d) <> 0 ORDER BY {_KEY}
        ON CONFLICT ({_KEY}) DO UPDATE SET n = t.n + excluded.n;"""


def _call_upsert(source: str) -> str:
    sums = ", ".join(f"sum({c})" for c in _C_SUMS)
    sets = ", ".join(f"{c} = t.{c} + excluded.{c}" for c in _C_SUMS)
    return f"""
        INSERT INTO call_tally AS t (run_id, judge, {", ".join(_C_SUMS)})
        SELECT run_id, judge, {sums} FROM ({source}) AS x WHERE run_id IS NOT NULL
        GROUP BY run_id, judge HAVING sum(calls) <> 0 ORDER BY run_id, judge
        ON CONFLICT (run_id, judge) DO UPDATE SET {sets};"""


def _negated(columns: tuple[str, ...]) -> str:
    return "run_id, judge, " + ", ".join(f"-{c} AS {c}" for c in columns)


_NEW_J = f"SELECT {_J_ROWS}, 1 AS d FROM new_rows"
_OLD_J = f"SELECT {_J_ROWS}, -1 AS d FROM old_rows"
_NEW_C = f"SELECT {_C_ROWS} FROM new_rows"
_OLD_C_NEG = f"SELECT {_negated(_C_SUMS)} FROM (SELECT {_C_ROWS} FROM old_rows) AS o"

_BODIES = {
    ("judgment", "insert"): _judgment_upsert(_NEW_J),
    ("judgment", "delete"): _judgment_upsert(_OLD_J),
    ("judgment", "update"): _judgment_upsert(f"{_NEW_J} UNION ALL {_OLD_J}"),
    ("call", "insert"): _call_upsert(_NEW_C),
    ("call", "delete"): _call_upsert(_OLD_C_NEG),
    ("call", "update"): _call_upsert(f"{_NEW_C} UNION ALL {_OLD_C_NEG}"),
}
_TRANSITIONS = {
    "insert": "REFERENCING NEW TABLE AS new_rows",
    "delete": "REFERENCING OLD TABLE AS old_rows",
    "update": "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows",
}


def trigger_ddl(table: str) -> list[str]:
    """The functions and statement triggers that keep ``table``'s tally (PostgreSQL)."""
    out = []
    for (target, op), body in _BODIES.items():
        if target != table:
            continue
        name = f"flask_eval_{table}_tally_{op}"
        out.append(
            f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$\n"
            f"BEGIN{body}\n    RETURN NULL;\nEND $$"
        )
        out.append(f"DROP TRIGGER IF EXISTS {name} ON {table}")
        out.append(
            f"CREATE TRIGGER {name} AFTER {op.upper()} ON {table} {_TRANSITIONS[op]} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {name}()"
        )
    return out


def backfill_sql() -> list[str]:
    """Fill both tallies from the ledger as it stands (a store migrated to version 9)."""
    return [
        "DELETE FROM judgment_tally",
        f"INSERT INTO judgment_tally ({_KEY}, n) SELECT {_KEY}, count(*) FROM "
        f"(SELECT {_J_ROWS} FROM judgment) AS x GROUP BY {_KEY}",
        "DELETE FROM call_tally",
        f"INSERT INTO call_tally (run_id, judge, {', '.join(_C_SUMS)}) SELECT run_id, judge, "
        + ", ".join(f"sum({c})" for c in _C_SUMS)
        + f" FROM (SELECT {_C_ROWS} FROM call WHERE run_id IS NOT NULL) AS x"
        " GROUP BY run_id, judge",
    ]


def install(conn: Connection, backfill: bool = False) -> None:
    """Create the triggers (and fill the tallies) on a PostgreSQL store."""
    if conn.dialect.name != "postgresql":
        return
    if backfill:  # no writer may slip between the counts and the triggers
        conn.exec_driver_sql("LOCK TABLE judgment, call IN SHARE ROW EXCLUSIVE MODE")
    for table in ("judgment", "call"):
        for statement in trigger_ddl(table):
            conn.exec_driver_sql(statement)
    if backfill:
        for statement in backfill_sql():
            conn.exec_driver_sql(statement)


def _after_create(target: Any, conn: Connection, **kw: Any) -> None:
    """A new store: the triggers, once every table is made (``create_all`` makes the
    tallies before the tables they count)."""
    created = kw.get("tables") or ()
    if conn.dialect.name == "postgresql" and JUDGMENT_TALLY in created:
        install(conn)


event.listen(SQLModel.metadata, "after_create", _after_create)


# -- reading: the tallies on PostgreSQL, the ledger grouped on SQLite ---------------------

T, CT = JUDGMENT_TALLY.c, CALL_TALLY.c


def judgment_counts(conn: Connection, run_id: int) -> list[tuple[str, str, str | None, int]]:
    """``(judge, status, reason, judgments)`` of a run (reason None: none)."""
    if conn.dialect.name == "postgresql":
        stmt = select(T.judge, T.status, T.reason, T.n).where(T.run_id == run_id, T.n != 0)
        return [(str(j), str(s), str(r) or None, int(n)) for j, s, r, n in conn.execute(stmt)]
    stmt = (
        select(J.judge, J.status, J.reason, func.count())
        .where(J.run_id == run_id)
        .group_by(J.judge, J.status, J.reason)
    )
    return [
        (str(j), str(s), None if r is None else str(r), int(n)) for j, s, r, n in conn.execute(stmt)
    ]


def status_totals(conn: Connection, run_id: int) -> dict[str, int]:
    """A run's judgments by status."""
    out: dict[str, int] = {}
    for _, status, _, n in judgment_counts(conn, run_id):
        out[status] = out.get(status, 0) + n
    return out


def call_totals(conn: Connection, run_id: int) -> dict[str, dict[str, float]]:
    """Judge -> its paid calls of the run summed (``calls``, ``batch_calls``, tokens,
    ``cost``), judges with a call only."""
    if conn.dialect.name == "postgresql":
        stmt = select(CT.judge, *(CT[c] for c in _C_SUMS)).where(CT.run_id == run_id, CT.calls != 0)
    else:
        stmt = (
            select(
                C.judge,
                func.count(C.id),
                func.count(C.id).filter(C.batch.is_(True)),
                *(func.coalesce(func.sum(C[c]), 0) for c in _C_SUMS[2:]),
            )
            .where(C.run_id == run_id)
            .group_by(C.judge)
        )
    return {
        str(r[0]): dict(zip(_C_SUMS, (float(v) for v in r[1:]), strict=True))
        for r in conn.execute(stmt)
    }


def runs_with_open(conn: Connection) -> list[int]:
    """The runs with judgments pending or running."""
    open_ = (Status.PENDING.value, Status.RUNNING.value)
    if conn.dialect.name == "postgresql":
        stmt = select(T.run_id).where(T.status.in_(open_), T.n > 0).distinct()
    else:
        stmt = select(J.run_id).where(J.status.in_(open_)).distinct()
    return [int(r[0]) for r in conn.execute(stmt)]


def status_by_run(conn: Connection, run_ids: list[int]) -> dict[int, dict[str, int]]:
    """Run -> its judges' judgments by status, for ``run_ids`` (people's rows are not
    judgments: ``storage.queries.status`` counts them apart)."""
    out: dict[int, dict[str, int]] = {i: {} for i in run_ids}
    if not run_ids:
        return out
    if conn.dialect.name == "postgresql":
        stmt = (
            select(T.run_id, T.status, func.sum(T.n))
            .where(T.run_id.in_(run_ids), T.n != 0, ~person(T.judge))
            .group_by(T.run_id, T.status)
        )
    else:
        stmt = (
            select(J.run_id, J.status, func.count())
            .where(J.run_id.in_(run_ids), ~person(J.judge))
            .group_by(J.run_id, J.status)
        )
    for run_id, status, n in conn.execute(stmt):
        out[int(run_id)][str(status)] = int(n)
    return out
