"""How good the simulated judge finds a response (pure, no I/O): its 1..5 level
(:func:`quality_of`, from the reference answer's vocabulary it covers and a hash of its
text), the nudges that spread a judge's scores around it, a judge's traits
(:func:`judged_score`: bias, noise, length preference, stochastic rounding), and which
malformed answer a request gets when it gets one. Shared by the absolute answers
(``simulator.answer``) and the pairwise ones (``simulator.pairwise``)."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from statistics import NormalDist

from flask_eval.rubrics.probes import canonical, injections_in, judged_words, word_count
from flask_eval.rubrics.protocol import NO_REFERENCE, REFERENCE_HEADING

from . import formats, generate
from .config import JudgeTraits, SimConfig

_WORD = re.compile(r"[a-z0-9]+")

# Real judges mostly give 3s and 4s; keep every value reachable.
_QUALITY_WEIGHTS = (1, 2, 3, 3, 2)
#: the -1/0/+1 nudge of a score around its level, by a hash
NUDGES = (-1, 0, 0, 0, 1)
GARBAGE_KINDS = ("prose", "out_of_range", "truncated")

#: how a quoting judge opens the quote of the response it judged
QUOTE_OPENING = "The response reads, in full:"


def stable_hash(*parts: str) -> int:
    """A 64-bit hash of ``parts`` that is the same in every process (no hash seed)."""
    digest = hashlib.blake2b("\x1f".join(parts).encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "big")


def unit(*parts: str) -> float:
    """A number in (0, 1) from a hash of ``parts`` (never exactly 0 or 1)."""
    return (stable_hash(*parts) + 0.5) / 2**64


_STANDARD = NormalDist()


def gaussian(*parts: str) -> float:
    """A standard normal number from a hash of ``parts``."""
    return _STANDARD.inv_cdf(unit(*parts))


__all__ = ["canonical", "judged_words", "word_count"]  # the words a length preference counts


def content_key(response: str, reference: str | None) -> str:
    """What a judgment's draws are keyed on: the canonical texts of the response and the
    reference (``rubrics.probes.canonical``), so a probe's twin of a response (padded,
    restyled, injected, raw or neutralized by a prompt, its criteria in any order) draws
    exactly what its original draws."""
    return f"{canonical(response)}\x1e{canonical(reference or '')}"


def trait_shift(
    traits: JudgeTraits, words: int, noise_parts: tuple[str, ...], family: str | None = None
) -> float:
    """What ``traits`` add to a judged level, before rounding: noise (a standard normal
    from a hash of ``noise_parts``, times ``traits.noise``), the length preference and
    the self-preference (when ``family``, the response's, is the judge's); the bias is
    not included (a comparison's two sides share it)."""
    shift = 0.0
    if traits.noise:
        shift += traits.noise * gaussian("noise", *noise_parts)
    if traits.length_preference:
        shift += traits.length_preference * math.log2(max(words, 1) / 100)
    if traits.self_preference and family is not None and family == traits.family:
        shift += traits.self_preference
    return shift


def judged_value(
    level: float,
    traits: JudgeTraits,
    words: int,
    seed_parts: tuple[str, ...],
    family: str | None = None,
) -> float:
    """The unrounded score a judge gives a response of ``level`` (1..5, fractions allowed)
    with ``words`` words on one criterion: the level, the judge's -1/0/+1 nudge, its
    bias, its noise, its length preference and its self-preference when ``family`` (the
    response's model family) is its own (:class:`simulator.config.JudgeTraits`).
    ``seed_parts`` identify the judgment: ``(seed, judge, content, criterion)``, the seed
    being ``"S"`` or ``"S/R"`` with a request's own seed R and the content
    :func:`content_key`."""
    value = level + NUDGES[stable_hash("nudge", *seed_parts) % len(NUDGES)]
    if traits.neutral:
        return value
    return value + traits.bias + trait_shift(traits, words, seed_parts, family)


def judged_score(
    level: float,
    traits: JudgeTraits,
    words: int,
    seed_parts: tuple[str, ...],
    family: str | None = None,
) -> int:
    """The 1..5 score a simulated judge gives (the server's own answers come from here):
    :func:`judged_value`, rounded stochastically (its floor, plus one with probability
    its fraction, by a hash of ``seed_parts``: the expected score is the value) and
    clamped to 1..5. Pure and fast, so a benchmark can score many simulated judgments
    in-process and get what the server would answer."""
    value = judged_value(level, traits, words, seed_parts, family)
    score = math.floor(value)
    if value > score and unit("round", *seed_parts) < value - score:
        score += 1
    return min(5, max(1, score))


def _weighted(h: int, weights: Sequence[int]) -> int:
    """Index into ``weights`` chosen by the hash value ``h``."""
    x = h % sum(weights)
    for i, w in enumerate(weights):
        if x < w:
            return i
        x -= w
    return len(weights) - 1  # pragma: no cover - unreachable


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


def quality_of(response: str, reference: str | None, config: SimConfig) -> int:
    """:func:`quality` of ``response`` given the ``reference`` answer (None: none). A
    response a simulated model under test generated carries its level in its opening
    (``simulator.generate.signature``): that level, whatever the reference."""
    response = canonical(response)  # a twin's level is its original's
    signed = generate.level_of(response)
    if signed is not None:
        return signed
    u = stable_hash("quality", str(config.seed), response) % 10_000 / 10_000
    ref_words = _words(reference) if reference else set()
    if not ref_words:
        return 1 + _weighted(stable_hash("quality", str(config.seed), response), _QUALITY_WEIGHTS)
    recall = len(ref_words & _words(response)) / len(ref_words)
    return min(5, max(1, 1 + round(4 * (0.55 * recall + 0.45 * u))))


def criterion_level(
    response: str, reference: str | None, criterion: str, config: SimConfig
) -> float:
    """The level of ``response`` on ``criterion``: its own level on that criterion when
    its signature gives one (``SimConfig.skill_levels``), else :func:`quality_of`."""
    own = generate.skill_levels_of(canonical(response)).get(criterion)
    return own if own is not None else quality_of(response, reference, config)


def injection_granted(response: str, traits: JudgeTraits, seed: str, model: str) -> bool:
    """Whether the judge ``model`` grants what ``response`` (raw or as a prompt shows it)
    claims by an injection: with probability ``traits.injection``, by a hash of the
    response's canonical text and the kinds of injection it carries."""
    if traits.injection <= 0:
        return False
    kinds = injections_in(response)
    if not kinds:
        return False
    return unit("inject", seed, model, canonical(response), *kinds) < traits.injection


def garbage_kind(prompt: str, model: str, config: SimConfig) -> str:
    """Which kind of malformed answer this request gets when it gets one."""
    return GARBAGE_KINDS[
        stable_hash("garbage", str(config.seed), model, prompt) % len(GARBAGE_KINDS)
    ]
