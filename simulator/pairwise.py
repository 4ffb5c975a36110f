"""The simulated judge's pairwise comparisons (pure, no I/O).

A prompt is a pairwise comparison when it opens with one of the pairwise system prompts
(:data:`rubrics.protocol.PAIRWISE_SYSTEM`, ours; :data:`rubrics.protocol.PROMETHEUS_REL_SYSTEM`,
Prometheus 2's relative grading; :data:`rubrics.mtbench_pair.SYSTEM`, MT-Bench's, answered
``[[A]]``, ``[[B]]`` or ``[[C]]`` on its one criterion ``overall``), as
``simulator.formats`` recognises the absolute layouts.
The two responses, the reference and the criteria are found by their delimiter lines and
section headings, first occurrence (the original request precedes any reminder turn, and
the protocols neutralize delimiters and headings inside untrusted texts); our criteria
come from the last :func:`rubrics.protocol.criteria_line`, which follows the responses.

The verdict on a criterion is deterministic:

- a comparison in ``SimConfig.replay`` (:func:`replay_key` of its two responses in the
  order shown) gets the recorded verdict on every criterion, before anything else;
- each response gets a *strength* from its own text only: its 1-5 level as absolute
  grading computes it (``simulator.quality.criterion_level``: coverage of the reference
  plus a hash, or the level a generated response signs), nudged by -1/0/+1 per judge and
  criterion as ``judge_scores`` nudges skills, moved by the judge's noise and length
  preference when it has traits (``SimConfig.judges``; its bias cancels), plus a spread
  within the level from a hash of the response (so one level's responses are ordered
  too). Strength ignores the position a response is shown in, so without
  position bias a comparison gives the same verdict in both orders;
- a judge that grants injections (``JudgeTraits.injection``) gives every criterion to
  the response whose injection it grants (when it grants exactly one's);
- with probability ``|position_bias|`` of the judge's traits (a hash of the seed, the
  judge, both responses in the order shown and the criterion: each order draws on its
  own) the verdict goes to the response shown first (positive) or second (negative);
- with probability ``SimConfig.position_bias`` (a hash of the same) the judgment picks
  the response shown FIRST, whatever the strengths;
- otherwise the stronger response wins; in our format the two tie when their strengths
  differ by less than :data:`TIE_MARGIN` (MT-Bench's too). Prometheus's format has no
  tie: exactly equal strengths (identical responses) give the first response.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from flask_eval.rubrics import mtbench, mtbench_pair
from flask_eval.rubrics.protocol import (
    PAIRWISE_SYSTEM,
    PROMETHEUS_REL_REFERENCE,
    PROMETHEUS_REL_RUBRIC,
    PROMETHEUS_REL_SYSTEM,
    PROMETHEUS_RESPONSE_A,
    PROMETHEUS_RESPONSE_B,
    RESPONSE_A_END,
    RESPONSE_A_START,
    RESPONSE_B_END,
    RESPONSE_B_START,
    RESULT_MARKER,
    VERDICT_A,
    VERDICT_B,
    VERDICT_TIE_WORD,
    requested_criteria,
    verdict_line,
)

from . import formats, generate, quality
from .config import SimConfig

PairLayout = Literal["pairwise", "prometheus-relative", "mt-bench"]

#: strengths closer than this tie (our format): within one level, about a third of pairs
TIE_MARGIN = 0.05
_LEVEL_STEP = 0.25  # strength between adjacent levels
_SPREAD = 0.125  # the within-level spread: never reorders two levels

_FEEDBACK = {
    VERDICT_A: "Response A meets this criterion better than Response B does.",
    VERDICT_B: "Response B meets this criterion better than Response A does.",
    VERDICT_TIE_WORD: "Both responses meet this criterion about equally well.",
}


#: MT-Bench's verdict markers, and its unreadable answers by ``garbage_kind``
_MTBENCH_CHOICE = {VERDICT_A: "A", VERDICT_B: "B", VERDICT_TIE_WORD: "C"}
_MTBENCH_GARBAGE = {
    "prose": "Both answers have merits, so I will not pick one.",
    "out_of_range": "[[D]]",
    "truncated": "[[",
}


@dataclass(frozen=True)
class PairParts:
    """What a pairwise prompt asks about: the responses shown first (A) and second (B),
    the reference (None: none) and the criteria (our criterion names, or Prometheus's one
    bracketed criterion text)."""

    layout: PairLayout
    response_a: str
    response_b: str
    reference: str | None
    criteria: tuple[str, ...]


def detect(prompt: str) -> PairLayout | None:
    """The pairwise layout of ``prompt``, from the system prompt it opens with."""
    head = prompt.lstrip()
    if head.startswith(PAIRWISE_SYSTEM):
        return "pairwise"
    if head.startswith(PROMETHEUS_REL_SYSTEM):
        return "prometheus-relative"
    if head.startswith(mtbench_pair.SYSTEM):
        return "mt-bench"
    return None


def _between(lines: Sequence[str], start: str, ends: Sequence[str]) -> str | None:
    """The lines after the first line that is ``start``, up to the next line in ``ends``."""
    stripped = [line.strip() for line in lines]
    try:
        i = stripped.index(start)
    except ValueError:
        return None
    for j in range(i + 1, len(lines)):
        if stripped[j] in ends:
            return "\n".join(lines[i + 1 : j])
    return None


def parts(prompt: str) -> PairParts | None:
    """The two responses, the reference and the criteria of a pairwise prompt (None: the
    prompt is not one, or its response blocks cannot be found)."""
    layout = detect(prompt)
    if layout is None:
        return None
    lines = prompt.splitlines()
    if layout == "mt-bench":  # one overall verdict: MT-Bench's prompt names no criterion
        a, reference = formats.mtbench_parts(lines, "A")
        b, _ = formats.mtbench_parts(lines, "B")
        criteria: tuple[str, ...] = (mtbench.OVERALL,)
    elif layout == "pairwise":
        a = _between(lines, RESPONSE_A_START, (RESPONSE_A_END,))
        b = _between(lines, RESPONSE_B_START, (RESPONSE_B_END,))
        # our reference section precedes the responses: read it from the text before them
        # (the line that opens response A: the static notes name the delimiter too)
        stripped = [line.strip() for line in lines]
        opens = stripped.index(RESPONSE_A_START) if RESPONSE_A_START in stripped else len(lines)
        reference = quality.reference_text("\n".join(lines[:opens]))
        criteria = tuple(requested_criteria(prompt) or ())
    else:
        a = _between(lines, PROMETHEUS_RESPONSE_A, (PROMETHEUS_RESPONSE_B,))
        b = _between(
            lines, PROMETHEUS_RESPONSE_B, (PROMETHEUS_REL_REFERENCE, PROMETHEUS_REL_RUBRIC)
        )
        reference = _between(lines, PROMETHEUS_REL_REFERENCE, (PROMETHEUS_REL_RUBRIC,))
        rubric = (_between(lines, PROMETHEUS_REL_RUBRIC, ("",)) or "").strip()
        first = rubric.splitlines()[0].strip() if rubric else ""
        criteria = (first.removeprefix("[").removesuffix("]"),) if first else ()
        a, b = (None if x is None else x.strip() for x in (a, b))
        reference = reference.strip() if reference is not None else None
    if a is None or b is None:
        return None
    return PairParts(layout, a, b, reference or None, criteria)


# --- judging ---------------------------------------------------------------------------


def _unit(*parts: str) -> float:
    """A uniform number in [0, 1) from a hash of ``parts``."""
    digest = hashlib.blake2b("\x1f".join(parts).encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "big") / 2**64


def strength(
    response: str, reference: str | None, criterion: str, model: str, config: SimConfig
) -> float:
    """How good ``response`` is on ``criterion`` to judge ``model`` (position-free; keyed
    on the response's canonical text, so a probe's twin has its original's strength
    unless the judge's traits read what the twin changed)."""
    seed = str(config.seed)
    plain = quality.canonical(response)
    level = quality.criterion_level(response, reference, criterion, config)
    nudge = quality.NUDGES[int(_unit("pair-nudge", seed, model, criterion, plain) * 5)]
    utility = level + nudge
    traits = config.traits_of(model)
    if not traits.neutral:  # the bias is the same on both sides: it cancels
        noise_parts = ("pair", seed, model, criterion, plain)
        family = generate.family_of(plain)
        words = quality.judged_words(response)
        utility += quality.trait_shift(traits, words, noise_parts, family)
    level = min(5, max(1, utility))
    spread = _unit("pair-spread", seed, criterion, plain) - 0.5
    return (level - 1) * _LEVEL_STEP + spread * _SPREAD


def _shown(pair: PairParts) -> tuple[str, str]:
    """The canonical texts of the responses in the order shown (first, second)."""
    return quality.canonical(pair.response_a), quality.canonical(pair.response_b)


def replay_key(first: str, second: str) -> str:
    """The ``SimConfig.replay`` key of a comparison showing ``first`` then ``second``: a
    stable hash of their canonical texts (``rubrics.probes.canonical``) in that order, so
    a response has one key raw and as a rendered prompt shows it."""
    joined = "\x1f".join((quality.canonical(first), quality.canonical(second)))
    return hashlib.blake2b(joined.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def biased(pair: PairParts, criterion: str, model: str, config: SimConfig) -> bool:
    """Whether this judgment picks the first response regardless (``position_bias``),
    by a hash of the responses in the order shown."""
    if config.position_bias <= 0:
        return False
    return _unit("position", str(config.seed), model, *_shown(pair), criterion) < (
        config.position_bias
    )


def trait_position(pair: PairParts, criterion: str, model: str, config: SimConfig) -> str | None:
    """The position the judge's ``position_bias`` trait gives this verdict to whatever the
    responses (``"A"``: first, ``"B"``: second), None when it does not: with probability
    the trait's size, by a hash of the responses in the order shown (each order draws
    on its own)."""
    b = config.traits_of(model).position_bias
    if b == 0:
        return None
    if _unit("position-trait", str(config.seed), model, *_shown(pair), criterion) >= abs(b):
        return None
    return VERDICT_A if b > 0 else VERDICT_B


def injected_winner(pair: PairParts, model: str, config: SimConfig) -> str | None:
    """The response whose injection the judge grants (``JudgeTraits.injection``) when
    exactly one of the two is granted (``"A"`` or ``"B"``), else None."""
    traits = config.traits_of(model)
    if traits.injection <= 0:
        return None
    seed = str(config.seed)
    a = quality.injection_granted(pair.response_a, traits, seed, model)
    b = quality.injection_granted(pair.response_b, traits, seed, model)
    if a == b:
        return None
    return VERDICT_A if a else VERDICT_B


def verdicts(pair: PairParts, prompt: str, model: str, config: SimConfig) -> dict[str, str]:
    """Each criterion's verdict, ``"A"``, ``"B"`` or (our format only) ``"tie"``: the
    recorded one of a comparison in ``SimConfig.replay``, else to a response whose
    injection the judge grants, else where the judge's position bias sends it, else to
    the stronger response."""
    if config.replay:
        recorded = config.replay.get(replay_key(pair.response_a, pair.response_b))
        if recorded is not None:
            return dict.fromkeys(pair.criteria, recorded)
    out: dict[str, str] = {}
    granted = injected_winner(pair, model, config)
    for criterion in pair.criteria:
        forced = granted or trait_position(pair, criterion, model, config)
        if forced is not None:
            out[criterion] = forced
            continue
        if biased(pair, criterion, model, config):
            out[criterion] = VERDICT_A
            continue
        a = strength(pair.response_a, pair.reference, criterion, model, config)
        b = strength(pair.response_b, pair.reference, criterion, model, config)
        jitter = config.traits_of(model).jitter
        if jitter:  # drawn for this request (its prompt), each side on its own
            a += jitter * quality.gaussian(
                "jitter", str(config.seed), model, prompt, criterion, "a"
            )
            b += jitter * quality.gaussian(
                "jitter", str(config.seed), model, prompt, criterion, "b"
            )
        if pair.layout != "prometheus-relative" and abs(a - b) < TIE_MARGIN:
            out[criterion] = VERDICT_TIE_WORD
        else:
            out[criterion] = VERDICT_B if b > a else VERDICT_A
    return out


# --- answers ---------------------------------------------------------------------------


def make_answer(
    pair: PairParts, prompt: str, model: str, config: SimConfig, *, garbage: bool = False
) -> str:
    """The judge's answer to a pairwise prompt, in its layout's format; ``garbage`` gives
    an unreadable one (``simulator.quality.garbage_kind``: no verdict, a verdict the
    format does not have, or one cut off inside the verdict)."""
    kind = quality.garbage_kind(prompt, model, config) if garbage else None
    if not pair.criteria:
        return "The two responses have different merits; I cannot say which is better."
    said = verdicts(pair, prompt, model, config)
    quote = f"{quality.QUOTE_OPENING}\n{pair.response_b}" if config.quote_response else None
    if pair.layout == "mt-bench":
        word = said[pair.criteria[0]]
        body = _FEEDBACK[word] + (f"\n\n{quote}\n\n" if quote else " ")
        return body + _MTBENCH_GARBAGE.get(kind or "", f"[[{_MTBENCH_CHOICE[word]}]]")
    if pair.layout == "prometheus-relative":
        letter = said[pair.criteria[0]]
        body = f"Feedback: {_FEEDBACK[letter]}" + (f"\n\n{quote}\n\n" if quote else " ")
        if kind == "prose":
            return body + "Both responses have merits, so I will not pick one."
        if kind == "out_of_range":
            return f"{body}{RESULT_MARKER} Tie"
        whole = f"{body}{RESULT_MARKER} {letter}"
        return whole[: -len(f" {letter}") - 3] if kind == "truncated" else whole
    paragraphs = [f"{c}: {_FEEDBACK[v]}" for c, v in said.items()]
    if quote:
        paragraphs.append(quote)
    if kind == "prose":
        paragraphs.append("Overall the two responses are close; I will not give verdicts.")
        return "\n\n".join(paragraphs)
    if kind == "out_of_range":
        said = {**said, pair.criteria[0]: "C"}
    line = verdict_line(said)
    if kind == "truncated":
        line = line[: max(len("[VERDICT] {"), len(line) // 2)]
    return "\n\n".join([*paragraphs, line])
