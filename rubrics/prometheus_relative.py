"""Prometheus 2's relative grading: which of two responses is better, ``[RESULT] A`` (pure).

The layout is the one the Prometheus 2 evaluator LMs were trained on for pairwise
ranking, reproduced from prometheus-eval (https://github.com/prometheus-eval/prometheus-eval,
``libs/prometheus-eval/prometheus_eval/prompts.py``: ``REL_SYSTEM_PROMPT``,
``RELATIVE_PROMPT`` and ``RELATIVE_PROMPT_WO_REF``; Apache License 2.0, Copyright the
prometheus-eval authors): the system prompt, then the sections ``###Task Description:``,
``###Instruction:``, ``###Response A:``, ``###Response B:``, ``###Reference Answer:``
(left out, with its mention in the task description, when there is no reference),
``###Score Rubric:`` and last ``###Feedback:``, which the judge continues. The rubric
section holds the criterion alone, in brackets: prometheus-eval's own pairwise
evaluation (``eval/run_evaluate.py``) keeps only the first line of a score rubric. When
the models had a system prompt, it is shown inside the instruction section under its own
label, as rubrics/prometheus.py does; the rest of the wording is ours. The format has no
tie: one call per criterion, in either mode, answers ``A`` or ``B``.

Untrusted texts are neutralized (:func:`neutralize`): everything rubrics/prometheus.py
neutralizes, plus this layout's own headings (``###Instruction:``, ``###Response A:``,
``###Response B:``) and every marker of this mode's verdict grammar, rewritten from the
reader's own patterns, so no text can open a section or, when the judge quotes it, carry
a verdict the reader accepts.

Reading a verdict (:func:`read_relative`) follows the end-of-answer grammar of
``rubrics.verdict``, as rubrics/prometheus.py reads a score: ``[RESULT] A`` and the
variants prometheus-eval accepts (``[Result] Response B``, ``[RESULT: B]``, ``[Response
B]``, ``Result: B``), only at the very end of the answer, and only when no other verdict
of the same rank names the other letter. ``[RESULT] A or B`` and ``[RESULT] Both`` end in
no single letter and are refused; ``[RESULT] tie`` is refused as a tie this format does not
have. A template echo (``[RESULT] (Either "A" or "B")``) carries no letter and is ignored;
a feedback that is the template's placeholder is refused.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence

from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND
from flask_eval.rubrics import prometheus
from flask_eval.rubrics.grading import RUBRIC_ANY, Criterion, Subject
from flask_eval.rubrics.parse import Reading
from flask_eval.rubrics.prompt import Message
from flask_eval.rubrics.protocol import (
    PROMETHEUS_REL_INSTRUCTION,
    PROMETHEUS_REL_REFERENCE,
    PROMETHEUS_REL_RUBRIC,
    PROMETHEUS_REL_SYSTEM,
    PROMETHEUS_RESPONSE_A,
    PROMETHEUS_RESPONSE_B,
    RESULT_MARKER,
)
from flask_eval.rubrics.verdict import VerdictGrammar, body

#: a relative feedback compares both responses: a paragraph or two, then the verdict
COMPLETION_TOKENS = 250

_WITH_REFERENCE = (
    "An instruction (might include an Input inside it), two responses to evaluate (denoted "
    "as Response A and Response B), a reference answer, and an evaluation criteria are given."
)
_WITHOUT_REFERENCE = (
    "An instruction (might include an Input inside it), two responses to evaluate (denoted "
    "as Response A and Response B), and an evaluation criteria are given."
)
_STEPS = (
    "1. Write a detailed feedback that assess the quality of the two responses strictly "
    "based on the given evaluation criteria, not evaluating in general.\n"
    "2. Make comparisons between Response A, Response B, and the Reference Answer. Instead "
    "of examining Response A and Response B separately, go straight to the point and "
    "mention about the commonalities and differences between them.\n"
    '3. After writing the feedback, indicate the better response, either "A" or "B".\n'
    f'4. The output format should look as follows: "Feedback: {prometheus.FEEDBACK_PLACEHOLDER} '
    f'{RESULT_MARKER} (Either "A" or "B")"\n'
    "5. Please do not generate any other opening, closing, and explanations."
)

# --- the verdict grammar and neutralizing untrusted text ---------------------------------


@functools.cache
def grammar() -> VerdictGrammar:
    """The relative verdict (``rubrics.verdict``): the letter A or B."""
    return VerdictGrammar(
        primary=prometheus.PRIMARY,
        secondary=r"\[\s*+response\b|\bresult\b",
        lead=r"response\b",
        value=r"[ab](?![a-z0-9])",
        suffix="",
        same=str.upper,
        shown=f'"{RESULT_MARKER} A" or "{RESULT_MARKER} B"',
        what="letter",
    )


_HEADING_RE = re.compile(
    r"(?<!#)#{2,}+(?=[ \t]*+(?:instruction|response(?:\s++[ab])?\s*+:))", re.IGNORECASE
)


def neutralize(text: str) -> str:
    """``text`` unable to open a section of this layout or to carry a verdict of either
    mode: :func:`rubrics.prometheus.neutralize`, plus ``###Instruction:``/``###Response
    A:`` headings (to ``♯♯♯``) and this mode's markers (``Result: A`` becomes ``Result：
    A``, ``[Response B]`` becomes ``［Response B]``)."""
    text = prometheus.headings(prometheus.neutralize(text), _HEADING_RE)
    return grammar().neutralize(text)


# --- rendering -------------------------------------------------------------------------


def render(subject: Subject, criterion: Criterion) -> list[Message]:
    """The two messages of Prometheus's relative grading of ``subject`` on ``criterion``."""
    if subject.response_b is None:
        raise ValueError("relative grading compares two responses (response_b is missing)")
    text = prometheus.PrometheusText(
        system=PROMETHEUS_REL_SYSTEM,
        description=_WITH_REFERENCE if subject.reference.strip() else _WITHOUT_REFERENCE,
        steps=_STEPS,
        instruction_heading=PROMETHEUS_REL_INSTRUCTION,
        reference_heading=PROMETHEUS_REL_REFERENCE,
        rubric_heading=PROMETHEUS_REL_RUBRIC,
    )
    return prometheus.layout(
        text,
        subject,
        responses=[
            (PROMETHEUS_RESPONSE_A, subject.response),
            (PROMETHEUS_RESPONSE_B, subject.response_b),
        ],
        rubric=f"[{neutralize(criterion.criterion).strip()}]",
        clean=neutralize,
    )


