"""scripts/check_params.py: no function of the package takes more than 8 parameters."""

from __future__ import annotations

import ast
import runpy
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
CHECK: dict[str, Any] = runpy.run_path(str(REPO / "scripts" / "check_params.py"))

SOURCE = """
def nine(a, b, c, d, e, f, g, h, i): ...
def eight(a, b, c, d, e, f, g, *args): ...
def starred(a, b, c, d, e, f, g, *args, **kwargs): ...
class C:
    def method(self, a, b, c, d, e, f, g, h): ...
    @classmethod
    def over(cls, a, b, c, d, e, f, g, h, i): ...
"""


def test_each_function_over_eight_parameters_fails_and_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    counted = {
        fn.name: CHECK["count"](fn.args, method)
        for fn, method in CHECK["functions"](ast.parse(SOURCE))
    }
    assert counted == {"nine": 9, "eight": 8, "starred": 9, "method": 8, "over": 9}
    package = tmp_path / "core"
    package.mkdir()
    (package / "wide.py").write_text(SOURCE, encoding="utf-8")
    main = CHECK["main"]
    monkeypatch.setitem(main.__globals__, "ROOT", tmp_path)
    monkeypatch.setitem(main.__globals__, "PACKAGES", ("core",))
    assert main() == 1
    said = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0:3] for line in said] == [
        ["core/wide.py", "2", " nine takes 9 parameters (at most 8"],
        ["core/wide.py", "8", " over takes 9 parameters (at most 8"],
        ["core/wide.py", "4", " starred takes 9 parameters (at most 8"],
    ]


def test_the_package_is_within_the_limit(capsys: pytest.CaptureFixture[str]) -> None:
    assert CHECK["main"]() == 0, capsys.readouterr().out
