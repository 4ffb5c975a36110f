"""scripts/check_docs.py: every repository path and dotted name in the docs resolves."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
CHECK: dict[str, Any] = runpy.run_path(str(REPO / "scripts" / "check_docs.py"))


def _problems(tmp_path: Path, text: str, name: str = "note.md") -> list[str]:
    doc = tmp_path / name
    doc.write_text(text, encoding="utf-8")
    return [problem for _, problem in CHECK["problems_in"](doc)]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("see `workers/nosuch.py`", "no such path: workers/nosuch.py"),
        ("see ``storage/bulk.py``", "no such path: storage/bulk.py"),
        ("`tests/test_install.py::test_nosuch`", "tests/test_install.py defines no test_nosuch"),
        ("`report.breakdown.nosuch`", "flask_eval.report.breakdown has no 'nosuch'"),
        (
            ":func:`workers.limiter.RedisLimiter`",
            "flask_eval.workers.limiter has no 'RedisLimiter'",
        ),
        ("`flask_eval.nosuch`", "flask_eval has no 'nosuch'"),
        ("[the note](design/nosuch.md)", "broken link: design/nosuch.md"),
    ],
)
def test_a_stale_reference_is_reported(tmp_path: Path, text: str, problem: str) -> None:
    assert _problems(tmp_path, text) == [problem]


@pytest.mark.parametrize(
    "text",
    [
        "`workers/runner.py`, ``report/``, `README.md`, `docs/design/limiter.md`",
        "`tests/test_install.py::test_the_distribution_adds_one_import_name`",
        "`report.breakdown`, :class:`workers.limiter_redis.RedisLimiter`, `flask_eval.cli.main`",
        "`storage.models.Judgment.status`",  # a declared column
        "`libs/prometheus-eval/tests/test_parser.py`, `outputs/gpt4.jsonl`",  # not ours
        "`report.json`, `flask-eval report RUN`, `bench/results/NAME.json`",  # not names
    ],
)
def test_references_that_resolve_or_are_not_ours_pass(tmp_path: Path, text: str) -> None:
    assert _problems(tmp_path, text) == []


def test_a_docstring_is_read_as_well(tmp_path: Path) -> None:
    code = '"""Built by ``storage.db.migrate``."""\n# see `core/nosuch.py`\n'
    assert _problems(tmp_path, code, "mod.py") == [
        "flask_eval.storage.db has no 'migrate'",
        "no such path: core/nosuch.py",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "## Scale (issue 3)",
        "the issue-3 table",
        "measured at the last stop",
        "as the grader found",
        "see docs/closing/issue-24.md",
        "in the same session on one machine",
    ],
)
def test_prose_that_speaks_of_the_work_is_reported(tmp_path: Path, text: str) -> None:
    problems = _problems(tmp_path, text)
    assert len(problems) == 1
    assert problems[0].startswith("speaks of the work, not the software")


def test_code_and_plain_prose_are_not_read_for_narration(tmp_path: Path) -> None:
    assert _problems(tmp_path, "# the SQL session of issue 3\n", "mod.py") == []
    assert _problems(tmp_path, "Runs of 10M judgments; a tissue 3 is no work item.") == []
