"""A rationale that copies the prompt is no judgment, whatever form the copy takes: found
by comparing the rationale with the rendered prompt itself (rubrics/echo.py)."""

from __future__ import annotations

import pytest

from flask_eval.rubrics.echo import Template, template_text, without_echoes
from flask_eval.rubrics.grading import FlaskEvalProtocol, Subject
from flask_eval.rubrics.prometheus import PrometheusProtocol
from flask_eval.rubrics.skills import load_default

SKILLS = load_default()
CRITERIA = [SKILLS.get("Conciseness"), SKILLS.get("Logical Correctness")]
RESPONSE = (
    "To find 15% of 80, multiply 0.15 by 80. Since 0.1 x 80 = 8 and 0.05 x 80 = 4, the "
    "result is 8 + 4 = 12. So 15% of 80 is 12."
)
SUBJECT = Subject("What is 15% of 80?", "15% of 80 is 0.15 x 80 = 12.", RESPONSE)


def _template(protocol: FlaskEvalProtocol | PrometheusProtocol) -> Template:
    messages = protocol.render(SUBJECT, CRITERIA)
    return Template(
        template_text(messages, (SUBJECT.instruction, SUBJECT.reference, SUBJECT.response))
    )


def _answer(conciseness: str, correctness: str) -> str:
    return (
        f"Conciseness: {conciseness}\nLogical Correctness: {correctness}\n"
        '[SCORES] {"Conciseness": 4, "Logical Correctness": 5}'
    )


GENUINE = "The response reaches 12 through 8 + 4, a correct split of 0.15 x 80."


@pytest.mark.parametrize(
    "echo",
    [
        "<one sentence",  # a placeholder of the model's own making
        "<three sentences explaining the score>",
        "<two to four sentences>",
        # the prompt's instructions, copied
        "first write a short rationale (two to four sentences) that cites concrete evidence "
        "from the response, then decide the score.",
        # a rubric level copied whole, nothing of the response
        "The response is mostly concise and would gain only from minor trimming.",
    ],
)
def test_a_rationale_copying_the_prompt_is_no_score(echo: str) -> None:
    protocol = FlaskEvalProtocol()
    reading = protocol.read(_answer(echo, GENUINE), CRITERIA)
    checked = without_echoes(reading, _template(protocol))
    assert checked.scores == {"Logical Correctness": 5}
    assert "Conciseness" not in checked.rationales
    problem = checked.problems["Conciseness"]
    assert ("prompt" in problem or "template" in problem) and problem.endswith("for Conciseness")


@pytest.mark.parametrize(
    "rationale",
    [
        GENUINE,
        "Short and direct: two sentences of working, then the result.",
        # quoting the response at length is evidence, not an echo
        f"It says: '{RESPONSE}' which is right.",
        # a rubric phrase inside a judgment with evidence
        "The final answer is entirely correct: 8 + 4 = 12 matches the reference's 0.15 x 80.",
        "",  # a reply of only the final line (what a reminder asks for)
    ],
)
def test_a_judgment_in_its_own_words_keeps_its_score(rationale: str) -> None:
    protocol = FlaskEvalProtocol()
    text = (f"Conciseness: {rationale}\n" if rationale else "") + ('[SCORES] {"Conciseness": 4}')
    reading = without_echoes(protocol.read(text, CRITERIA[:1]), _template(protocol))
    assert reading.scores == {"Conciseness": 4}, reading.problems


def test_another_protocols_instructions_are_its_own_template() -> None:
    """Prometheus's prompt asks for feedback in its own words: a feedback copying them
    is found by the same comparison."""
    protocol = PrometheusProtocol()
    messages = protocol.render(SUBJECT, CRITERIA[:1])
    copied = " ".join(str(messages[-1]["content"]).split()[:40])
    template = Template(
        template_text(messages, (SUBJECT.instruction, SUBJECT.reference, SUBJECT.response))
    )
    reading = protocol.read(f"Feedback: {copied} [RESULT] 4", CRITERIA[:1])
    if reading.scores:  # the reader took it: the comparison refuses it
        assert without_echoes(reading, template).scores == {}
    own = protocol.read(f"Feedback: {GENUINE} [RESULT] 4", CRITERIA[:1])
    assert without_echoes(own, template).scores == own.scores != {}
