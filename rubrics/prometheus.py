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
they are shown (:func:`neutralize`): a ``###`` section heading of this layout loses its
ASCII ``#``, and every marker the verdict reader accepts is rewritten from the reader's
own patterns (``rubrics.verdict``), so such a text can neither open a section nor, when
the judge quotes it, even as the very end of its answer, carry a verdict.

Reading a verdict (:func:`read_result`) follows the end-of-answer grammar of
``rubrics.verdict``: ``[RESULT] N`` and every variant prometheus-eval's parser accepts
(``[Result] Score: 2``, ``[RESULT] score of 1``, ``(Score 5)``, ``[Score 4]``, ``... a
score of 4``, ``Score: 3``, ``Result: 4``, ``4/5``, ``5 out of 5``), only at the very end
of the answer, and only when no other verdict of the same rank gives a different value.
The number must be an integer on the protocol's scale, in ASCII digits (``4.0`` counts as
4; ``3.5``, ``3,0``, ``0`` and ``6`` are refused). A verdict that appears only inside a
quoted copy of the response never counts: the judge saw the response neutralized. The
feedback (the text before the verdict, without a leading ``Feedback:``) is the rationale;
a feedback that is the template's own placeholder (``(write a feedback for criteria)``)
is refused as a template echo.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from flask_eval.rubrics import conversation
from flask_eval.rubrics.conversation import exchanges
from flask_eval.rubrics.grading import PROTOCOLS, Criterion, Protocol, Subject
from flask_eval.rubrics.messages import message
from flask_eval.rubrics.parse import RATIONALE_LIMIT, Reading, template_echo
from flask_eval.rubrics.prompt import Message, reminder_frame
from flask_eval.rubrics.protocol import (
    FEEDBACK_MARKER,
    PROMETHEUS_INSTRUCTION,
    PROMETHEUS_RESPONSE,
    PROMETHEUS_RUBRIC,
    PROMETHEUS_SYSTEM,
    PROMETHEUS_TASK,
    RESULT_MARKER,
)
from flask_eval.rubrics.scale import FIVE_POINT, Scale
from flask_eval.rubrics.verdict import SPACE, VerdictGrammar, body

#: a Prometheus feedback is a paragraph or two plus the verdict
COMPLETION_TOKENS = 200

SYSTEM_PROMPT_LABEL = "[System prompt given to the assistant]"
INSTRUCTION_LABEL = "[User instruction]"
#: the placeholder of the answer format in the task description: a feedback that is only
#: this (or contains it) echoes the template instead of judging
FEEDBACK_PLACEHOLDER = "(write a feedback for criteria)"


def _with_reference(scale: Scale) -> str:
    return (
        "An instruction (might include an Input inside it), a response to evaluate, a "
        f"reference answer that gets a score of {scale.high}, and a score rubric representing "
        "a evaluation criteria are given."
    )


_WITHOUT_REFERENCE = (
    "An instruction (might include an Input inside it), a response to evaluate, and a score "
    "rubric representing a evaluation criteria are given."
)


def _steps(scale: Scale) -> str:
    between = f"an integer between {scale.low} and {scale.high}"
    return (
        "1. Write a detailed feedback that assess the quality of the response strictly based "
        "on the given score rubric, not evaluating in general.\n"
        f"2. After writing a feedback, write a score that is {between}. You should refer to "
        "the score rubric.\n"
        f'3. The output format should look as follows: "{FEEDBACK_PLACEHOLDER} '
        f'{RESULT_MARKER} ({between.replace("an integer", "an integer number")})"\n'
        "4. Please do not generate any other opening, closing, and explanations."
    )


def reference_heading(scale: Scale) -> str:
    """``###Reference Answer (Score 5):`` on ``scale``."""
    return f"###Reference Answer (Score {scale.high}):"


# --- the verdict grammar and neutralizing untrusted text ---------------------------------

#: ``[RESULT]`` and ``[RESULT:`` open the verdict in both modes
PRIMARY = r"\[\s*+result\s*+(?:\]|(?=:))"


@functools.cache
def grammar(scale: Scale = FIVE_POINT) -> VerdictGrammar:
    """The absolute verdict on ``scale`` (``rubrics.verdict``; ``/5`` names its top)."""
    return VerdictGrammar(
        primary=PRIMARY,
        secondary=(
            r"\[\s*+score\s*+\]|[\[(]\s*+score\b"
            r"|\b(?:(?:final|overall)\s++)?score(?:\s++of\b)?|\bresult\b"
        ),
        lead=r"score\s++of\b|score\b|result\b",
        value=r"[+-]?[0-9]++(?:\.[0-9]++)?",
        suffix=rf"/{SPACE}{scale.high}\b|out\s++of\s++{scale.high}\b",
        same=float,
        shown=f'"{RESULT_MARKER} N"',
        what="score",
    )


