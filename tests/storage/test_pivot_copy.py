"""PostgreSQL's report reads the pivot by one binary COPY with its cells numbered in SQL
(storage.pivot_copy) and counts positions per response block: the same pivot, table and
counts as the row-by-row reading, the string-numbering table build and the sort."""

from __future__ import annotations

from contextlib import ExitStack

import numpy as np
import pytest

from flask_eval.core.types import DOMAINS
from flask_eval.report.scores import InstanceGroups, build, build_coded
from flask_eval.storage import analytics, positions
from flask_eval.storage.pivot_copy import read_coded_parts
from flask_eval.storage.store import Store
from tests.conftest import EXAMPLES
from tests.report.ledger import Outcome, Row, every_ending, finish, judges, planned_run


def _ledger(store: Store) -> int:
    run = planned_run(
        store,
        "copy",
        instances=str(EXAMPLES / "instances.jsonl"),
        responses=[f"b={EXAMPLES / 'model_b.jsonl'}", f"a={EXAMPLES / 'model_a.jsonl'}"],
        judges=judges("zeta", "split", "Alpha", "a.b"),
    )

    def scored(row: Row, base: str) -> Outcome:
        return "done", 1 + (row.id * 7) % 5, base

    finish(store, run, lambda row: every_ending(row, scored))
    return run.id


@pytest.mark.parametrize("parts", [1, 2, 3])
def test_the_copied_pivot_equals_the_pivot_read_as_rows(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, parts: int
) -> None:
    """Read in one part, in two parts by model (one model each), or asked for three
    parts of a run of two models (read in one)."""
    monkeypatch.setattr(analytics, "POSTGRES_PARTS", parts)
    store = Store(postgres_url)
    run_id = _ledger(store)
    names = analytics.run_judges(store, run_id)[::-1]
    with ExitStack() as stack:
        conn = stack.enter_context(analytics._read_transaction(store))
        assert len(analytics._model_bounds(conn, run_id, parts)) == (1 if parts == 2 else 0)
        coded = analytics._read_coded(stack, store, conn, run_id, names, calls=True)
        rows = analytics._read_rows(conn, run_id, names, calls=True)
    store.close()
    assert coded is not None
    (keys, codes, total, calls), (keys_r, codes_r, total_r, calls_r) = coded, rows
    assert total == total_r > 0 and calls is not None and calls_r is not None
    assert (keys.models, keys.instances, keys.criteria) == (
        keys_r.models,
        keys_r.instances,
        keys_r.criteria,
    )
    at = {c: n for n, c in enumerate(keys_r.cells())}
    order = [at[c] for c in keys.cells()]
    assert sorted(order) == list(range(len(keys_r)))
    np.testing.assert_array_equal(codes, codes_r[order])
    for mine, theirs in zip(calls, calls_r, strict=True):
        np.testing.assert_array_equal(mine, theirs[order])


def test_parts_cut_anywhere_give_the_same_cells(postgres_url: str) -> None:
    """Cuts before every model, between them, after them: the same cells and columns
    (an empty part included), whatever part each model fell in."""
    store = Store(postgres_url)
    run_id = _ledger(store)
    names = analytics.run_judges(store, run_id)
    code = analytics._code()
    got = []
    with ExitStack() as stack:
        first = stack.enter_context(analytics._read_transaction(store))
        snapshot = str(first.exec_driver_sql("SELECT pg_export_snapshot()").scalar_one())
        more = [stack.enter_context(analytics._read_transaction(store, snapshot)) for _ in range(2)]
        for bounds in ([], ["A"], ["b"], ["zz"], ["a", "b"], ["0", "zz"]):
            conns = [first, *more][: len(bounds) + 1]
            read = read_coded_parts(conns, run_id, names, code, bounds)
            assert read is not None
            keys, counts, packed, hashes = read
            by_cell = {
                c: (int(counts[n]), packed[n].tolist(), hashes[n].tolist())
                for n, c in enumerate(keys.cells())
            }
            assert len(by_cell) == len(keys) > 0
            got.append(by_cell)
    store.close()
    assert all(g == got[0] for g in got)


