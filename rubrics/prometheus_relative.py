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
``###Response B:``) and a ``Result: A`` colon, so no text can open a section or, when the
judge quotes it, carry a verdict the parser accepts.

Reading a verdict (:func:`read_relative`), as rubrics/prometheus.py reads a score:

1. The verdict is the very end of the answer (after trailing blank lines and code fences):
   ``[RESULT]`` (any case, optionally bold or in backticks, optionally with a colon),
   optionally ``Response``, then the letter ``A`` or ``B`` (any case, optionally bold,
   quoted or in brackets), then at most a period or an exclamation mark. Text after it
   means the verdict is not the judge's last word: refused.
2. Every other ``[RESULT]`` followed by a letter must give the same letter, else the
   answer is ambiguous (``[RESULT] A`` ... ``[RESULT] B``) and refused; ``[RESULT] A or
   B`` or ``[RESULT] Both`` ends in no single letter and is refused; ``[RESULT] tie`` is
   refused as a tie this format does not have. A template echo (``[RESULT] (Either "A"
   or "B")``) carries no letter and is ignored.
3. Only when the answer has no ``[RESULT]`` at all, ``Result: A`` (or ``[Result: A]``) is
   accepted at the very end under rule 1, if it is the answer's only such marker.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND
from flask_eval.rubrics import prometheus
from flask_eval.rubrics.grading import Criterion, Subject
from flask_eval.rubrics.parse import RATIONALE_LIMIT, Reading
from flask_eval.rubrics.prometheus import INSTRUCTION_LABEL, SYSTEM_PROMPT_LABEL
from flask_eval.rubrics.prompt import REMINDER_MAX_CHARS, Message, truncate
from flask_eval.rubrics.protocol import (
    FEEDBACK_MARKER,
    PROMETHEUS_REL_INSTRUCTION,
    PROMETHEUS_REL_REFERENCE,
    PROMETHEUS_REL_RUBRIC,
    PROMETHEUS_REL_SYSTEM,
    PROMETHEUS_RESPONSE_A,
    PROMETHEUS_RESPONSE_B,
    PROMETHEUS_TASK,
    RESULT_MARKER,
)

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
    '4. The output format should look as follows: "Feedback: (write a feedback for '
    'criteria) [RESULT] (Either "A" or "B")"\n'
    "5. Please do not generate any other opening, closing, and explanations."
)

# --- neutralizing untrusted text -------------------------------------------------------

_HEADING_RE = re.compile(
    r"(?<!#)#{2,}+(?=[ \t]*+(?:instruction|response(?:\s++[ab])?\s*+:))", re.IGNORECASE
)
_RESULT_COLON_RE = re.compile(
    r"(\bresult\s*+):(?=\s*+[\[(*_`\"']*+\s*+(?:response\s++)?[ab](?![a-z0-9]))", re.IGNORECASE
)


def neutralize(text: str) -> str:
    """``text`` unable to open a section of this layout or to carry a verdict:
    :func:`rubrics.prometheus.neutralize`, plus ``###Instruction:``/``###Response A:``
    headings (to ``♯♯♯``) and the colon of ``Result: A`` (to ``：``)."""
    text = prometheus.neutralize(text)
    text = _HEADING_RE.sub(lambda m: "\u266f" * len(m.group(0)), text)
    return _RESULT_COLON_RE.sub("\\1\uff1a", text)


# --- rendering -------------------------------------------------------------------------


def render(subject: Subject, criterion: Criterion) -> list[Message]:
    """The two messages of Prometheus's relative grading of ``subject`` on ``criterion``."""
    if subject.response_b is None:
        raise ValueError("relative grading compares two responses (response_b is missing)")
    instruction = neutralize(subject.instruction).strip() or "(The instruction is empty.)"
    if subject.system_prompt.strip():
        instruction = (
            f"{SYSTEM_PROMPT_LABEL}\n{neutralize(subject.system_prompt).strip()}\n\n"
            f"{INSTRUCTION_LABEL}\n{instruction}"
        )
    reference = neutralize(subject.reference).strip()
    parts = [
        PROMETHEUS_TASK,
        _WITH_REFERENCE if reference else _WITHOUT_REFERENCE,
        _STEPS,
        "",
        PROMETHEUS_REL_INSTRUCTION,
        instruction,
        "",
        PROMETHEUS_RESPONSE_A,
        neutralize(subject.response).strip() or "(The response is empty.)",
        "",
        PROMETHEUS_RESPONSE_B,
        neutralize(subject.response_b).strip() or "(The response is empty.)",
        "",
    ]
    if reference:
        parts += [PROMETHEUS_REL_REFERENCE, reference, ""]
    parts += [
        PROMETHEUS_REL_RUBRIC,
        f"[{neutralize(criterion.criterion).strip()}]",
        "",
        FEEDBACK_MARKER + " ",
    ]
    return [
        {"role": "system", "content": PROMETHEUS_REL_SYSTEM},
        {"role": "user", "content": "\n".join(parts)},
    ]


# --- reading ---------------------------------------------------------------------------

