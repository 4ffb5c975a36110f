"""Prometheus 2's absolute grading: one criterion per call, ``... [RESULT] N`` (pure).

The layout is the one the Prometheus evaluator LMs were trained on, reproduced from
prometheus-eval (https://github.com/prometheus-eval/prometheus-eval,
``libs/prometheus-eval/prometheus_eval/prompts.py``: ``ABS_SYSTEM_PROMPT``,
``ABSOLUTE_PROMPT``, ``ABSOLUTE_PROMPT_WO_REF`` and ``SCORE_RUBRIC_TEMPLATE``; Apache
License 2.0, Copyright the prometheus-eval authors): the system prompt, then the sections
``###Task Description:``, ``###The instruction to evaluate:``, ``###Response to
evaluate:``, ``###Reference Answer (Score 5):`` (left out, with its mention in the task
description, when there is no reference), ``###Score Rubrics:`` (``[criterion]`` and one
``Score N:`` line per level), and last ``###Feedback:``, which the judge continues. When
the model under test had a system prompt, it is shown inside the instruction section under
its own label; the rest of the wording is ours.

Untrusted texts (instruction, system prompt, reference, response) are neutralized before
they are shown (:func:`neutralize`): a ``###`` section heading of this layout, the
verdict markers ``[RESULT]``/``[SCORE]`` and a ``Score: N`` colon are replaced by visibly
different characters, so such a text can neither open a section nor, when the judge
echoes it, carry a verdict the parser accepts.

Reading a verdict (:func:`read_result`): only the judge's own ending counts.

1. The verdict is the very end of the answer (after dropping trailing blank lines and
   code fences): ``[RESULT]`` (any case, optionally bold or in backticks, optionally with
   a colon), then the number (optionally in brackets or parentheses, optionally bold,
   optionally ``/5`` or ``out of 5``), then at most a period or an exclamation mark.
   Nothing else may follow: text after it means the verdict is not the judge's last word
   (or the judge quoted a response after it), so the answer is refused, as
   prometheus-eval's own parser refuses it.
2. Every other ``[RESULT]`` followed by a number must give the same number, else the
   answer is ambiguous (two different results) and refused. A template echo such as
   ``[RESULT] (an integer number between 1 and 5)`` carries no number and is ignored.
3. Only when the answer has no ``[RESULT]`` at all, ``[SCORE] N`` or ``Score: N`` (also
   ``Final score:``/``Overall score:``) is accepted at the very end under rule 1, and only
   if it is the answer's only such marker.
4. The number must be an integer 1-5 (``4.0`` counts as 4; ``3.5``, ``0`` and ``6`` are
   refused).

A verdict that appears only inside a quoted copy of the response therefore never counts:
the judge saw the response neutralized, so a faithful copy carries no ASCII marker; a
copy the judge "repaired" is either followed by the judge's own verdict (rule 2 refuses a
different one) or ends the answer only when the answer was cut off, which the executor
detects from the finish reason. The feedback (the text before the verdict, without a
leading ``Feedback:``) is the rationale.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from flask_eval.rubrics.grading import PROTOCOLS, Criterion, Protocol, Subject
from flask_eval.rubrics.parse import RATIONALE_LIMIT, Reading
from flask_eval.rubrics.prompt import REMINDER_MAX_CHARS, Message, truncate
from flask_eval.rubrics.protocol import (
    FEEDBACK_MARKER,
    PROMETHEUS_INSTRUCTION,
    PROMETHEUS_REFERENCE,
    PROMETHEUS_RESPONSE,
    PROMETHEUS_RUBRIC,
    PROMETHEUS_SYSTEM,
    PROMETHEUS_TASK,
    RESULT_MARKER,
)

#: a Prometheus feedback is a paragraph or two plus the verdict
COMPLETION_TOKENS = 200
MIN_SCORE = 1
MAX_SCORE = 5

SYSTEM_PROMPT_LABEL = "[System prompt given to the assistant]"
INSTRUCTION_LABEL = "[User instruction]"

_WITH_REFERENCE = (
    "An instruction (might include an Input inside it), a response to evaluate, a "
    "reference answer that gets a score of 5, and a score rubric representing a evaluation "
    "criteria are given."
)
_WITHOUT_REFERENCE = (
    "An instruction (might include an Input inside it), a response to evaluate, and a score "
    "rubric representing a evaluation criteria are given."
)
_STEPS = (
    "1. Write a detailed feedback that assess the quality of the response strictly based on "
    "the given score rubric, not evaluating in general.\n"
    "2. After writing a feedback, write a score that is an integer between 1 and 5. You "
    "should refer to the score rubric.\n"
    '3. The output format should look as follows: "(write a feedback for criteria) '
    '[RESULT] (an integer number between 1 and 5)"\n'
    "4. Please do not generate any other opening, closing, and explanations."
)

# --- neutralizing untrusted text -------------------------------------------------------

_HEADING_WORDS = (
    r"task\s+description|the\s+instruction\s+to\s+evaluate|response\s+to\s+evaluate|"
    r"reference\s+answer|score\s+rubrics?|feedback"
)
_HEADING_RE = re.compile(rf"(?<!#)#{{2,}}+(?=[ \t]*+(?:{_HEADING_WORDS}))", re.IGNORECASE)
_MARKER_RE = re.compile(r"\[(\s*(?:result|score)\s*)\]", re.IGNORECASE)
_SCORE_COLON_RE = re.compile(r"(\bscore\s*+):(?=\s*+[\[(*]*+\s*+[+-]?\d)", re.IGNORECASE)
_SYSTEM_LABEL_RE = re.compile(r"\[(\s*(?:system prompt given|user instruction))", re.IGNORECASE)


def neutralize(text: str) -> str:
    """``text`` unable to open a section of this layout or to carry a verdict.

    ``###Feedback:`` (any of the layout's headings, any case, two or more ``#``) becomes
    ``♯♯♯Feedback:``; ``[RESULT]``/``[SCORE]`` become ``［RESULT］``/``［SCORE］``; the
    colon of ``Score: 4`` becomes ``：``; our own labels lose their ASCII bracket. Markdown
    headings on other words are left alone.
    """
    text = _HEADING_RE.sub(lambda m: "\u266f" * len(m.group(0)), text)
    text = _MARKER_RE.sub("\uff3b\\1\uff3d", text)
    text = _SCORE_COLON_RE.sub("\\1\uff1a", text)
    return _SYSTEM_LABEL_RE.sub("\uff3b\\1", text)


# --- rendering -------------------------------------------------------------------------


def rubric_text(criterion: Criterion) -> str:
    """``SCORE_RUBRIC_TEMPLATE``'s shape: ``[criterion]`` then ``Score 1:`` .. ``Score 5:``."""
    lines = [f"[{neutralize(criterion.criterion).strip()}]"]
    lines += [f"Score {n}: {neutralize(criterion.rubric[n]).strip()}" for n in range(1, 6)]
    return "\n".join(lines)


