"""The simulated prompt caches: what each provider reads and writes, deterministically."""

from __future__ import annotations

from flask_eval.simulator.prompt_cache import (
    PromptCache,
    anthropic_cached,
    gemini_cached,
    openai_cached,
)

#: 4 characters a token (the simulator's count)
PREFIX = "p" * (4 * 1500)  # 1,500 tokens


def test_openai_caches_repeated_prefixes_from_1024_tokens_in_steps_of_128() -> None:
    cache = PromptCache()
    assert openai_cached(cache, "k", PREFIX + "first instance") == 0  # nothing seen yet
    # the longest step seen before: 1024 + 3 * 128 = 1408 <= 1500 < 1536
    assert openai_cached(cache, "k", PREFIX + "second instance") == 1408
    assert openai_cached(cache, "other key", PREFIX + "x") == 0  # per model and key
    short = "s" * (4 * 1000)
    assert openai_cached(cache, "k", short) == openai_cached(cache, "k", short) == 0


def test_anthropic_caches_only_up_to_a_breakpoint_and_from_its_minimum() -> None:
    cache = PromptCache()
    end = len(PREFIX)
    first = anthropic_cached(cache, "k", "claude-sonnet-4-5", PREFIX + "one", [end])
    second = anthropic_cached(cache, "k", "claude-sonnet-4-5", PREFIX + "two", [end])
    assert first == (0, 1500) and second == (1500, 0)  # (read, written)
    assert anthropic_cached(cache, "k", "claude-sonnet-4-5", PREFIX + "three", []) == (0, 0)
    # Haiku 4.5 needs 4,096 tokens (Haiku 3.5: 2,048): 1,500 are not cached, however
    # often they repeat
    for model in ("claude-haiku-4-5", "claude-haiku-4-5", "claude-3-5-haiku-20241022"):
        assert anthropic_cached(cache, "k", model, PREFIX + "x", [end]) == (0, 0)
    # a longer breakpoint after a cached one: read the known part, write the rest
    longer = PREFIX + "q" * 4 * 100
    assert anthropic_cached(cache, "k", "claude-sonnet-4-5", longer + "z", [end, len(longer)]) == (
        1500,
        100,
    )


def test_gemini_caches_implicitly_from_1024_tokens_for_flash_and_2048_for_pro() -> None:
    cache = PromptCache()
    for model, cached in (("gemini-2.5-flash", 1408), ("gemini-2.5-pro", 0)):
        assert gemini_cached(cache, "k", model, PREFIX + "a") == 0
        assert gemini_cached(cache, "k", model, PREFIX + "b") == cached


def test_the_cache_is_bounded_and_forgets_the_least_recently_used() -> None:
    cache = PromptCache(capacity=3)  # one prompt of 1,500 tokens leaves 4 step hashes
    openai_cached(cache, "k", PREFIX + "a")
    assert len(cache._seen) == 3
    assert openai_cached(cache, "k", PREFIX + "b") == 1408  # the longest steps were kept
    assert openai_cached(PromptCache(capacity=0), "k", PREFIX) == 0  # off


def test_each_model_caches_from_its_own_minimum_of_the_model_table() -> None:
    """Claude Opus 4.5 and Haiku 4.5 and Gemini 3 Pro cache from 4,096 tokens: a 3,000-token
    prefix the other models of their provider serve from the cache is not theirs."""
    long = "p" * (4 * 3000)
    end = len(long)
    for model, read in (
        ("claude-sonnet-4-5", 3000),
        ("claude-opus-4-5", 0),
        ("claude-haiku-4-5", 0),
    ):
        cache = PromptCache()
        anthropic_cached(cache, "k", model, long + "a", [end])
        assert anthropic_cached(cache, "k", model, long + "b", [end])[0] == read, model
    for model, cached in (("gemini-3-flash-preview", 2944), ("gemini-3-pro-preview", 0)):
        cache = PromptCache()
        gemini_cached(cache, "k", model, long + "a")
        assert gemini_cached(cache, "k", model, long + "b") == cached, model