_HEADING_WORDS = (
    r"task\s+description|the\s+instruction\s+to\s+evaluate|response\s+to\s+evaluate|"
    r"reference\s+answer|score\s+rubrics?|feedback"
)
_HEADING_RE = re.compile(rf"(?<!#)#{{2,}}+(?=[ \t]*+(?:{_HEADING_WORDS}))", re.IGNORECASE)
_SYSTEM_LABEL_RE = re.compile(r"\[(\s*(?:system prompt given|user instruction))", re.IGNORECASE)


def headings(text: str, pattern: re.Pattern[str] = _HEADING_RE) -> str:
    """``text`` unable to open a section: ``###Feedback:`` (two or more ``#``, any of the
    layout's headings, any case) becomes ``♯♯♯Feedback:``, and our labels lose their ASCII
    bracket. Markdown headings on other words are left alone."""
    text = pattern.sub(lambda m: "\u266f" * len(m.group(0)), text)
    return _SYSTEM_LABEL_RE.sub("\uff3b\\1", text)


def neutralize(text: str) -> str:
    """``text`` unable to open a section of this layout (:func:`headings`) or to carry a
    verdict the reader accepts (:meth:`VerdictGrammar.neutralize`: ``[RESULT]`` becomes
    ``［RESULT］``, ``Score: 4`` becomes ``Score： 4``, ``a score of 4`` becomes ``a ｓcore
    of 4``). The verdict patterns do not depend on the scale's top, except for a suffix
    that needs a value before it, so one neutralizer serves every scale."""
    return grammar().neutralize(headings(text))


# --- rendering -------------------------------------------------------------------------


def rubric_text(criterion: Criterion, scale: Scale = FIVE_POINT) -> str:
    """``SCORE_RUBRIC_TEMPLATE``'s shape: ``[criterion]`` then ``Score 1:`` .. ``Score 5:``
    (one line per level of ``scale`` the criterion describes)."""
    lines = [f"[{neutralize(criterion.criterion).strip()}]"]
    lines += [
        f"Score {n}: {neutralize(criterion.rubric[n]).strip()}"
        for n in scale.levels
        if n in criterion.rubric
    ]
    return "\n".join(lines)


@dataclass(frozen=True)
class PrometheusText:
    """The fixed wording of a Prometheus layout, absolute or relative (:func:`layout`):
    the system prompt, the task description and its steps, and the section headings."""

    system: str
    description: str
    steps: str
    instruction_heading: str
    reference_heading: str
    rubric_heading: str


def layout(
    text: PrometheusText,
    subject: Subject,
    *,
    responses: Sequence[tuple[str, str]],
    rubric: str,
    clean: Callable[[str], str],
) -> list[Message]:
    """The two messages of a Prometheus layout, absolute or relative: the task description
    and its steps, the instruction (with the models' system prompt, labelled, when there
    is one), each ``(heading, response)``, the reference (left out when empty), the rubric
    and last ``###Feedback:``, every untrusted text passed through ``clean``. The shared
    prefix is what this trained order puts before the instance: the system prompt, the
    task description and its steps, and the instruction's heading (the rubric comes after
    the response, so it is not shared). A conversation's earlier turns
    (``rubrics.conversation.labelled``: the judge's focus on the last turn, then each
    turn's texts under ``[Turn n: User]``-like labels) open the instruction section,
    whose judged instruction is then labelled ``[User instruction, turn k]``."""
    pair = subject.response_b is not None
    history = exchanges(subject.history, subject.answers, *([subject.answers_b] if pair else []))
    if history:
        clean = conversation.cleaner(clean)
    instruction = clean(subject.instruction).strip() or "(The instruction is empty.)"
    label = INSTRUCTION_LABEL
    if history:  # the earlier turns, then the judged turn's instruction under its label
        label = f"{INSTRUCTION_LABEL[:-1]}, turn {subject.turn}]"
        instruction = f"{label}\n{instruction}"
        turns = conversation.labelled(history, subject.turn, clean, ("A", "B") if pair else ("",))
        instruction = "\n".join(turns) + "\n\n" + instruction
    if subject.system_prompt.strip():
        instruction = f"{SYSTEM_PROMPT_LABEL}\n{clean(subject.system_prompt).strip()}\n\n" + (
            instruction if history else f"{label}\n{instruction}"
        )
    reference = clean(subject.reference).strip()
    # the trained order's static opening, up to the instruction's heading, is shared
    shared = (
        "\n".join([PROMETHEUS_TASK, text.description, text.steps, "", text.instruction_heading])
        + "\n"
    )
    parts = [instruction, ""]
    for heading, response in responses:
        parts += [heading, clean(response).strip() or "(The response is empty.)", ""]
    if reference:
        parts += [text.reference_heading, reference, ""]
    parts += [text.rubric_heading, rubric, "", FEEDBACK_MARKER + " "]
    return [message("system", text.system), message("user", shared, "\n".join(parts))]