def render(subject: Subject, criterion: Criterion) -> list[Message]:
    """The two messages of Prometheus's absolute grading of ``subject`` on ``criterion``."""
    if subject.response_b is not None:
        raise ValueError("the prometheus protocol grades one response (absolute grading)")
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
        PROMETHEUS_INSTRUCTION,
        instruction,
        "",
        PROMETHEUS_RESPONSE,
        neutralize(subject.response).strip() or "(The response is empty.)",
        "",
    ]
    if reference:
        parts += [PROMETHEUS_REFERENCE, reference, ""]
    parts += [PROMETHEUS_RUBRIC, rubric_text(criterion), "", FEEDBACK_MARKER + " "]
    return [
        {"role": "system", "content": PROMETHEUS_SYSTEM},
        {"role": "user", "content": "\n".join(parts)},
    ]


# --- reading ---------------------------------------------------------------------------
# Every repeated run is possessive (``*+``): adjacent optional runs of spaces or marks
# cannot backtrack into each other, so a long run in a judge's answer stays linear.

_DECOR = r"[*_`]*+"
_NUMBER = r"(?P<num>[+-]?\d+(?:[.,]\d+)?)"
_RESULT = r"\[\s*+result\s*+\]"
_FALLBACK = r"(?:\[\s*+score\s*+\]|\b(?:(?:final|overall)\s+)?score\s*+:)"


def _tail(marker: str) -> re.Pattern[str]:
    """``marker``, a number and nothing else up to the end of the text."""
    return re.compile(
        rf"(?P<mark>{marker}){_DECOR}\s*+:?\s*+{_DECOR}\s*+[(\[]?\s*+{_DECOR}\s*+{_NUMBER}"
        rf"\s*+{_DECOR}\s*+[)\]]?\s*+(?:/\s*+5|out\s+of\s+5)?\s*+{_DECOR}\s*+[.!]?\s*+{_DECOR}\s*+\Z",
        re.IGNORECASE,
    )


