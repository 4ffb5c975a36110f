"""The other protocols' prompt layouts, as the simulated judge reads and answers them (pure).

A prompt is in a layout when it opens with that layout's system prompt
(:data:`rubrics.protocol.PROMETHEUS_SYSTEM`, :data:`rubrics.protocol.FLASK_SYSTEM`,
:data:`rubrics.mtbench.SYSTEM`): the
system prompt comes first in every dialect's concatenated prompt, and no untrusted text
can precede it. Sections are found by their heading lines, first occurrence (the original
request comes before any reminder turn, and the protocols neutralize headings inside
untrusted texts); the keys of FLASK's dictionary come from the last
:func:`rubrics.protocol.dict_keys_line`, which follows the response.

This module only reads prompts and writes answers from scores decided elsewhere
(``simulator.answer``), so both sides of each format live in one place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from flask_eval.rubrics import mtbench
from flask_eval.rubrics.protocol import (
    FLASK_REFERENCE,
    FLASK_RESPONSE,
    FLASK_RESPONSE_END,
    FLASK_SYSTEM,
    NA,
    PROMETHEUS_REFERENCE,
    PROMETHEUS_RESPONSE,
    PROMETHEUS_RUBRIC,
    PROMETHEUS_SYSTEM,
    RESULT_MARKER,
    requested_keys,
)

Layout = Literal["prometheus", "flask", "mt-bench"]


@dataclass(frozen=True)
class Parts:
    """What a prompt in one of the layouts asks about.

    ``criteria``: Prometheus's one rubric criterion, or the keys FLASK's dictionary must
    have (empty when the prompt names none).
    """

    layout: Layout
    response: str
    reference: str | None
    criteria: tuple[str, ...]


def detect(prompt: str) -> Layout | None:
    """The layout of ``prompt``, from the system prompt it opens with (None: neither)."""
    head = prompt.lstrip()
    if head.startswith(PROMETHEUS_SYSTEM):
        return "prometheus"
    if head.startswith(FLASK_SYSTEM):
        return "flask"
    if head.startswith(mtbench.SYSTEM):
        return "mt-bench"
    return None


def _section(lines: Sequence[str], heading: str, ends: Sequence[str]) -> str | None:
    """The lines after the first line that is ``heading``, up to the next line in ``ends``."""
    stripped = [line.strip() for line in lines]
    try:
        start = stripped.index(heading)
    except ValueError:
        return None
    for end in range(start + 1, len(lines)):
        if stripped[end] in ends:
            return "\n".join(lines[start + 1 : end]).strip()
    return None


def parts(prompt: str) -> Parts | None:
    """The response, reference and criteria of a prompt in one of the layouts."""
    layout = detect(prompt)
    if layout is None:
        return None
    lines = prompt.splitlines()
    criteria: tuple[str, ...]
    if layout == "mt-bench":
        response, reference = mtbench_parts(lines, "A")
        return Parts(layout, prompt if response is None else response, reference, ())
    if layout == "prometheus":
        after = (PROMETHEUS_REFERENCE, PROMETHEUS_RUBRIC)
        response = _section(lines, PROMETHEUS_RESPONSE, after)
        reference = _section(lines, PROMETHEUS_REFERENCE, (PROMETHEUS_RUBRIC,))
        rubric = _section(lines, PROMETHEUS_RUBRIC, ("",)) or ""
        first = rubric.splitlines()[0].strip() if rubric else ""
        criteria = (first.removeprefix("[").removesuffix("]"),) if first else ()
    else:
        response = _section(lines, FLASK_RESPONSE, (FLASK_RESPONSE_END,))
        reference = _section(lines, FLASK_REFERENCE, (FLASK_RESPONSE,))
        criteria = tuple(requested_keys(prompt) or ())
    return Parts(layout, prompt if response is None else response, reference or None, criteria)


def _last_section(lines: Sequence[str], heading: str, end: str) -> str | None:
    """The lines after the last line that is ``heading`` before the first line ``end``."""
    stripped = [line.strip() for line in lines]
    if end not in stripped:
        return None
    stop = stripped.index(end)
    starts = [i for i in range(stop) if stripped[i] == heading]
    return "\n".join(lines[starts[-1] + 1 : stop]).strip() if starts else None


def mtbench_parts(lines: Sequence[str], letter: str) -> tuple[str | None, str | None]:
    """(assistant ``letter``'s judged answer, the judged turn's reference) of an MT-Bench
    prompt, single or pairwise: turn 1's answer section, or the last answer of the
    assistant's conversation (turn k > 1); None where absent."""
    stripped = [line.strip() for line in lines]
    one_shot = mtbench.ANSWER_START if letter == "A" and mtbench.ANSWER_START in stripped else ""
    if one_shot:
        response = _section(lines, mtbench.ANSWER_START, (mtbench.ANSWER_END,))
    elif f"[The Start of Assistant {letter}'s Answer]" in stripped:
        start = f"[The Start of Assistant {letter}'s Answer]"
        response = _section(lines, start, (f"[The End of Assistant {letter}'s Answer]",))
    else:
        end = mtbench.conversation_end(letter)
        response = _last_section(lines, f"### Assistant {letter}:", end)
    reference = _section(lines, mtbench.REFERENCE_START, (mtbench.REFERENCE_END,))
    if reference is None:
        reference = _last_section(lines, mtbench.REFERENCE_LABEL, mtbench.REFERENCES_END)
    return response, reference or None