# --- reading ---------------------------------------------------------------------------

_TIE = r"(?:a\s++)?tie\b"


def _letter(text: str) -> tuple[str, int]:
    """The letter (``A``/``B``) or the problem, and where the verdict starts (-1: none)."""
    rules = grammar()
    found = rules.read(text)
    if found.value is not None:
        return found.value.upper(), found.start
    answer = body(text)
    if answer and rules.custom_tail("tie", True, _TIE).search(answer):
        return 'a tie, which this format does not have (answer "A" or "B")', -1
    return found.problem, -1


def read_relative(text: str) -> str:
    """``"A"`` or ``"B"``, the better response of a relative-grading answer, or a short
    description of why there is none (longer than one character; rules in the module
    docstring)."""
    return _letter(text)[0]


def feedback(text: str) -> str:
    """The judge's feedback: the answer before its verdict, without ``Feedback:``."""
    return prometheus.before_verdict(text, _letter(text)[1])


_VERDICT_OF = {"A": VERDICT_FIRST, "B": VERDICT_SECOND}


class PrometheusRelativeProtocol(prometheus.OneCriterionProtocol):
    """Prometheus 2's relative grading: one call per criterion in either mode, each
    answered with a feedback and a final ``[RESULT] A`` or ``[RESULT] B``."""

    name = "prometheus"
    shares = (
        "the system prompt, the task description with its steps and the instruction's "
        "heading; its trained order puts the criterion after both responses, so the "
        "criterion is not shared"
    )
    #: a verdict is A or B, and only the criterion's description is shown
    rubric_rule = RUBRIC_ANY

    def render(self, subject: Subject, criteria: Sequence[Criterion]) -> list[Message]:
        return render(subject, self.one(criteria))

    def read(self, text: str, criteria: Sequence[Criterion]) -> Reading:
        letter, start = _letter(text)
        value = _VERDICT_OF.get(letter, letter)
        return self.reading(self.one(criteria).name, value, prometheus.before_verdict(text, start))

    def reminder(
        self,
        previous: str,
        missing: Sequence[Criterion],
        problems: Mapping[str, str],
        read: Sequence[str] = (),
    ) -> list[Message]:
        ask = (
            "Reply with your feedback comparing the two responses on the same criterion "
            "(you may repeat the one above), then end with one final line of the form "
            f'"{RESULT_MARKER} A" or "{RESULT_MARKER} B", naming the better response, and '
            "write nothing after that line."
        )
        return self.ask_again(previous, self.one(missing).name, problems, ask)

    def completion_tokens(self, criteria: Sequence[Criterion]) -> int:
        return COMPLETION_TOKENS * len(criteria)
