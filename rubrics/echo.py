"""A rationale that copies the prompt instead of judging (pure).

A small judge may answer with the prompt's own words in place of a rationale: its
placeholders (``<two to four sentences>``, or a variant of its own: ``<one sentence``),
its instructions ("cite concrete evidence from the response"), a rubric level copied
whole. The scores beside such a rationale are not a judgment of the response. Which
words are the prompt's is read from the prompt itself, not from a list: the rendered
messages with the texts under judgment (instruction, reference, responses, system
prompt) taken out are the template (:func:`template_text`); a rationale is an echo when
it is one placeholder-shaped fragment (the template's placeholders are written ``<...>``)
or when most of its words are runs of :data:`RUN` or more words copied from the template
(:func:`prompt_echo`). Words the rationale quotes from the response are evidence, never
an echo. An echoing criterion is unreadable: the worker asks once more with a format
reminder, then fails it ``unparseable`` with the reason (:func:`without_echoes`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from flask_eval.rubrics.messages import Message, text_of
from flask_eval.rubrics.parse import Reading

#: the shortest run of words copied from the template that counts as copied
RUN = 4
#: the share of a rationale's words in copied runs above which it is an echo
SHARE = 0.75

_WORD = re.compile(r"\w+")
#: a rationale that is one ``<...`` fragment (closed or not), as the template's placeholders
_FRAGMENT = re.compile(r"\A\s*+<[^<>\n]*+>?[\s.]*+\Z")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def template_text(messages: Sequence[Message], subject: Iterable[str]) -> str:
    """The prompt's own text: every message's text with each text under judgment
    (``subject``: instruction, reference, responses, system prompt) taken out."""
    text = "\n".join(text_of(m) for m in messages)
    for part in sorted({s for s in subject if s.strip()}, key=len, reverse=True):
        text = text.replace(part, "\n")
    return text


@lru_cache(maxsize=256)
def template_of(text: str) -> Template:
    """:class:`Template` of ``text``, kept for the next call with the same prompt
    (every call with the same criteria shares its template)."""
    return Template(text)


class Template:
    """The runs of :data:`RUN` words of a template, to compare rationales with."""

    def __init__(self, text: str) -> None:
        words = _words(text)
        self.runs = {tuple(words[i : i + RUN]) for i in range(len(words) - RUN + 1)}
        self.placeholders = "<" in text and ">" in text


def prompt_echo(rationale: str, template: Template) -> str | None:
    """Why ``rationale`` copies the prompt instead of judging, or None."""
    if template.placeholders and _FRAGMENT.match(rationale):
        shown = " ".join(rationale.split())[:40]
        return f"the rationale is a placeholder like the prompt's: {shown!r}"
    words = _words(rationale)
    if len(words) < RUN:
        return None
    copied = [False] * len(words)
    for i in range(len(words) - RUN + 1):
        if tuple(words[i : i + RUN]) in template.runs:
            copied[i : i + RUN] = [True] * RUN
    share = sum(copied) / len(words)
    if share >= SHARE:
        return f"the rationale copies the prompt's own words ({share:.0%} of them)"
    return None


def without_echoes(reading: Reading, template: Template) -> Reading:
    """``reading`` with each criterion whose rationale echoes ``template`` moved from
    its scores to its problems (the reason given)."""
    echoes = {
        name: echo
        for name in reading.scores
        if name not in reading.values  # a generated text or labels: no rationale
        and (echo := prompt_echo(_own(reading.rationales.get(name, ""), name), template))
    }
    if not echoes:
        return reading
    return Reading(
        scores={k: v for k, v in reading.scores.items() if k not in echoes},
        problems={**reading.problems, **{k: f"{e} for {k}" for k, e in echoes.items()}},
        rationales={k: v for k, v in reading.rationales.items() if k not in echoes},
        extra=reading.extra,
        values={k: v for k, v in reading.values.items() if k not in echoes},
    )


def _own(rationale: str, name: str) -> str:
    """A rationale without its opening ``Name:`` (the format asks for it)."""
    head = rationale.lstrip(" \t\n#*_`-")
    if head.casefold().startswith(name.casefold()):
        head = head[len(name) :].lstrip("*_` ").removeprefix(":").removeprefix(" -")
    return head.strip()
