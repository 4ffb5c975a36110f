"""What one answer may be: one form, ASCII digits, and a rationale that is not the template.

docs/design/protocols.md ("One answer, one form", "Digits", "Template echoes") says why.
"""

from __future__ import annotations

import json

import pytest

from flask_eval.core.types import VERDICT_FIRST
from flask_eval.rubrics.flask_review import FlaskReviewProtocol
from flask_eval.rubrics.grading import FlaskEvalProtocol
from flask_eval.rubrics.pairwise import FlaskEvalPairwiseProtocol
from flask_eval.rubrics.prometheus import PrometheusProtocol
from flask_eval.rubrics.prometheus_relative import PrometheusRelativeProtocol
from flask_eval.rubrics.skills import load_default
from flask_eval.rubrics.structured import RATIONALE_PLACEHOLDER

R = load_default().get("Readability")
F = load_default().get("Factuality")
OURS = FlaskEvalProtocol()


def structured(**criteria: tuple[str, object]) -> str:
    return json.dumps({k: {"rationale": r, "score": s} for k, (r, s) in criteria.items()})


# --- one answer, one form ------------------------------------------------------------------


@pytest.mark.parametrize("line_score", [5, 2], ids=["line disagrees", "line agrees"])
def test_a_structured_answer_followed_by_a_scores_line_is_unreadable(line_score: int) -> None:
    answer = structured(Readability=("Clear and short.", 2)) + (
        f'\n[SCORES] {{"Readability": {line_score}}}'
    )
    reading = OURS.read(answer, [R])
    assert reading.scores == {} and "invalid JSON" in reading.problems["Readability"]


def test_each_form_alone_is_read() -> None:
    assert OURS.read(structured(Readability=("Clear.", 2)), [R]).scores == {"Readability": 2}
    assert OURS.read('Readability: clear.\n[SCORES] {"Readability": 3}', [R]).scores == {
        "Readability": 3
    }
    # free text that merely opens with a brace is free text, read by its final line
    assert OURS.read('{aside}\n[SCORES] {"Readability": 4}', [R]).scores == {"Readability": 4}


# --- digits ----------------------------------------------------------------------------------

FULLWIDTH_FOUR, ARABIC_INDIC_FOUR, PERSIAN_FOUR = "\uff14", "\u0664", "\u06f4"


@pytest.mark.parametrize("digit", [FULLWIDTH_FOUR, ARABIC_INDIC_FOUR, PERSIAN_FOUR])
def test_a_score_in_non_ascii_digits_is_read_by_no_reader(digit: str) -> None:
    ours = OURS.read(f'Readability: fine.\n[SCORES] {{"Readability": "{digit}"}}', [R])
    assert ours.scores == {} and "invalid score" in ours.problems["Readability"]
    form = OURS.read(structured(Readability=("Fine.", digit)), [R])
    assert form.scores == {}
    flask = FlaskReviewProtocol().read(f"Fine.\n{{'Readability': {digit}}}", [R])
    assert flask.scores == {}
    for text in (f"Fine. [RESULT] {digit}", f"Fine.\nScore: {digit}"):
        prom = PrometheusProtocol().read(text, [R])
        assert prom.scores == {} and "ASCII digits" in prom.problems["Readability"]
    assert OURS.read('Readability: fine.\n[SCORES] {"Readability": "4"}', [R]).scores


# --- template echoes -------------------------------------------------------------------------


def test_a_structured_rationale_that_echoes_the_placeholder_is_unreadable() -> None:
    """SmolLM2-135M under a grammar: the prompt's own placeholders as rationales."""
    answer = structured(
        Readability=(RATIONALE_PLACEHOLDER, 1), Factuality=("It names Paris correctly.", 2)
    )
    reading = OURS.read(answer, [R, F])
    assert reading.scores == {"Factuality": 2}
    assert "placeholder" in reading.problems["Readability"]
    for echo in ["", "   ", "<a short rationale>", "...", RATIONALE_PLACEHOLDER.upper()]:
        got = OURS.read(structured(Readability=(echo, 4)), [R])
        assert got.scores == {} and "Readability" in got.problems, echo


def test_a_free_text_rationale_that_is_the_example_is_unreadable() -> None:
    echo = OURS.read('Readability: ...\n[SCORES] {"Readability": 4}', [R])
    assert echo.scores == {} and "echoes the template" in echo.problems["Readability"]
    two = OURS.read(
        'Readability: …\nFactuality: It says Paris, which is right.\n[SCORES] {"Readability": 4,'
        ' "Factuality": 5}',
        [R, F],
    )
    assert two.scores == {"Factuality": 5} and "Readability" in two.problems
    # a reply of only the final line (what the reminder asks for) is no echo
    assert OURS.read('[SCORES] {"Readability": 4}', [R]).scores == {"Readability": 4}


def test_a_prometheus_feedback_that_is_the_placeholder_is_unreadable() -> None:
    for proto, verdict in ((PrometheusProtocol(), "3"), (PrometheusRelativeProtocol(), "A")):
        echo = proto.read(f"Feedback: (write a feedback for criteria) [RESULT] {verdict}", [R])
        assert echo.scores == {} and "placeholder" in echo.problems["Readability"]
        fine = proto.read(f"Feedback: Clear and correct. [RESULT] {verdict}", [R])
        assert fine.scores and not fine.problems


def test_a_pairwise_rationale_that_is_the_example_is_unreadable() -> None:
    proto = FlaskEvalPairwiseProtocol()
    echo = proto.read('Readability: ...\n[VERDICT] {"Readability": "A"}', [R])
    assert echo.scores == {} and "echoes the template" in echo.problems["Readability"]
    assert proto.read('[VERDICT] {"Readability": "A"}', [R]).scores == {
        "Readability": VERDICT_FIRST
    }