def render(subject: Subject, criterion: Criterion, scale: Scale = FIVE_POINT) -> list[Message]:
    """The two messages of Prometheus's absolute grading of ``subject`` on ``criterion``."""
    if subject.response_b is not None:
        raise ValueError("the prometheus protocol grades one response (absolute grading)")
    text = PrometheusText(
        system=PROMETHEUS_SYSTEM,
        description=_with_reference(scale) if subject.reference.strip() else _WITHOUT_REFERENCE,
        steps=_steps(scale),
        instruction_heading=PROMETHEUS_INSTRUCTION,
        reference_heading=reference_heading(scale),
        rubric_heading=PROMETHEUS_RUBRIC,
    )
    return layout(
        text,
        subject,
        responses=[(PROMETHEUS_RESPONSE, subject.response)],
        rubric=rubric_text(criterion, scale),
        clean=neutralize,
    )


# --- reading ---------------------------------------------------------------------------

_FEEDBACK_PREFIX = re.compile(r"\A\s*+(?:#{0,3}\s*+\**+feedback\**+\s*+:\s*+\**+)", re.IGNORECASE)


def _number(raw: str, scale: Scale) -> int | str:
    """The score a verdict's number gives, or the problem with it."""
    text = raw.lstrip("+")
    if "." in text:
        whole, _, fraction = text.partition(".")
        if fraction.strip("0"):
            return f"score not an integer: {raw}"
        text = whole
    value = int(text)
    if value not in scale:
        return f"score out of range: {raw}"
    return value


def read_result(text: str, scale: Scale = FIVE_POINT) -> int | str:
    """The score of a Prometheus answer, or a short description of why there is none
    (see the module docstring for the rules)."""
    found = grammar(scale).read(text)
    if found.value is None:
        return found.problem
    return _number(found.value, scale)


def before_verdict(text: str, start: int) -> str:
    """The feedback: the answer before its verdict (all of it when ``start`` < 0), without
    a leading ``Feedback:``."""
    answer = body(text)
    before = answer if start < 0 else answer[:start].rstrip().rstrip("*_`(['\"")
    return _FEEDBACK_PREFIX.sub("", before).strip()[:RATIONALE_LIMIT]


def feedback(text: str, scale: Scale = FIVE_POINT) -> str:
    """The judge's feedback: the answer before its verdict, without ``Feedback:``."""
    return before_verdict(text, grammar(scale).read(text).start)


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

    def reading(self, name: str, value: object, feedback: str) -> Reading:
        """One criterion's reading: ``value`` (a score or verdict), or the problem when it
        is a string; a feedback echoing the template is a problem too."""
        if isinstance(value, str):
            return Reading({}, {name: value}, {})
        echo = template_echo(feedback, (FEEDBACK_PLACEHOLDER,))
        if echo is not None:
            return Reading({}, {name: echo}, {})
        assert isinstance(value, int)
        return Reading({name: value}, {}, {name: feedback})

    def ask_again(
        self, previous: str, name: str, problems: Mapping[str, str], ask: str
    ) -> list[Message]:
        why = f" ({problems[name]})" if problems.get(name) else ""
        return reminder_frame(previous, f"Your feedback above could not be read{why}. {ask}")


class PrometheusProtocol(OneCriterionProtocol):
    """Prometheus 2's absolute grading: one call per criterion in either mode, each
    answered with a feedback and a final ``[RESULT] N``."""

    name = "prometheus"
    shares = (
        "the system prompt, the task description with its steps and the instruction's "
        "heading; its trained order puts the rubric after the response, so the rubric is "
        "not shared"
    )

    def render(self, subject: Subject, criteria: Sequence[Criterion]) -> list[Message]:
        return render(subject, self.one(criteria), self.scale)

    def read(self, text: str, criteria: Sequence[Criterion]) -> Reading:
        name = self.one(criteria).name
        found = grammar(self.scale).read(text)
        value = found.problem if found.value is None else _number(found.value, self.scale)
        return self.reading(name, value, before_verdict(text, found.start))

    def reminder(
        self,
        previous: str,
        missing: Sequence[Criterion],
        problems: Mapping[str, str],
        read: Sequence[str] = (),
    ) -> list[Message]:
        ask = (
            "Reply with your feedback for the same score rubric (you may repeat the one "
            f'above), then end with one final line of the form "{RESULT_MARKER} N", where N '
            f"is an integer between {self.scale.low} and {self.scale.high}, and write "
            "nothing after that line."
        )
        return self.ask_again(previous, self.one(missing).name, problems, ask)


PROTOCOLS[PrometheusProtocol.name] = PrometheusProtocol