_DECOR = r"[*_`\"']*+"
_LETTER = r"(?P<letter>[ab])(?![a-z0-9])"
_RESULT = r"\[\s*+result\s*+\]"
_FALLBACK = r"(?:\[\s*+result\s*+:|\bresult\s*+:)"
_LEAD = rf"{_DECOR}\s*+:?\s*+{_DECOR}\s*+[(\[]?\s*+{_DECOR}\s*+(?:response\s++)?{_DECOR}\s*+"
_END = rf"\s*+{_DECOR}\s*+[)\]]?\s*+{_DECOR}\s*+[.!]?\s*+{_DECOR}\s*+\Z"


def _tail(marker: str, what: str = _LETTER) -> re.Pattern[str]:
    """``marker``, ``what`` and nothing else up to the end of the text."""
    return re.compile(rf"(?P<mark>{marker}){_LEAD}{what}{_END}", re.IGNORECASE)


_RESULT_TAIL = _tail(_RESULT)
_FALLBACK_TAIL = _tail(_FALLBACK)
_TIE_TAIL = _tail(_RESULT, r"(?:a\s++)?tie\b")
_RESULT_ANY = re.compile(_RESULT, re.IGNORECASE)
_RESULT_LETTERED = re.compile(rf"{_RESULT}{_LEAD}{_LETTER}", re.IGNORECASE)
_FALLBACK_ANY = re.compile(_FALLBACK, re.IGNORECASE)
_FEEDBACK_PREFIX = re.compile(r"\A\s*+(?:#{0,3}\s*+\**+feedback\**+\s*+:\s*+\**+)", re.IGNORECASE)
_NO_VERDICT = f'no final "{RESULT_MARKER} A" or "{RESULT_MARKER} B" verdict'


def _verdict(text: str) -> tuple[str, int]:
    """The letter (``A``/``B``) or the problem, and where the verdict starts (-1: none)."""
    body = prometheus._body(text)
    if not body:
        return "empty output", -1
    if _RESULT_ANY.search(body):
        match = _RESULT_TAIL.search(body)
        if match is None:
            if _TIE_TAIL.search(body):
                return 'a tie, which this format does not have (answer "A" or "B")', -1
            return _NO_VERDICT + f" (text follows the last {RESULT_MARKER})", -1
        letter = match.group("letter").upper()
        others = {
            m.group("letter").upper() for m in _RESULT_LETTERED.finditer(body, 0, match.start())
        } - {letter}
        if others:
            return f"two different results: {', '.join([*sorted(others), letter])}", -1
        return letter, match.start()
    match = _FALLBACK_TAIL.search(body)
    if match is None:
        return _NO_VERDICT, -1
    if len(_FALLBACK_ANY.findall(body)) != 1:
        return _NO_VERDICT + " (several result markers, none of them [RESULT])", -1
    return match.group("letter").upper(), match.start()


def read_relative(text: str) -> str:
    """``"A"`` or ``"B"``, the better response of a relative-grading answer, or a short
    description of why there is none (longer than one character; rules in the module
    docstring)."""
    return _verdict(text)[0]


def feedback(text: str) -> str:
    """The judge's feedback: the answer before its verdict, without ``Feedback:``."""
    start = _verdict(text)[1]
    body = prometheus._body(text)
    before = body if start < 0 else body[:start].rstrip().rstrip("*_`")
    return _FEEDBACK_PREFIX.sub("", before).strip()[:RATIONALE_LIMIT]


_VERDICT_OF = {"A": VERDICT_FIRST, "B": VERDICT_SECOND}


class PrometheusRelativeProtocol(prometheus.OneCriterionProtocol):
    """Prometheus 2's relative grading: one call per criterion in either mode, each
    answered with a feedback and a final ``[RESULT] A`` or ``[RESULT] B``."""

    name = "prometheus"

    def render(self, subject: Subject, criteria: Sequence[Criterion]) -> list[Message]:
        return render(subject, self.one(criteria))

    def read(self, text: str, criteria: Sequence[Criterion]) -> Reading:
        name = self.one(criteria).name
        letter = read_relative(text)
        if letter not in _VERDICT_OF:
            return Reading({}, {name: letter}, {})
        return Reading({name: _VERDICT_OF[letter]}, {}, {name: feedback(text)})

    def reminder(
        self,
        previous: str,
        missing: Sequence[Criterion],
        problems: Mapping[str, str],
        read: Sequence[str] = (),
    ) -> list[Message]:
        name = self.one(missing).name
        why = f" ({problems[name]})" if problems.get(name) else ""
        ask = (
            f"Your feedback above could not be read{why}. Reply with your feedback comparing "
            "the two responses on the same criterion (you may repeat the one above), then end "
            f'with one final line of the form "{RESULT_MARKER} A" or "{RESULT_MARKER} B", '
            "naming the better response, and write nothing after that line."
        )
        return [
            {"role": "assistant", "content": truncate(previous, REMINDER_MAX_CHARS)},
            {"role": "user", "content": ask},
        ]

    def completion_tokens(self, criteria: Sequence[Criterion]) -> int:
        return COMPLETION_TOKENS * len(criteria)
