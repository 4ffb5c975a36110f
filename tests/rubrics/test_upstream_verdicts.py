"""Every case of prometheus-eval's own parser tests, read by our Prometheus readers.

Upstream: prometheus-eval/prometheus-eval, libs/prometheus-eval/tests/test_parser.py at
commit 650cd1d7f6b5b9e533a2609c38d3761e6644b960 (the 34 cases of ``test_parse_output``:
input, mode, upstream's expected reading; None means upstream refuses the answer). The
inputs and upstream's expectations below are that file's data; ``ours`` is what our
reader gives and ``why`` says why wherever it deliberately differs from upstream.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest

from flask_eval.rubrics.prometheus import read_result
from flask_eval.rubrics.prometheus_relative import read_relative


class Upstream(NamedTuple):
    text: str
    mode: str  # "absolute" or "relative"
    upstream: int | str | None
    ours: int | str | None
    why: str = ""  # the reason, where ours differs from upstream


A, R = "absolute", "relative"

UPSTREAM: list[Upstream] = [
    # --- absolute mode
    Upstream("Reference (Score 5) two results [RESULT] 3", A, 3, 3),
    Upstream("Reference (Score 5) not results", A, None, None),
    Upstream("Excellent. [RESULT] 5 out of 5", A, 5, 5),
    Upstream("Poor performance. [RESULT] score of 1", A, 1, 1),
    Upstream("Good job. [Result] 3", A, 3, 3),
    Upstream("Needs improvement. [Result] Score: 2", A, 2, 2),
    Upstream("Well done. [Result] Result: 4", A, 4, 4),
    Upstream("Average. [Result] 4/5", A, 4, 4),
    Upstream("Excellent. [Result] 5 out of 5", A, 5, 5),
    Upstream("Poor performance. [Result] score of 1", A, 1, 1),
    Upstream("Good job. (Score 5)", A, 5, 5),
    Upstream("Good job. [Score 4]", A, 4, 4),
    Upstream("Good job. score: 3", A, 3, 3),
    Upstream("Good job. Score: 3", A, 3, 3),
    Upstream("Good job. score of 1", A, 1, 1),
    Upstream("Good job. [RESULT] (5)", A, 5, 5),
    # --- absolute mode, upstream's edge cases
    Upstream("The score is definitely not 3.", A, None, None),
    Upstream("I rate this a perfect 10!", A, None, None),
    Upstream("Score: 2.5", A, None, None),
    Upstream("Result: A", A, None, None),
    # --- relative mode
    Upstream("[Response B is not better. [RESULT] A", R, "A", "A"),
    Upstream("Result A or B, not results", R, None, None),
    Upstream("Response A is better. [RESULT] A", R, "A", "A"),
    Upstream("Prefer Response B. [RESULT] B", R, "B", "B"),
    Upstream("Feedback: Both responses are similar... [Response B]", R, "B", "B"),
    Upstream("Feedback: Both responses are clear... [Result] Response B", R, "B", "B"),
    Upstream("Feedback: Both responses are clear... Response B Response A", R, None, None),
    Upstream("Feedback: Both responses are clear... [RESULT: B]", R, "B", "B"),
    Upstream("Feedback: Both responses are clear... [Result: B]", R, "B", "B"),
    Upstream("Feedback: Both responses are clear...Response A. [RESULT] B", R, "B", "B"),
    Upstream("After careful consideration, I select Response B.", R, None, None),
    # --- relative mode, upstream's edge cases
    Upstream("Both responses have their merits.", R, None, None),
    Upstream("Response C is clearly superior.", R, None, None),
    Upstream(
        "The better response is obviously B... or is it A? It's hard to decide.", R, None, None
    ),
]

#: Beyond upstream's table: forms its parser's grammar accepts, and where we refuse on
#: purpose. ``upstream`` is what libs/prometheus-eval/prometheus_eval/parser.py (same
#: commit) gives.
BEYOND: list[Upstream] = [
    Upstream("Feedback: fine. Result: 4", A, 4, 4),
    Upstream("Feedback: fine.\nResult: B", R, "B", "B"),
    Upstream("Feedback: fine. I give it a score of 4", A, 4, 4),
    Upstream("Good job. Score 4", A, 4, 4),
    Upstream("Good. [RESULT] 3,0", A, None, None),
    Upstream(
        "First [RESULT] 3, on reflection [RESULT] 4",
        A,
        4,
        None,
        "two different results: upstream reads the last one silently; we refuse",
    ),
    Upstream(
        "Feedback: A is better. [RESULT] A\nOn reflection, [RESULT] B",
        R,
        "A",
        None,
        "two different results, and text after the first: upstream reads the first line's",
    ),
    Upstream(
        "Good. [RESULT] **4**",
        A,
        None,
        4,
        "markdown emphasis around the number: one unambiguous verdict, read",
    ),
    Upstream(
        "Good. [RESULT] \uff14",
        A,
        4,
        None,
        "a fullwidth (or Arabic-Indic) digit is no score: docs/design/protocols.md",
    ),
]


def _ours(case: Upstream) -> int | str | None:
    got = read_result(case.text) if case.mode == A else read_relative(case.text)
    if isinstance(got, int) or got in ("A", "B"):
        return got
    return None  # a problem description: refused


def test_the_table_holds_all_of_upstreams_cases() -> None:
    assert len(UPSTREAM) == 34
    assert sum(c.mode == A for c in UPSTREAM) == 20


@pytest.mark.parametrize("case", UPSTREAM + BEYOND, ids=lambda c: f"{c.mode}: {c.text[:50]}")
def test_reading_of_each_upstream_case(case: Upstream) -> None:
    assert _ours(case) == case.ours
    # a deliberate difference from upstream is one with a reason, and only that
    assert (case.ours != case.upstream) == bool(case.why)


def test_a_bare_result_colon_means_the_same_in_both_modes() -> None:
    """``Result: X`` is the same marker in both modes: the mode's value after it is a
    verdict, the other mode's value is none."""
    assert read_result("Fine. Result: 4") == 4 and read_relative("Fine. Result: B") == "B"
    assert isinstance(read_result("Fine. Result: B"), str)
    assert read_relative("Fine. Result: 4") not in ("A", "B")
    # and it ranks the same: a [RESULT] elsewhere in the answer overrides it in both
    assert isinstance(read_result("[RESULT] 3 at first. Result: 4"), str)
    assert read_relative("[RESULT] A at first. Result: B") not in ("A", "B")
