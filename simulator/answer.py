"""What the simulated judge says (pure, no I/O).

Scores are a deterministic function of the seed, the judge model and the full prompt
text, so the same request always gets the same answer, while different requests get
different scores. A per-response "quality" (how much of the reference answer the response
covers, blended with a hash of the response text between the ``<<<RESPONSE`` and
``RESPONSE>>>`` lines, or of the whole prompt when those are absent) sets the level and
a per-skill, per-judge nudge of -1/0/+1 spreads the skills around it; judges therefore
broadly agree on a response without being identical.

Each prompt is answered in the format it asks for: ours (a rationale per skill, then
``[SCORES] {...}``), Prometheus's (``Feedback: ... [RESULT] N``) or FLASK's (feedback per
skill, then a Python dictionary); ``simulator.formats`` recognises the latter two layouts
and finds their response, reference and criteria, so the scoring is the same for all.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import replace

from flask_eval.rubrics.protocol import (
    NO_REFERENCE,
    REFERENCE_HEADING,
    RESPONSE_END,
    RESPONSE_START,
    RESULT_MARKER,
    SCORES_MARKER,
    requested_skills,
    scores_line,
)

from . import annotate, formats
from .config import SimConfig

_WORD = re.compile(r"[a-z0-9]+")

# Real judges mostly give 3s and 4s; keep every value reachable.
_QUALITY_WEIGHTS = (1, 2, 3, 3, 2)
_NUDGES = (-1, 0, 0, 0, 1)
GARBAGE_KINDS = ("prose", "out_of_range", "truncated")

_RATIONALES = {
    1: "The response fails on this criterion: it is largely wrong, missing or unusable.",
    2: "The response only partly meets this criterion and has significant problems.",
    3: "The response is acceptable on this criterion, though several points need work.",
    4: "The response handles this criterion well, with only minor lapses.",
    5: "The response is excellent on this criterion; nothing material is missing.",
}
_NA_RATIONALE = "This criterion does not apply to the given instruction."


def _hash(*parts: str) -> int:
    digest = hashlib.blake2b("\x1f".join(parts).encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "big")


def _weighted(h: int, weights: Sequence[int]) -> int:
    """Index into ``weights`` chosen by the hash value ``h``."""
    x = h % sum(weights)
    for i, w in enumerate(weights):
        if x < w:
            return i
        x -= w
    return len(weights) - 1  # pragma: no cover - unreachable


def estimate_tokens(text: str) -> int:
    """Rough token count: one token per four characters, at least one."""
    return max(1, math.ceil(len(text) / 4))


def _block(prompt: str, start_line: str, end_line: str) -> str | None:
    """Text between a line that is exactly ``start_line`` and the next ``end_line`` line."""
    lines = prompt.splitlines()
    try:
        i = lines.index(start_line)
        j = lines.index(end_line, i + 1)
    except ValueError:
        return None
    return "\n".join(lines[i + 1 : j])


def response_focus(prompt: str) -> str:
    """The judged response (between the delimiter lines, or in its section of the other
    layouts), or the whole prompt if absent."""
    layout = formats.parts(prompt)
    if layout is not None:
        return layout.response
    from . import pairwise  # here: simulator.pairwise imports this module

    pair = pairwise.parts(prompt)
    if pair is not None:
        return pair.response_b  # the last one shown: what a quoting judge ends with
    block = _block(prompt, RESPONSE_START, RESPONSE_END)
    return prompt if block is None else block


def reference_text(prompt: str) -> str | None:
    """The reference answer section of the prompt, if there is one."""
    layout = formats.parts(prompt)
    if layout is not None:
        return layout.reference
    start = prompt.find(REFERENCE_HEADING)
    if start < 0:
        return None
    end = prompt.find("\n## ", start + len(REFERENCE_HEADING))
    section = prompt[start + len(REFERENCE_HEADING) : end if end >= 0 else None].strip()
    # The section holds the reference, or a note that there is none (the note on how to
    # read a reference is in the prompt's static part).
    return None if not section or section.startswith(NO_REFERENCE) else section


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2}


def quality(prompt: str, config: SimConfig) -> int:
    """The 1..5 level of the judged response (independent of the judge model).

    Half of it is how much of the reference answer's vocabulary the response covers, half
    a hash of the response: better answers score higher, yet scores stay spread out.
    """
    return quality_of(response_focus(prompt), reference_text(prompt), config)


def quality_of(response: str, reference: str | None, config: SimConfig) -> int:
    """:func:`quality` of ``response`` given the ``reference`` answer (None: none)."""
    u = _hash("quality", str(config.seed), response) % 10_000 / 10_000
    ref_words = _words(reference) if reference else set()
    if not ref_words:
        return 1 + _weighted(_hash("quality", str(config.seed), response), _QUALITY_WEIGHTS)
    recall = len(ref_words & _words(response)) / len(ref_words)
    return min(5, max(1, 1 + round(4 * (0.55 * recall + 0.45 * u))))


def judge_scores(
    prompt: str, model: str, skills: Sequence[str], config: SimConfig
) -> dict[str, int | None]:
    """Deterministic scores (None = N/A) for ``skills``."""
    if config.score is not None:
        return {skill: config.score for skill in skills}
    level = quality(prompt, config)  # format-aware: it finds the response in any layout
    seed = str(config.seed)
    scores: dict[str, int | None] = {}
    for skill in skills:
        if config.na_rate > 0:
            u = _hash("na", seed, model, prompt, skill) % 1_000_000 / 1_000_000
            if u < config.na_rate:
                scores[skill] = None
                continue
        nudge = _NUDGES[_hash("nudge", seed, model, prompt, skill) % len(_NUDGES)]
        scores[skill] = min(5, max(1, level + nudge))
    return scores


def _rationale(scores: dict[str, int | None]) -> list[str]:
    paragraphs = ["Evaluation of the response, skill by skill."]
    for skill, value in scores.items():
        text = _NA_RATIONALE if value is None else _RATIONALES[value]
        paragraphs.append(f"{skill}: {text}")
    return paragraphs


def garbage_kind(prompt: str, model: str, config: SimConfig) -> str:
    """Which kind of malformed answer this request gets when it gets one."""
    return GARBAGE_KINDS[_hash("garbage", str(config.seed), model, prompt) % len(GARBAGE_KINDS)]


def _garbage_answer(prompt: str, model: str, skills: list[str] | None, config: SimConfig) -> str:
    if skills is None:
        return "The response has some merits and some flaws; I would rather not give a number."
    scores = judge_scores(prompt, model, skills, config)
    paragraphs = _rationale(scores)
    kind = garbage_kind(prompt, model, config)
    if kind == "prose" or not skills:
        paragraphs.append("Overall the response is mixed, so I will not commit to final scores.")
        return "\n\n".join(paragraphs)
    if kind == "out_of_range":
        broken: dict[str, int | None] = dict(scores)
        broken[skills[0]] = 7 if _hash("oor", prompt) % 2 else 0
        paragraphs.append(scores_line(broken))
        return "\n\n".join(paragraphs)
    line = scores_line(scores)
    cut = len(SCORES_MARKER) + 2 + max(1, (len(line) - len(SCORES_MARKER) - 2) // 2)
    paragraphs.append(line[:cut])
    return "\n\n".join(paragraphs)


REFUSAL_TEXT = "I'm sorry, but I can't help with evaluating this request."
QUOTE_OPENING = "The response reads, in full:"


def quoted(prompt: str) -> str:
    """The quote of the response a ``quote_response`` judge ends its rationale with."""
    return f"{QUOTE_OPENING}\n{response_focus(prompt)}"


def make_answer(prompt: str, model: str, config: SimConfig, *, garbage: bool = False) -> str:
    """The judge's full answer text for a request whose messages concatenate to ``prompt``.

    A prompt in Prometheus's or FLASK's layout (``simulator.formats``), or a pairwise
    comparison (``simulator.pairwise``), is answered in that layout's format
    (``answer_format`` ``auto``). Otherwise, with a ``Skills to score:``
    line: one rationale paragraph per skill, then the final ``[SCORES] {...}`` line.
    Without one: a short feedback ending in ``[RESULT] N``.
    ``garbage=True`` yields an answer with no valid final line (prose only, an
    out-of-range score, or truncated JSON — chosen deterministically per request).
    """
    annotated = annotate.answer(prompt, model, config, garbage=garbage)
    if annotated is not None:
        return annotated
    layout = formats.parts(prompt)
    if layout is not None and config.answer_format == "auto":
        return _layout_answer(layout, prompt, model, config, garbage)
    from . import pairwise  # here: simulator.pairwise imports this module

    pair = pairwise.parts(prompt)
    if pair is not None and config.answer_format == "auto":
        return pairwise.make_answer(pair, prompt, model, config, garbage=garbage)
    skills = requested_skills(prompt)
    if garbage:
        return _garbage_answer(prompt, model, skills, config)
    if skills is None or config.answer_format == "result":
        level = config.score if config.score is not None else quality(prompt, config)
        return f"Feedback: {_RATIONALES[level]} {RESULT_MARKER} {level}"
    scores = judge_scores(prompt, model, skills, config)
    paragraphs = _rationale(scores)
    if config.quote_response:
        paragraphs.append(quoted(prompt))
    paragraphs.append(scores_line(scores))
    return "\n\n".join(paragraphs)


def prometheus_score(prompt: str, model: str, config: SimConfig) -> int:
    """The 1-5 score the judge gives a Prometheus-layout prompt (it has no N/A)."""
    layout = formats.parts(prompt)
    criterion = layout.criteria[0] if layout is not None and layout.criteria else ""
    score = judge_scores(prompt, model, [criterion], replace(config, na_rate=0))[criterion]
    assert score is not None  # na_rate 0: never N/A
    return score


def _layout_answer(
    layout: formats.Parts, prompt: str, model: str, config: SimConfig, garbage: bool
) -> str:
    """The answer to a prompt in Prometheus's or FLASK's layout, in that layout's format."""
    kind = garbage_kind(prompt, model, config) if garbage else None
    bad = 7 if _hash("oor", prompt) % 2 else 0
    quote = quoted(prompt) if config.quote_response else None
    if layout.layout == "prometheus":
        score = prometheus_score(prompt, model, config)
        if kind is not None:
            return formats.prometheus_garbage(kind, score, _RATIONALES[score], bad)
        return formats.prometheus_answer(score, _RATIONALES[score], quote)
    scores = judge_scores(prompt, model, layout.criteria, config)
    rationales = {s: _NA_RATIONALE if v is None else _RATIONALES[v] for s, v in scores.items()}
    if kind is not None or not scores:
        return formats.flask_garbage(kind or "prose", rationales, scores, bad)
    return formats.flask_answer(rationales, scores, quote)


def cut_off(text: str, prompt: str, max_tokens: int) -> str:
    """An answer cut off by its token limit: right after the quoted response when the
    judge quotes it (the worst case: the response's own last line is then the answer's
    last line), else after ``max_tokens`` tokens' worth of text."""
    quote = quoted(prompt)
    at = text.find(quote)
    if at >= 0:
        return text[: at + len(quote)]
    return text[: max(1, max_tokens * 4)]