def test_the_parts_read_one_snapshot(postgres_url: str) -> None:
    """A row finished after the first part's transaction began is seen by none of the
    parts: every part reads the snapshot the first one exported."""
    store = Store(postgres_url)
    run_id = _ledger(store)
    count = "SELECT count(*) FROM judgment WHERE run_id = %(r)s AND status = 'done'"
    with analytics._read_transaction(store) as first:
        before = first.exec_driver_sql(count, {"r": run_id}).scalar_one()
        snapshot = str(first.exec_driver_sql("SELECT pg_export_snapshot()").scalar_one())
        with store.engine.begin() as writer:  # another session finishes a row
            writer.exec_driver_sql(
                "UPDATE judgment SET status = 'done', score = 3 WHERE id = (SELECT min(id) "
                "FROM judgment WHERE run_id = %(r)s AND status <> 'done')",
                {"r": run_id},
            )
        with analytics._read_transaction(store, snapshot) as second:
            assert second.exec_driver_sql(count, {"r": run_id}).scalar_one() == before
    with store.engine.connect() as fresh:
        assert fresh.exec_driver_sql(count, {"r": run_id}).scalar_one() == before + 1
    bad = analytics._read_transaction(store, "1'; DROP TABLE judgment; --")
    with pytest.raises(ValueError, match="snapshot"), bad:
        pass
    store.close()


def test_without_a_connection_to_spare_the_pivot_is_read_in_one_part(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server or pool with no second connection to give: the report still reads its
    pivot, in one part, the same cells."""
    from sqlalchemy.exc import OperationalError

    store = Store(postgres_url)
    run_id = _ledger(store)
    whole = analytics.pivot(store, run_id)
    opened = analytics._read_transaction

    def refused(store: Store, snapshot: str | None = None) -> object:
        if snapshot is not None:
            raise OperationalError("connect", {}, Exception("too many clients already"))
        return opened(store)

    monkeypatch.setattr(analytics, "_read_transaction", refused)
    alone = analytics.pivot(store, run_id)
    store.close()

    def by_cell(p: analytics.Pivot) -> dict[tuple[str, str, str], tuple[list[int], str]]:
        return {
            c: (p.state[n].tolist(), repr(p.score[n].tolist()))
            for n, c in enumerate(p.keys.cells())
        }

    assert by_cell(alone) == by_cell(whole) and len(whole.keys) > 0


@pytest.mark.parametrize("blocks", [8, 0])
def test_positions_in_blocks_equal_the_sorted_count(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, blocks: int
) -> None:
    """Blocks of a response's criteria, or (no block wide enough) the sort of its rows:
    the ledger's own counts (window functions) either way."""
    monkeypatch.setattr(positions, "BLOCK_CRITERIA", blocks)
    store = Store(postgres_url)
    run_id = _ledger(store)
    read = analytics.pivot(store, run_id, calls=True)
    counted = positions.positions_of_pivot(read)
    expected = sorted(positions.position_counts(store, run_id))
    store.close()
    assert counted == expected and {p for _, p, _, _ in expected} >= {1, 2}


def test_a_table_from_codes_equals_the_table_from_strings() -> None:
    """Labels in any order, some unused: the same table as from the cells' strings."""
    cells = [("m2", "i1", "s"), ("m1", "i2", "s"), ("m1", "i1", "t"), ("m2", "i2", "t")]
    state = np.array([[1], [1], [2], [1]], dtype=np.int8)
    score = np.array([[3.0], [4.0], [np.nan], [5.0]])
    difficulty = {"i1": 2, "i2": None}
    domains = {"i1": ["Humanities"], "i2": []}
    want = build(cells, ["j"], state, score, InstanceGroups(difficulty, domains, DOMAINS))
    models, instances, skills = ("x", "m2", "m1"), ("i2", "i1"), ("t", "u", "s")
    codes = tuple(
        np.array([labels.index(c[k]) for c in cells])
        for k, labels in enumerate((models, instances, skills))
    )
    got = build_coded(
        (models, instances, skills),
        codes,
        ["j"],
        state,
        score,  # type: ignore[arg-type]
        InstanceGroups(difficulty, domains, DOMAINS),
    )
    for name in ("models", "instances", "skills", "judges", "domains"):
        assert getattr(got, name) == getattr(want, name)
    for name in ("model", "instance", "skill", "state", "score", "difficulty", "domain_member"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
