"""How good the simulated judge finds a response (pure, no I/O): its 1..5 level
(:func:`quality_of`, from the reference answer's vocabulary it covers and a hash of its
text), the nudges that spread a judge's scores around it, and which malformed answer a
request gets when it gets one. Shared by the absolute answers (``simulator.answer``) and
the pairwise ones (``simulator.pairwise``)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from flask_eval.rubrics.protocol import NO_REFERENCE, REFERENCE_HEADING

from . import formats, generate
from .config import SimConfig

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
    signed = generate.level_of(response)
    if signed is not None:
        return signed
    u = stable_hash("quality", str(config.seed), response) % 10_000 / 10_000
    ref_words = _words(reference) if reference else set()
    if not ref_words:
        return 1 + _weighted(stable_hash("quality", str(config.seed), response), _QUALITY_WEIGHTS)
    recall = len(ref_words & _words(response)) / len(ref_words)
    return min(5, max(1, 1 + round(4 * (0.55 * recall + 0.45 * u))))


def garbage_kind(prompt: str, model: str, config: SimConfig) -> str:
    """Which kind of malformed answer this request gets when it gets one."""
    return GARBAGE_KINDS[
        stable_hash("garbage", str(config.seed), model, prompt) % len(GARBAGE_KINDS)
    ]
