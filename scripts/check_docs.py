"""Docs that stay true: every repository path and dotted name that README.md, CHANGELOG.md,
docs/ and the code's docstrings and comments mention must resolve.

What is checked, in text between backticks (Markdown's `x`, reST's ``x`` and :role:`x`):

- a **path** whose first part is one of this repository's top-level entries (``workers/``,
  ``docs/design/limiter.md``, ``README.md``,
  ``tests/test_install.py::test_the_distribution_adds_one_import_name``) must exist; a
  test named after ``::`` must be defined in that file. Paths of other projects
  (upstream's ``libs/...``, a user's ``outputs/gpt4.jsonl``) and paths git ignores (a
  benchmark's output under ``bench/results/``) are skipped.
- a **dotted name** whose first part is ``flask_eval``, one of its layers (``report``,
  ``workers``, ...; short for ``flask_eval.report``), ``bench`` or ``tests`` must import and
  resolve attribute by attribute (``producer.context.RunContext.protocol_for``).
- in Markdown, a relative link's target must exist.

The prose meant for users (README.md, CHANGELOG.md, docs/) speaks of the software and its
measurements, never of how the work was organised: a line naming a work item ("issue 24"),
a closing note, a working session or a grader is reported (:data:`NARRATION`).

Prints one line per broken reference (``file:line: what``) and exits 1 if there is any.
``scripts/lint`` runs it; ``tests/test_check_docs.py`` tests it.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("app", "core", "producer", "report", "rubrics", "simulator", "storage", "workers")
#: dotted names starting with one of these are ours
DOTTED_ROOTS = ("flask_eval", *LAYERS, "bench", "tests")
#: a file name ending of a token that names a file, not a module (``report.json``)
FILE_ENDINGS = {"json", "jsonl", "csv", "txt", "png", "svg", "yaml", "yml", "md", "db", "log"}

TICKED = re.compile(r"(?::[a-z]+:)?`{1,2}([^`\n]+?)`{1,2}")
MD_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
#: how the work was organised, which the users' prose never mentions (a database session is
#: called a connection or a transaction there, so that "session" stays unambiguous)
NARRATION = re.compile(
    r"\bissues?[ -]?#?\d+|\bissue's\b|\bclosing notes?\b|docs/closing|\bgrader\b"
    r"|\bsessions?\b|\b(?:this|that|the first|the last|the previous|each) stop\b",
    re.IGNORECASE,
)
PATH = re.compile(r"\.?[A-Za-z0-9_][A-Za-z0-9_.\-]*(?:/[A-Za-z0-9_.\-]*)*(?:::[A-Za-z0-9_]+)*")


def sources() -> Iterator[Path]:
    yield from (ROOT / "README.md", ROOT / "CHANGELOG.md")
    yield from sorted((ROOT / "docs").rglob("*.md"))
    for top in (*LAYERS, "flask_eval", "bench", "tests", "scripts"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if not any(part.startswith(".") for part in path.relative_to(ROOT).parts):
                if top == "flask_eval" and path.relative_to(ROOT / top).parts[0] in LAYERS:
                    continue  # the layers' links: read once, under their own folder
                if path != ROOT / "tests" / "test_check_docs.py":  # stale on purpose
                    yield path


@cache
def top_level() -> frozenset[str]:
    return frozenset(p.name for p in ROOT.iterdir() if not p.name.startswith(".git"))


def check_path(token: str, doc: Path) -> str | None:
    """Why ``token`` (a path of this repository) does not resolve, or None."""
    path, _, test = token.partition("::")
    path = path.rstrip("/")
    first = path.split("/", 1)[0]
    if first not in top_level() or (first == path and "." not in path and not test):
        return None  # another project's path, or a bare word (``tests``)
    target = ROOT / path
    if not target.exists() and not ignored(path):
        return f"no such path: {path}"
    if test and target.exists():
        name = test.split("::")[-1].split("[")[0]
        if not re.search(
            rf"^\s*(?:async\s+)?(?:def|class) {re.escape(name)}\b",
            target.read_text(encoding="utf-8"),
            re.M,
        ):
            return f"{path} defines no {name}"
    return None


@cache
def ignored(path: str) -> bool:
    """Whether git ignores ``path`` (a generated file: benchmark results, a local store)."""
    for name in (path, path + "/"):  # a pattern such as ``results/`` matches folders only
        done = subprocess.run(["git", "check-ignore", "-q", "--no-index", name], cwd=ROOT)
        if done.returncode == 0:
            return True
    return False


@cache
def check_dotted(token: str) -> str | None:
    """Why ``token`` (a dotted name of ours) does not resolve, or None."""
    parts = token.split(".")
    if parts[0] in LAYERS:
        parts = ["flask_eval", *parts]
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for i, attr in enumerate(parts[cut:]):
            if not hasattr(obj, attr):
                annotations = getattr(obj, "__annotations__", {})
                fields = getattr(obj, "model_fields", {})  # pydantic / SQLModel columns
                if i == len(parts[cut:]) - 1 and (attr in annotations or attr in fields):
                    return None  # a declared field without a class-level value
                return f"{'.'.join(parts[: cut + i])} has no {attr!r}"
            obj = getattr(obj, attr)
        return None
    return f"no module {parts[0]}"


def classify(token: str) -> tuple[str, str] | None:
    """("path" | "dotted", the name) for a reference of ours, else None."""
    token = token.strip().strip("()").removesuffix("()").rstrip(".,:;")
    if " " in token or any(c in token for c in "*<>{}[]$~…") or "..." in token:
        return None
    if "/" in token or "::" in token or token in top_level():
        return ("path", token) if PATH.fullmatch(token) else None
    if DOTTED.fullmatch(token) and token.split(".")[0] in DOTTED_ROOTS:
        if token.rsplit(".", 1)[1] in FILE_ENDINGS:
            return None  # a file name such as report.json
        return ("dotted", token)
    return None


def is_prose(doc: Path) -> bool:
    """Whether ``doc`` is written for users (the README, the release notes, docs/)."""
    return doc.suffix == ".md" and (doc.parent == ROOT or "docs" in doc.relative_to(ROOT).parts)


def problems_in(doc: Path) -> Iterator[tuple[int, str]]:
    text = doc.read_text(encoding="utf-8")
    prose = doc.suffix == ".md" and (not doc.is_relative_to(ROOT) or is_prose(doc))
    for lineno, line in enumerate(text.splitlines(), 1):
        if prose and (found := NARRATION.search(line)):
            yield lineno, f"speaks of the work, not the software: {found.group(0)!r}"
        tokens = [m.group(1) for m in TICKED.finditer(line)]
        for token in tokens:
            kind = classify(token)
            if kind is None:
                continue
            what, name = kind
            problem = check_path(name, doc) if what == "path" else check_dotted(name)
            if problem:
                yield lineno, problem
        if doc.suffix == ".md":
            for target in MD_LINK.findall(line):
                if "://" in target or target.startswith("mailto:"):
                    continue
                if not (doc.parent / target).exists():
                    yield lineno, f"broken link: {target}"


def main() -> int:
    sys.path.insert(0, str(ROOT))  # bench and tests are not installed
    broken = 0
    for doc in sources():
        for lineno, problem in problems_in(doc):
            print(f"{doc.relative_to(ROOT)}:{lineno}: {problem}")
            broken += 1
    if broken:
        print(f"{broken} broken reference(s) in the docs, docstrings and comments")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
