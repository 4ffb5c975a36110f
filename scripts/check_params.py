"""No function of the package takes more than 8 parameters: a longer list is a
configuration that wants a type of its own (a run's spec, a section of it, an options
object). ``self`` and ``cls`` are not counted; ``*args`` and ``**kwargs`` count one each.

Usage: ``python scripts/check_params.py`` (exit 1 listing each function over the limit).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: the package's layers (flask_eval/ holds the command line and the Python API)
PACKAGES = (
    "core",
    "rubrics",
    "storage",
    "report",
    "producer",
    "workers",
    "simulator",
    "app",
    "viewer",
    "flask_eval",
)
MAX_PARAMS = 8


def count(args: ast.arguments, method: bool) -> int:
    """The parameters of a signature, without a method's ``self`` or ``cls``."""
    named = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    if method and named and named[0].arg in ("self", "cls"):
        named = named[1:]
    return len(named) + (args.vararg is not None) + (args.kwarg is not None)


def functions(tree: ast.AST) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, bool]]:
    """Every function of a module, with whether it is a method (defined in a class)."""
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, in_class = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield child, in_class
                stack.append((child, False))
            else:
                stack.append((child, isinstance(child, ast.ClassDef)))


def files() -> Iterator[Path]:
    for package in PACKAGES:
        folder = ROOT / package
        if package == "flask_eval":  # its own modules; the layers are links to the rest
            yield from sorted(p for p in folder.rglob("*.py") if not _linked(p, folder))
        else:
            yield from sorted(folder.rglob("*.py"))


def _linked(path: Path, folder: Path) -> bool:
    top = folder / path.relative_to(folder).parts[0]
    return top.is_symlink()


def over_limit() -> list[tuple[str, str]]:
    """``(path:function, path:line: what)`` of each function over the limit."""
    found = []
    for path in files():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for fn, method in functions(tree):
            n = count(fn.args, method)
            if n > MAX_PARAMS:
                where = path.relative_to(ROOT).as_posix()
                found.append((f"{where}:{fn.name}", f"{where}:{fn.lineno}: {fn.name} takes {n}"))
    return sorted(found)


def main() -> int:
    found = over_limit()
    failed = [line for _key, line in found]
    for line in failed:
        print(f"{line} parameters (at most {MAX_PARAMS}: give it a typed options object)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
