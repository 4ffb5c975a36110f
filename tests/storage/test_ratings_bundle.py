"""A run with people's rows travels in a bundle: their rows are checked like the others
and their rating items are made again on import (the items themselves do not travel)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from flask_eval.app.bundle import check_bundle, export_bundle, import_bundle
from flask_eval.app.bundle_checks import BadRow, RowChecks
from flask_eval.storage import ratings as R
from flask_eval.storage.bundle import bundle_columns
from flask_eval.storage.store import Store
from tests.storage.test_ratings import ALICE, VALUE, planned, scores
from tests.storage.test_store import create


def test_a_bundle_brings_people_s_items_back(sqlite_url: str, tmp_path: Path) -> None:
    store = Store(sqlite_url)
    run_id = create(store)
    R.plan_ratings(store, run_id, planned(ALICE, 4))
    rated = R.next_item(store, ALICE, "h1", 60)
    assert rated is not None and R.submit(store, rated.id, ALICE, scores(rated), {}, VALUE)
    flagged = R.next_item(store, ALICE, "h1", 60)
    assert flagged is not None and R.flag(store, flagged.id, ALICE, "no context", VALUE)
    path = tmp_path / "r1.bundle"
    export_bundle(store, store.run_by_id(run_id), path)
    loaded = import_bundle(store, check_bundle(str(path)), "copy")
    copy = store.find_run("copy")
    assert copy is not None and loaded.rows["judgment"] > 0
    assert R.progress(store, ALICE, copy.id) == R.Progress(done=1, flagged=1, open=2)
    served = R.next_item(store, ALICE, "h2", 60, run_id=copy.id)
    assert served is not None and served.criteria == rated.criteria
    assert R.submit(store, served.id, ALICE, scores(served), {}, VALUE)
    store.close()


def _checks(judgment: dict[str, object]) -> None:
    """Check a one-instance bundle whose one judgment row is ``judgment``."""
    columns = bundle_columns()
    checks = RowChecks(columns)
    config = {"judges": [{"name": "memory/j1", "spec": "memory/j1"}], "mode": "instance"}
    rows: list[tuple[str, dict[str, object]]] = [
        ("run", {"mode": "instance", "config": json.dumps(config)}),
        ("instance", {"instance_id": "1", "skills": "[]", "rubrics": "{}"}),
        ("response", {"model": "m", "instance_id": "1", "text": "t"}),
        ("judgment", {"model": "m", "instance_id": "1", "criterion": "c", **judgment}),
    ]
    for table, values in rows:
        defaults = {c: None for c in columns[table]}
        line = [table, *({**defaults, **_filled(table, columns[table]), **values}).values()]
        checks.row(json.loads(json.dumps(line)))
    checks.close()


def _filled(table: str, cols: list[str]) -> dict[str, object]:
    """Values that pass the column checks for the non-null columns the rows leave out."""
    text = {"name", "fingerprint", "instruction", "answer", "text", "model_b", "system_prompt"}
    out: dict[str, object] = {}
    for c in cols:
        if c in text:
            out[c] = "x" if c != "model_b" else ""
        elif c in ("created_at", "updated_at"):
            out[c] = "2026-12-06T00:00:00+00:00"
        elif c in ("claims", "asks", "requests"):
            out[c] = 0
        elif c in ("history", "images"):
            out[c] = "[]"
    return out


@pytest.mark.parametrize(
    "row",
    [
        {"judge": ALICE, "status": "waiting"},
        {"judge": ALICE, "status": "done", "score": None, "value": VALUE},
        {"judge": ALICE, "status": "failed", "reason": "flagged", "detail": "cannot"},
    ],
)
def test_a_bundle_accepts_people_s_rows(row: dict[str, object]) -> None:
    _checks(row)


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ({"judge": "memory/j1", "status": "waiting"}, "only a rater's row"),
        ({"judge": "memory/j1", "status": "failed", "reason": "flagged"}, "only a rater's"),
        ({"judge": ALICE, "status": "pending"}, "a rater's row waits"),
        ({"judge": ALICE, "status": "failed", "reason": "timeout"}, "fails only flagged"),
        ({"judge": "human/", "status": "waiting"}, "no rater's ledger name"),
        ({"judge": ALICE, "status": "waiting", "score": 3}, "score 3 on a waiting row"),
    ],
)
def test_a_bundle_refuses_what_no_rater_writes(row: dict[str, object], says: str) -> None:
    with pytest.raises(BadRow, match=says):
        _checks(row)


def test_the_bundle_file_holds_no_rating_item(sqlite_url: str, tmp_path: Path) -> None:
    store = Store(sqlite_url)
    run_id = create(store)
    R.plan_ratings(store, run_id, planned(ALICE, 2))
    path = tmp_path / "r.bundle"
    export_bundle(store, store.run_by_id(run_id), path)
    with gzip.open(path, "rt") as f:
        header = json.loads(f.readline())
    assert "rating_item" not in header["tables"]
    store.close()
