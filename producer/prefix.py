"""The prompt prefix the calls of one judge with one set of criteria share, as a
provider's prompt cache would serve it (the batch + cache estimates of
``producer.estimate`` and ``producer.sampling``). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from flask_eval.core.models import CACHE_MIN_TOKENS, model_info
from flask_eval.rubrics.messages import text_of
from flask_eval.rubrics.prompt import Message

#: the shortest prompt prefix most models' caches serve: a model's own minimum is in the
#: model table (``cache_min_tokens`` in core/models.toml: 1,024 for most, 2,048 for Claude
#: Haiku 3.5 and Gemini 2.5 Pro, 4,096 for Claude Haiku 4.5 and Opus 4.5 and Gemini 3
#: Pro); below it, an estimate counts no cached tokens
MIN_CACHED_PREFIX = CACHE_MIN_TOKENS
#: OpenAI caches a prefix in steps of 128 tokens: an estimate rounds down to one
CACHE_STEP = 128

#: one rendered call: its messages as (role, content) pairs
Rendered = tuple[tuple[str, str], ...]


def as_rendered(messages: Sequence[Message]) -> Rendered:
    return tuple((m["role"], text_of(m)) for m in messages)


def _common_tokens(low: Rendered, high: Rendered) -> int:
    """The tokens of the common prefix of two rendered calls: whole messages while they
    are equal, then the common start of the first that differs (same role only); one
    token per 4 characters, rounded down, the messages' own overhead not counted."""
    chars = 0
    for (role_a, text_a), (role_b, text_b) in zip(low, high, strict=False):
        if role_a != role_b:
            break
        if text_a != text_b:
            n = 0
            for x, y in zip(text_a, text_b, strict=False):
                if x != y:
                    break
                n += 1
            chars += n
            break
        chars += len(text_a)
    return chars // 4


def cache_minimum(spec: str) -> int:
    """The shortest prefix the prompt cache of the judge ``spec``'s model serves."""
    return model_info(spec.partition("@")[0]).cache_min_tokens


def _cacheable(tokens: int, minimum: int = MIN_CACHED_PREFIX) -> int:
    """The tokens of a prefix a provider would cache: 0 below ``minimum``, else rounded
    down to :data:`CACHE_STEP`."""
    return 0 if tokens < minimum else tokens - tokens % CACHE_STEP


def below_minimum(judge: str, shared: int, minimum: int) -> str:
    """The note of an estimate whose calls share a prefix of ``shared`` tokens that the
    judge's model does not cache (under its ``minimum``)."""
    return (
        f"{judge}: its calls share a prompt prefix of about {shared:,} tokens, under its "
        f"model's prompt-cache minimum of {minimum:,} tokens: +cache counts none of it cached"
    )


def shared_prefix_tokens(
    messages: Sequence[Sequence[Message]], minimum: int = MIN_CACHED_PREFIX
) -> int:
    """The estimated prompt tokens a provider's cache would serve to each of these calls
    (``messages``: each call's rendered messages; pass the calls of one judge with one set
    of criteria): the longest prefix of their rendered text that every one of them
    shares, 0 for fewer than two calls.

    Conservative, so that a cache estimate never promises more than the providers give:
    the prefix is the one common to *every* call of the group (the longest common prefix
    of a set is that of its least and greatest member in text order, which is how it is
    computed); tokens are counted at 4 characters each, rounded down; a prefix shorter
    than the model's ``minimum`` (:func:`cache_minimum`) counts 0 and a longer one is
    rounded down to :data:`CACHE_STEP` tokens.
    """
    if len(messages) < 2:
        return 0
    rendered = [as_rendered(m) for m in messages]
    return _cacheable(_common_tokens(min(rendered), max(rendered)), minimum)


@dataclass
class PrefixGroup:
    """The calls of one judge with one set of criteria still to pay for, as far as the
    cache estimate needs them: their count and tokens, and their least and greatest
    rendering (their common prefix is those two's); ``minimum``: the shortest prefix the
    judge's model caches (:func:`cache_minimum`)."""

    low: Rendered
    high: Rendered
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    minimum: int = MIN_CACHED_PREFIX

    def add(self, rendered: Rendered, prompt: int, completion: int) -> None:
        self.low, self.high = min(self.low, rendered), max(self.high, rendered)
        self.calls += 1
        self.prompt_tokens += prompt
        self.completion_tokens += completion

    @property
    def shared_tokens(self) -> int:
        """The tokens of the prefix the calls share, cached or not."""
        return 0 if self.calls < 2 else _common_tokens(self.low, self.high)

    @property
    def prefix_tokens(self) -> int:
        """Of :attr:`shared_tokens`, those the model's cache would serve."""
        return _cacheable(self.shared_tokens, self.minimum)

    @property
    def short_prefix(self) -> int:
        """:attr:`shared_tokens` where most models would cache them but this model's
        higher minimum leaves them uncached, else 0."""
        shared = self.shared_tokens
        return shared if MIN_CACHED_PREFIX <= shared < self.minimum else 0
