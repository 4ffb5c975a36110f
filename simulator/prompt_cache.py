"""The simulated providers' prompt caches: which prompt tokens a request reads from a
cache, or writes to one, as each provider documents it (pure, no I/O).

A prefix is cached per model and API key (``scope``); it is known by a hash of its text,
and the cache keeps the most recently used :data:`DEFAULT_CAPACITY` hashes (memory stays
bounded; the oldest are forgotten, as a provider's cache expires). Tokens are the
simulator's own count (``simulator.answer.estimate_tokens``: four characters a token),
so a prefix of ``n`` tokens is the first ``4 n`` characters of the prompt.

Each model caches from its own minimum prefix, the model table's ``cache_min_tokens``
(core/models.toml: 1,024 tokens for most; 2,048 for Claude Haiku 3.5 and Gemini 2.5
Pro; 4,096 for Claude Haiku 4.5, Claude Opus 4.5 and Gemini 3 Pro).

- OpenAI (https://platform.openai.com/docs/guides/prompt-caching): prompts of the
  minimum or more; the cached prefix is the longest one seen before, in steps of 128
  tokens from the minimum (``usage.prompt_tokens_details.cached_tokens``).
- Anthropic (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching): only
  a prefix that ends at a ``cache_control`` breakpoint, and only from the minimum. The
  longest breakpoint seen before is read (``cache_read_input_tokens``); what lies beyond
  it up to the last breakpoint is written (``cache_creation_input_tokens``);
  ``input_tokens`` is the rest.
- Gemini implicit caching (https://ai.google.dev/gemini-api/docs/caching): from the
  minimum; Google states no granularity, so the simulator takes OpenAI's 128-token
  steps (``usageMetadata.cachedContentTokenCount``).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from .config import CACHE_PREFIXES
from .models import info
from .wire import Dialect, ParsedRequest

DEFAULT_CAPACITY = CACHE_PREFIXES
CHARS_PER_TOKEN = 4  # simulator.answer.estimate_tokens
STEP = 128


def tokens(chars: int) -> int:
    """The tokens of a prefix of ``chars`` characters (at least one for any text)."""
    return -(-chars // CHARS_PER_TOKEN)


class PromptCache:
    """The prefixes seen, by scope (model and API key), least recently used forgotten."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._seen: OrderedDict[bytes, None] = OrderedDict()

    def _digests(self, scope: str, text: str, ends: Iterable[int]) -> list[bytes]:
        """The hash of ``text[:end]`` for each of ``ends`` (ascending), in one pass."""
        h = hashlib.blake2b(scope.encode("utf-8", "surrogatepass") + b"\x1f", digest_size=16)
        out, at = [], 0
        for end in ends:
            h.update(text[at:end].encode("utf-8", "surrogatepass"))
            at = end
            out.append(h.copy().digest())
        return out

    def _hit(self, digest: bytes) -> bool:
        if digest in self._seen:
            self._seen.move_to_end(digest)
            return True
        return False

    def _remember(self, digests: Iterable[bytes]) -> None:
        for digest in digests:
            self._seen[digest] = None
            self._seen.move_to_end(digest)
        while len(self._seen) > self.capacity:
            self._seen.popitem(last=False)

    def implicit(self, scope: str, prompt: str, minimum: int) -> int:
        """The tokens of ``prompt`` read from the cache where the provider finds a repeated
        prefix by itself (OpenAI, Gemini): the longest prefix of ``minimum`` + k * 128
        tokens seen before; every such prefix of this prompt is remembered."""
        if self.capacity <= 0:
            return 0
        total = tokens(len(prompt))
        sizes = list(range(minimum, total + 1, STEP))
        digests = self._digests(scope, prompt, (n * CHARS_PER_TOKEN for n in sizes))
        cached = max((n for n, d in zip(sizes, digests, strict=True) if self._hit(d)), default=0)
        self._remember(digests)
        return cached

    def explicit(
        self, scope: str, prompt: str, breakpoints: Sequence[int], minimum: int
    ) -> tuple[int, int]:
        """(tokens read, tokens written) where only the prefixes ending at
        ``breakpoints`` (character offsets in ``prompt``) are cached (Anthropic); a
        prefix shorter than ``minimum`` tokens is not cached at all."""
        if self.capacity <= 0:
            return 0, 0
        ends = sorted({b for b in breakpoints if 0 < b <= len(prompt)})
        ends = [b for b in ends if tokens(b) >= minimum]
        if not ends:
            return 0, 0
        digests = self._digests(scope, prompt, ends)
        hits = [b for b, d in zip(ends, digests, strict=True) if self._hit(d)]
        read = tokens(max(hits)) if hits else 0
        self._remember(digests)
        return read, tokens(ends[-1]) - read


def openai_cached(cache: PromptCache, scope: str, prompt: str, model: str = "") -> int:
    """OpenAI's ``cached_tokens`` for ``prompt`` sent to ``model``."""
    return cache.implicit(scope, prompt, info("openai", model).cache_min_tokens)


def gemini_cached(cache: PromptCache, scope: str, model: str, prompt: str) -> int:
    """Gemini's ``cachedContentTokenCount`` for ``prompt`` sent to ``model``."""
    return cache.implicit(scope, prompt, info("gemini", model).cache_min_tokens)


def anthropic_cached(
    cache: PromptCache, scope: str, model: str, prompt: str, breakpoints: Sequence[int]
) -> tuple[int, int]:
    """Anthropic's (``cache_read_input_tokens``, ``cache_creation_input_tokens``)."""
    return cache.explicit(scope, prompt, breakpoints, info("anthropic", model).cache_min_tokens)


def usage(cache: PromptCache, dialect: Dialect, parsed: ParsedRequest, key: str) -> tuple[int, int]:
    """(prompt tokens read from the cache, written to it) of a request served in
    ``dialect`` with the API key ``key``; the cache remembers its prefixes."""
    scope = f"{dialect}\x1f{parsed.model}\x1f{key}"
    if dialect == "anthropic":
        return anthropic_cached(cache, scope, parsed.model, parsed.prompt, parsed.breakpoints)
    if dialect == "gemini":
        return gemini_cached(cache, scope, parsed.model, parsed.prompt), 0
    return openai_cached(cache, scope, parsed.prompt, parsed.model), 0
