"""bench.golden's comparison: what it normalizes (timestamps, a bundle's wall-clock
columns, uids and row order, the capture's own paths) and what it does not (scores)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from bench.golden_compare import MANIFEST, compare, normalize

COLUMNS = {
    "call": ["uid", "cache_key", "cost", "latency_ms", "created_at"],
    "judgment": ["model", "score", "call_uid", "lease_until", "updated_at"],
}


def _bundle(calls: list[list[object]], judgments: list[list[object]], sha: str) -> bytes:
    lines: list[object] = [{"format": "flask-eval-bundle", "tables": COLUMNS}]
    lines += [["call", *c] for c in calls] + [["judgment", *j] for j in judgments]
    lines.append({"end": "flask-eval-bundle", "sha256": sha})
    return gzip.compress("".join(json.dumps(x) + "\n" for x in lines).encode())


def _capture(root: Path, files: dict[str, bytes]) -> Path:
    root.mkdir()
    (root / MANIFEST).write_text(json.dumps({"outdir": str(root), "tree": "/src/tree-x"}))
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def test_a_bundle_differs_only_in_what_varies_between_two_runs() -> None:
    """Latency, timestamps, uids, the order calls arrived in and the trailer's hash."""
    a = _bundle(
        [
            ["u1", "k1", 0.5, 12, "2026-12-06T05:09:30.1+00:00"],
            ["u2", "k2", 0.25, 7, "2026-12-06T05:09:30.2+00:00"],
        ],
        [["m", 4, "u2", None, "2026-12-06 05:09:31"]],
        "aa",
    )
    b = _bundle(
        [
            ["x9", "k2", 0.25, 3, "2027-01-01T00:00:00+00:00"],
            ["x8", "k1", 0.5, 40, "2027-01-01T00:00:01+00:00"],
        ],
        [["m", 4, "x9", 17, "2027-01-01 00:00:02"]],
        "bb",
    )
    assert normalize(Path("bundle.gz"), a, []) == normalize(Path("bundle.gz"), b, [])
    # the judgment points at the other call: that is a difference
    c = _bundle(
        [["x9", "k2", 0.25, 3, "t"], ["x8", "k1", 0.5, 40, "t"]], [["m", 4, "x8", None, "t"]], "bb"
    )
    assert normalize(Path("bundle.gz"), a, []) != normalize(Path("bundle.gz"), c, [])


@pytest.mark.parametrize(
    ("changed", "differs"),
    [
        ('{"score": 4, "at": "2027-01-02T03:04:05Z", "db": "<root>/stores/x.db"}', False),
        ('{"score": 5, "at": "2026-12-06T05:09:30Z", "db": "<root>/stores/x.db"}', True),
        ('{"score": 4, "at": "2026-12-06T05:09:30Z", "db": "/elsewhere/stores/x.db"}', True),
    ],
)
def test_compare_normalizes_times_and_paths_not_scores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changed: str, differs: bool
) -> None:
    original = '{"score": 4, "at": "2026-12-06T05:09:30Z", "db": "<root>/stores/x.db"}'
    before = _capture(
        tmp_path / "before",
        {
            "run/report.json": original.replace("<root>", str(tmp_path / "before")).encode(),
            "run/figure.png": b"\x89PNG same",
            "stores/x.db": b"ignored",
        },
    )
    after = _capture(
        tmp_path / "after",
        {
            "run/report.json": changed.replace("<root>", str(tmp_path / "after")).encode(),
            "run/figure.png": b"\x89PNG same",
            "stores/x.db": b"not compared",
        },
    )
    assert compare(before, after) == int(differs)
    out = capsys.readouterr().out
    assert ("DIFFERS: run/report.json" in out) == differs
    assert "DIFFERS: stores" not in out and "ONLY IN" not in out


def test_a_file_on_one_side_only_is_a_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _capture(tmp_path / "before", {"run/export.csv": b"a,b\n"})
    after = _capture(tmp_path / "after", {"run/export.csv": b"a,b\n", "run/new.txt": b"x"})
    assert compare(before, after) == 1
    assert "ONLY IN AFTER: run/new.txt" in capsys.readouterr().out
