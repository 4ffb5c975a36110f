"""bench.people_bench at a tiny size (SQLite), so that it keeps working."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import people_bench


def test_the_people_bench_runs_at_a_tiny_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "people.json"
    args = ["--judgments", "900", "--items", "12", "--ops", "10", "--sqlite"]
    assert people_bench.main([*args, str(tmp_path / "p.db"), "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert (result["backend"], result["items"], result["people_rows"]) == ("sqlite", 36, 108)
    for op in ("next_item", "submit"):
        assert 0 < result[op]["median_ms"] <= result[op]["p95_ms"] <= result[op]["max_ms"]
    printed = capsys.readouterr().out
    assert "next_item" in printed and "submit" in printed