_RESULT_TAIL = _tail(_RESULT)
_FALLBACK_TAIL = _tail(_FALLBACK)
_RESULT_ANY = re.compile(_RESULT, re.IGNORECASE)
_RESULT_NUMBERED = re.compile(
    rf"{_RESULT}{_DECOR}\s*+:?\s*+{_DECOR}\s*+[(\[]?\s*+{_DECOR}\s*+{_NUMBER}", re.IGNORECASE
)
_FALLBACK_ANY = re.compile(_FALLBACK, re.IGNORECASE)
_FENCE_RE = re.compile(r"^\s*+(?:```+|~~~+)\s*+$")
_FEEDBACK_PREFIX = re.compile(r"\A\s*+(?:#{0,3}\s*+\**+feedback\**+\s*+:\s*+\**+)", re.IGNORECASE)
_NO_VERDICT = f'no final "{RESULT_MARKER} N" verdict'


def _body(text: str) -> str:
    """``text`` without trailing blank lines and code fences."""
    lines = text.rstrip().splitlines()
    while lines and (not lines[-1].strip() or _FENCE_RE.match(lines[-1])):
        lines.pop()
    return "\n".join(lines).rstrip()


def _value(raw: str) -> float:
    return float(raw.replace(",", "."))


def _number(raw: str) -> int | str:
    """The score a verdict's number gives, or the problem with it."""
    text = raw.replace(",", ".").lstrip("+")
    if "." in text:
        whole, _, fraction = text.partition(".")
        if fraction.strip("0"):
            return f"score not an integer: {raw}"
        text = whole
    value = int(text)
    if not MIN_SCORE <= value <= MAX_SCORE:
        return f"score out of range: {raw}"
    return value


def _verdict(text: str) -> tuple[int | str, int]:
    """The score (or problem) and where the verdict starts (-1: no verdict found)."""
    body = _body(text)
    if not body:
        return "empty output", -1
    if _RESULT_ANY.search(body):
        match = _RESULT_TAIL.search(body)
        if match is None:
            return _NO_VERDICT + f" (text follows the last {RESULT_MARKER})", -1
        score = _number(match.group("num"))
        final = _value(match.group("num"))
        others = {
            m.group("num")
            for m in _RESULT_NUMBERED.finditer(body, 0, match.start())
            if _value(m.group("num")) != final
        }
        if others:
            shown = ", ".join([*sorted(others), match.group("num")])
            return f"two different results: {shown}", -1
        return score, match.start()
    match = _FALLBACK_TAIL.search(body)
    if match is None:
        return _NO_VERDICT, -1
    if len(_FALLBACK_ANY.findall(body)) != 1:
        return _NO_VERDICT + " (several score markers, none of them [RESULT])", -1
    return _number(match.group("num")), match.start()


def read_result(text: str) -> int | str:
    """The 1-5 score of a Prometheus answer, or a short description of why there is none
    (see the module docstring for the rules)."""
    return _verdict(text)[0]


def feedback(text: str) -> str:
    """The judge's feedback: the answer before its verdict, without ``Feedback:``."""
    start = _verdict(text)[1]
    before = _body(text) if start < 0 else _body(text)[:start].rstrip().rstrip("*_`")
    return _FEEDBACK_PREFIX.sub("", before).strip()[:RATIONALE_LIMIT]


class OneCriterionProtocol(Protocol):
    """A layout that grades one criterion per call in either mode, as Prometheus 2 was
    trained (absolute and relative grading): a subclass renders and reads one."""

    def calls(self, criteria: Sequence[str]) -> list[list[str]]:
        return [[c] for c in criteria]

    def completion_tokens(self, criteria: Sequence[Criterion]) -> int:
        return COMPLETION_TOKENS * len(criteria)

    def one(self, criteria: Sequence[Criterion]) -> Criterion:
        if len(criteria) != 1:
            raise ValueError(
                f"the {self.name} protocol grades one criterion per call, got {len(criteria)}"
            )
        return criteria[0]


class PrometheusProtocol(OneCriterionProtocol):
    """Prometheus 2's absolute grading: one call per criterion in either mode, each
    answered with a feedback and a final ``[RESULT] N``."""

    name = "prometheus"

    def render(self, subject: Subject, criteria: Sequence[Criterion]) -> list[Message]:
        return render(subject, self.one(criteria))

    def read(self, text: str, criteria: Sequence[Criterion]) -> Reading:
        name = self.one(criteria).name
        score = read_result(text)
        if isinstance(score, str):
            return Reading({}, {name: score}, {})
        return Reading({name: score}, {}, {name: feedback(text)})

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
            f"Your feedback above could not be read{why}. Reply with your feedback for the "
            "same score rubric (you may repeat the one above), then end with one final line "
            f'of the form "{RESULT_MARKER} N", where N is an integer between 1 and 5, and '
            "write nothing after that line."
        )
        return [
            {"role": "assistant", "content": truncate(previous, REMINDER_MAX_CHARS)},
            {"role": "user", "content": ask},
        ]


PROTOCOLS[PrometheusProtocol.name] = PrometheusProtocol
