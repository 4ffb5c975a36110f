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
    # Haiku needs 2,048 tokens: 1,500 are not cached, however often they repeat
    for _ in range(2):
        assert anthropic_cached(cache, "k", "claude-haiku-4-5", PREFIX + "x", [end]) == (0, 0)
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