def mtbench_answer(score: int, feedback: str, garbage: str | None = None) -> str:
    """An MT-Bench answer: an explanation, then ``Rating: [[N]]``; ``garbage``: ``prose``
    (no rating), ``out_of_range`` (``[[11]]``) or ``truncated`` (cut inside the brackets)."""
    if garbage == "prose":
        return f"{feedback} I cannot settle on one rating."
    if garbage == "out_of_range":
        return f"{feedback} Rating: [[11]]"
    if garbage == "truncated":
        return f"{feedback} Rating: [["
    return f"{feedback} Rating: [[{score}]]"


# --- answers ---------------------------------------------------------------------------


def prometheus_answer(score: int, feedback: str, quote: str | None = None) -> str:
    """A Prometheus answer: ``Feedback: ...`` then ``[RESULT] N`` on the same line."""
    body = f"{feedback}\n\n{quote}\n\n" if quote else f"{feedback} "
    return f"Feedback: {body}{RESULT_MARKER} {score}"


def prometheus_garbage(kind: str, score: int, feedback: str, bad: int) -> str:
    """An unreadable Prometheus answer: ``prose`` (no verdict), ``out_of_range`` (the
    score ``bad``) or ``truncated`` (cut inside the verdict marker)."""
    if kind == "prose":
        return f"Feedback: {feedback} I cannot settle on a single score for this response."
    if kind == "out_of_range":
        return prometheus_answer(bad, feedback)
    return prometheus_answer(score, feedback)[: -len(f" {score}") - 3]


def flask_dict(scores: Mapping[str, int | None]) -> str:
    """FLASK's final line: a Python dictionary of the scores (None: N/A)."""
    return repr({k: (NA if v is None else v) for k, v in scores.items()})


def flask_answer(
    rationales: Mapping[str, str], scores: Mapping[str, int | None], quote: str | None = None
) -> str:
    """A FLASK review: feedback and score per skill, then the dictionary line."""
    paragraphs = [
        f"{skill}: {rationales[skill]} Score: {NA if value is None else value}"
        for skill, value in scores.items()
    ]
    if quote:
        paragraphs.append(quote)
    paragraphs.append(flask_dict(scores))
    return "\n\n".join(paragraphs)


def flask_garbage(
    kind: str, rationales: Mapping[str, str], scores: Mapping[str, int | None], bad: int
) -> str:
    """An unreadable FLASK review: ``prose`` (no dictionary), ``out_of_range`` (the first
    skill scored ``bad``) or ``truncated`` (cut inside the dictionary)."""
    if kind == "prose" or not scores:
        lines = [f"{skill}: {rationales[skill]}" for skill in scores]
        return "\n\n".join([*lines, "Overall the response is mixed; I will not give scores."])
    if kind == "out_of_range":
        broken: dict[str, int | None] = dict(scores)
        broken[next(iter(broken))] = bad
        return flask_answer(rationales, broken)
    text = flask_answer(rationales, scores)
    line = flask_dict(scores)
    return text[: len(text) - len(line) // 2]
