"""Normalize and compare two captures of bench.golden (the normalizations N1-N4 are
listed in bench/golden.py's docstring)."""

from __future__ import annotations

import difflib
import gzip
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MANIFEST = "golden.json"
TIME_RE = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?")
DURATION_RE = re.compile(r"\bin \d+(\.\d+)? s\b")


def normalize(path: Path, data: bytes, roots: Sequence[tuple[str, str]]) -> bytes:
    """The file's bytes with N1-N4 applied (bench/golden.py); PNG and SQLite as they are."""
    if path.suffix == ".gz":
        return _bundle(gzip.decompress(data).decode("utf-8"), roots).encode()
    if path.suffix in (".png", ".db"):
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    return _text(text, roots, durations=path.name == "run.txt").encode()


def _text(text: str, roots: Sequence[tuple[str, str]], durations: bool = False) -> str:
    for root, token in roots:  # N3
        text = text.replace(root, token)
    text = TIME_RE.sub("<TIME>", text)  # N1
    return DURATION_RE.sub("in <S> s", text) if durations else text  # N4


def _bundle(text: str, roots: Sequence[tuple[str, str]]) -> str:
    """N2: a bundle's volatile columns blanked, its call rows sorted, its call uids
    numbered in that order; then N1 and N3."""
    lines = text.splitlines()
    columns: dict[str, list[str]] = json.loads(lines[0]).get("tables", {})
    blank = {("call", "latency_ms"), ("judgment", "lease_until")}
    rows: list[Any] = []
    for line in lines[1:]:
        row = json.loads(line)
        if isinstance(row, list) and row and row[0] in columns:
            for i, col in enumerate(columns[row[0]], start=1):
                if (row[0], col) in blank and i < len(row):
                    row[i] = None
        elif isinstance(row, dict) and "sha256" in row:
            row["sha256"] = "<SHA>"
        rows.append(row)
    uid_at = {
        t: cols.index(c) + 1
        for t, cols in columns.items()
        for c in ("uid", "call_uid")
        if c in cols
    }
    calls = sorted(
        (r for r in rows if isinstance(r, list) and r[:1] == ["call"]),
        key=lambda r: json.dumps(r[: uid_at["call"]] + r[uid_at["call"] + 1 :]),
    )
    uids = {r[uid_at["call"]]: f"uid-{n}" for n, r in enumerate(calls)} if calls else {}
    at_call = iter(calls)
    out = [lines[0]]
    for row in rows:
        if isinstance(row, list) and row[:1] == ["call"]:
            row = next(at_call)
        if isinstance(row, list) and row[:1] and row[0] in uid_at:
            i = uid_at[row[0]]
            row[i] = uids.get(row[i], row[i])
        out.append(json.dumps(row, ensure_ascii=False))
    return _text("\n".join(out) + "\n", roots)


def _files(root: Path) -> set[str]:
    skip = {MANIFEST}
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file()
        and str(p.relative_to(root)) not in skip
        and p.relative_to(root).parts[0] != "stores"
        and "inputs" not in p.relative_to(root).parts
    }


def _roots(root: Path) -> list[tuple[str, str]]:
    found = [(str(root.resolve()), "<OUTDIR>")]
    manifest = root / MANIFEST
    if manifest.exists():
        doc = json.loads(manifest.read_text())
        found = [(doc["outdir"], "<OUTDIR>"), *found, (doc["tree"], "<TREE>")]
    return found


def compare(before: Path, after: Path, head: int = 12) -> int:
    kinds = [
        json.loads((d / MANIFEST).read_text()).get("kind") if (d / MANIFEST).exists() else None
        for d in (before, after)
    ]
    left, right = _files(before), _files(after)
    if "reopen" in kinds:  # a reopen has no run of its own
        left = {f for f in left if not f.endswith("run.txt")}
        right = {f for f in right if not f.endswith("run.txt")}
        if kinds[1] == "reopen":
            left = {f for f in left if f.split("/")[0] in {g.split("/")[0] for g in right}}
    differ = 0
    for name in sorted(left | right):
        if name not in right or name not in left:
            print(f"ONLY IN {'BEFORE' if name in left else 'AFTER'}: {name}")
            differ += 1
            continue
        a = normalize(Path(name), (before / name).read_bytes(), _roots(before))
        b = normalize(Path(name), (after / name).read_bytes(), _roots(after))
        if a == b:
            continue
        differ += 1
        print(f"DIFFERS: {name}")
        try:
            diff = difflib.unified_diff(
                a.decode().splitlines(),
                b.decode().splitlines(),
                "before/" + name,
                "after/" + name,
                lineterm="",
                n=1,
            )
            for line in list(diff)[:head]:
                print("    " + line[:300])
        except UnicodeDecodeError:
            print(f"    binary: {len(a)} vs {len(b)} bytes")
    total = len(left | right)
    print(f"{total - differ} of {total} files identical" + (f", {differ} differ" if differ else ""))
    return 1 if differ else 0
