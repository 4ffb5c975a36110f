"""scripts/check_cycles.py: no import cycles inside a layer, lazy and type-checking
imports included."""

from __future__ import annotations

import importlib
import runpy
import uuid
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
CHECK: dict[str, Any] = runpy.run_path(str(REPO / "scripts" / "check_cycles.py"))


def _package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> str:
    """A package of one layer, ``low``, on ``sys.path`` (a fresh name each time)."""
    root = f"cyclepkg_{uuid.uuid4().hex[:12]}"
    for name, text in {"__init__.py": "", "low/__init__.py": "", **files}.items():
        path = tmp_path / root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace("ROOT", root), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    return root


def test_a_cycle_inside_a_layer_fails_with_its_chain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _package(
        tmp_path,
        monkeypatch,
        {
            "low/a.py": "from ROOT.low import b\n",
            "low/b.py": "def f() -> None:\n    from ROOT.low import c\n",  # a lazy import
            "low/c.py": (  # an import for annotations only
                "from typing import TYPE_CHECKING\n\n"
                "if TYPE_CHECKING:\n"
                "    from ROOT.low import a\n"
            ),
            "low/d.py": "from ROOT.low import a\n",  # imports the cycle; not on it
        },
    )
    assert CHECK["main"]([root]) == 1
    out = capsys.readouterr()
    assert out.out.splitlines() == [
        f"import cycle in {root}.low:",
        f"  {root}.low.a:1 -> {root}.low.b:2 -> {root}.low.c:4 -> {root}.low.a",
    ]
    assert "1 import cycle(s)" in out.err


def test_imports_one_way_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _package(
        tmp_path,
        monkeypatch,
        {"low/a.py": "from ROOT.low import b\n", "low/b.py": "import json\n"},
    )
    assert CHECK["main"]([root]) == 0
    assert capsys.readouterr().out == ""


def test_every_module_of_a_cycle_is_on_a_printed_chain() -> None:
    edges = {"a": frozenset({"b"}), "b": frozenset({"a", "c"}), "c": frozenset({"b"})}
    [component] = CHECK["components"](edges)
    assert component == ["a", "b", "c"]
    assert CHECK["chains"](edges, component) == [["a", "b", "a"], ["c", "b", "c"]]
