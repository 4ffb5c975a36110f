"""The pivot's SQL walks the ledger's unique index in order on SQLite (no sort of a
million rows): a planner regression here cost the report benchmark 50% once."""

from __future__ import annotations

from sqlalchemy.dialects import sqlite

from flask_eval.storage.analytics import pivot_select
from flask_eval.storage.store import Store


def test_pivot_groups_along_the_unique_index_without_a_sort(sqlite_url: str) -> None:
    store = Store(sqlite_url)
    try:
        stmt = pivot_select(1, ["judge-a", "judge-b"])
        sql = str(stmt.compile(dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True}))
        with store.engine.connect() as conn:
            plan = [str(r[3]) for r in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}")]
    finally:
        store.close()
    assert any("USING INDEX sqlite_autoindex_judgment" in step for step in plan), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan
