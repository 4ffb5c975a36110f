"""PostgreSQL's report reads the pivot by one binary COPY with its cells numbered in SQL
(storage.pivot_copy) and counts positions per response block: the same pivot, table and
counts as the row-by-row reading, the string-numbering table build and the sort."""

from __future__ import annotations

import numpy as np
import pytest

from flask_eval.core.types import DOMAINS
from flask_eval.report.scores import build, build_coded
from flask_eval.storage import analytics, positions
from flask_eval.storage.store import Store
from tests.conftest import EXAMPLES
from tests.report.ledger import Outcome, Row, every_ending, finish, judges, planned_run


def _ledger(store: Store) -> int:
    run = planned_run(store, "copy", instances=str(EXAMPLES / "instances.jsonl"),
                      responses=[f"b={EXAMPLES / 'model_b.jsonl'}",
                                 f"a={EXAMPLES / 'model_a.jsonl'}"],
                      judges=judges("zeta", "split", "Alpha", "a.b"))  # fmt: skip

    def scored(row: Row, base: str) -> Outcome:
        return "done", 1 + (row.id * 7) % 5, base

    finish(store, run, lambda row: every_ending(row, scored))
    return run.id


def test_the_copied_pivot_equals_the_pivot_read_as_rows(postgres_url: str) -> None:
    store = Store(postgres_url)
    run_id = _ledger(store)
    names = analytics.run_judges(store, run_id)[::-1]
    with store.engine.begin() as conn:
        coded = analytics._read_coded(conn, run_id, names, calls=True)
        rows = analytics._read_rows(conn, run_id, names, calls=True)
    store.close()
    assert coded is not None
    (keys, codes, total, calls), (keys_r, codes_r, total_r, calls_r) = coded, rows
    assert total == total_r > 0 and calls is not None and calls_r is not None
    assert (keys.models, keys.instances, keys.criteria) == (
        keys_r.models, keys_r.instances, keys_r.criteria)  # fmt: skip
    at = {c: n for n, c in enumerate(keys_r.cells())}
    order = [at[c] for c in keys.cells()]
    assert sorted(order) == list(range(len(keys_r)))
    np.testing.assert_array_equal(codes, codes_r[order])
    for mine, theirs in zip(calls, calls_r, strict=True):
        np.testing.assert_array_equal(mine, theirs[order])


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
    want = build(cells, ["j"], state, score, difficulty, domains, DOMAINS)
    models, instances, skills = ("x", "m2", "m1"), ("i2", "i1"), ("t", "u", "s")
    codes = tuple(np.array([labels.index(c[k]) for c in cells])
                  for k, labels in enumerate((models, instances, skills)))  # fmt: skip
    got = build_coded((models, instances, skills), codes, ["j"], state, score,  # type: ignore[arg-type]
                      difficulty, domains, DOMAINS)  # fmt: skip
    for name in ("models", "instances", "skills", "judges", "domains"):
        assert getattr(got, name) == getattr(want, name)
    for name in ("model", "instance", "skill", "state", "score", "difficulty", "domain_member"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
