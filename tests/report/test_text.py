"""The text report's tables: names wrap instead of being cut, columns fit 100
characters, the leaderboard comes first, one-criterion pairwise runs print once."""

from __future__ import annotations

import pytest

from flask_eval.core.types import VERDICT_FIRST as F
from flask_eval.core.types import VERDICT_SECOND as S
from flask_eval.report.bootstrap import instance_weights
from flask_eval.report.document import Report, ReportRow
from flask_eval.report.pairwise import Comparison, instances_of
from flask_eval.report.pairwise_report import build
from flask_eval.report.render import to_table
from flask_eval.report.textgrid import grid, wrap_name

NAMES = [
    "response-1",
    "response-2",
    "meta-llama/Llama-2-70b-chat-hf",
    "alpaca_13b",
    "gpt-4-0613",
    "claude_v1",
    "vicuna_13b",
    "llama2_chat_13b",
    "tulu_30b",
]


@pytest.mark.parametrize("width", [6, 7, 8, 10])
def test_wrap_name_keeps_every_character(width: int) -> None:
    for name in NAMES:
        pieces = wrap_name(name, width)
        assert "".join(pieces) == name and all(0 < len(p) <= width for p in pieces)
    assert wrap_name("meta-llama/Llama-2-70b", 12) == ["meta-llama/", "Llama-2-70b"]
    assert wrap_name("llama2_chat_13b", 7) == ["llama2_", "chat_", "13b"]


def _heads(lines: list[str]) -> list[str]:
    """Each column's head, its wrapped lines joined: the head pieces end where the
    column's values end (cells are right-aligned)."""
    values = next(k for k, line in enumerate(lines) if "3.25" in line)
    ends = [k + 4 for k in range(len(lines[values])) if lines[values].startswith("3.25", k)]
    heads = []
    for end in ends:
        pieces = [
            line[:end].split()[-1]
            for line in lines[: values - 1]
            if len(line) >= end and line[end - 1] != " "
        ]
        heads.append("".join(pieces))
    return heads


def test_grid_fits_the_width_and_never_cuts_a_name() -> None:
    for count in (2, 5, 9):
        names = NAMES[:count]
        lines = grid(
            [("Skills", "skill", [("a", "Logical Robustness"), ("b", "Factuality")])],
            [[n] for n in names],
            lambda c, _d, _k: "3.25",
        )
        assert max(len(line) for line in lines) <= 100
        tables = [k for k, line in enumerate(lines) if line.strip() == "Skills"]
        assert len(tables) == 1  # up to 9 models fit one table
        assert _heads(lines) == names
    wide = grid(
        [("Skills", "skill", [("a", "x")])], [[n] for n in NAMES * 2], lambda c, _d, _k: "3.25"
    )
    assert max(len(line) for line in wide) <= 100 and "\n".join(wide).count("Skills") >= 2


def test_win_rate_matrix_heads_tell_response_1_from_response_2() -> None:
    """Auto-J's models, once both cut to ``response``."""
    records = [
        Comparison(str(i), a, b, "overall", "j", F if i % 3 else S)
        for i in range(6)
        for a, b in (("response-1", "response-2"), ("response-2", "response-1"))
    ]
    inst = instances_of(records)
    pw = build(records, instance_weights(len(inst), 10, 0), inst, both_orders=True)
    text = to_table(Report("aj", [], pairwise=pw))
    matrix = text[text.index("Win-rate matrix") :].splitlines()
    assert "response-1" in matrix[1] and "response-2" in matrix[1]
    assert "[overall]" not in text and "[all]" not in text


def test_the_leaderboard_leads_and_models_are_columns() -> None:
    rows = [
        ReportRow(m, j, dim, key, mean, 10, 0, 0)
        for m, mean in (("weak", 2.0), ("strong", 4.0))
        for j in ("j1", "j2")
        for dim, key in (
            ("overall", "all"),
            ("ability", "Logical Thinking"),
            ("ability", "User Alignment"),
        )
    ]
    text = to_table(Report("", rows, models=["weak", "strong"], judges=["j1", "j2"]))
    lines = text.splitlines()
    assert lines[0].startswith("Leaderboard")
    assert lines[2].split()[:2] == ["1", "strong"] and lines[3].split()[:2] == ["2", "weak"]
    head = next(line for line in lines if "strong" in line and "weak" in line)
    assert head.index("strong") < head.index("weak")  # best first, as columns
    row = next(line for line in lines if line.strip().startswith("Logical Thinking"))
    assert row.split()[-2:] == ["4.00", "2.00"]
    assert "Model: " not in text and "Model: strong" in to_table(Report("r", rows), details=True)
