"""The list prices of the major judge models (USD per million tokens), dated, with sources.

Transcribed by hand from the providers' pricing pages as they stood in **2025-11** (this
machine has no internet: they were not fetched when the table was written). Prices
change: check them against the pages before relying on them, and give a judge its own
``price:`` in a judges file where they differ (it wins over this table, field by field:
see :func:`producer.prices.price_of`).

=========  ==============================================  ===========================
provider   source (pricing page)                           as of
=========  ==============================================  ===========================
openai     https://openai.com/api/pricing/ and             2025-11
           https://platform.openai.com/docs/pricing
anthropic  https://www.anthropic.com/pricing and           2025-11
           https://docs.anthropic.com/en/docs/about-claude/pricing
gemini     https://ai.google.dev/gemini-api/docs/pricing   2025-11
=========  ==============================================  ===========================

What each column means, per provider:

- ``input`` / ``output``: an uncached prompt token / a completion token.
- ``cached_input``: a prompt token read from the provider's prompt cache. OpenAI caches
  identical prompt prefixes of 1,024 tokens or more by itself; Anthropic reads the blocks
  marked ``cache_control`` at 0.1x the input price; Gemini 2.5 caches implicitly.
- ``cache_write``: a prompt token written to the cache. OpenAI and Gemini's implicit
  cache charge nothing extra (the input price); Anthropic's 5-minute cache charges 1.25x
  the input price (its 1-hour cache, 2x, is not used by flask-eval).
- ``batch``: the multiplier of a call made through the provider's batch API (OpenAI's
  Batch API, Anthropic's Message Batches, Gemini's batch mode): 0.5 on all three.

Gemini 2.5 Pro charges more for prompts over 200k tokens; the table holds the price of
prompts up to 200k tokens, which is every judge prompt flask-eval renders.

**Model ids.** The table is keyed by ``provider/model`` as a judge spec names it. A
dated snapshot id (``claude-sonnet-4-5-20250929``, ``gpt-4o-2024-08-06``) is priced only
when :data:`ALIASES` names it: snapshots of one model have not always had one price
(``gpt-4o-2024-05-13`` cost $5/$15, the later ``gpt-4o`` snapshots $2.50/$10), so a date
is never stripped by rule. An id the table does not know has no known price (its cost is
unknown, never free) until a judges file gives one.
"""

from __future__ import annotations

from collections.abc import Mapping

from flask_eval.core.types import Price

__all__ = ["ALIASES", "AS_OF", "PRICES", "SOURCES"]

#: when the table was transcribed from the pages in :data:`SOURCES`
AS_OF = "2025-11"

#: provider -> its pricing pages
SOURCES: Mapping[str, tuple[str, ...]] = {
    "openai": ("https://openai.com/api/pricing/", "https://platform.openai.com/docs/pricing"),
    "anthropic": (
        "https://www.anthropic.com/pricing",
        "https://docs.anthropic.com/en/docs/about-claude/pricing",
    ),
    "gemini": ("https://ai.google.dev/gemini-api/docs/pricing",),
}

#: every provider's batch APIs charge half the price of the same calls made one by one
BATCH = 0.5


def _openai(input_: float, output: float, cached: float) -> Price:
    """OpenAI: a cache write costs the input price."""
    return Price(input_, output, cached_input=cached, cache_write=input_, batch=BATCH)


def _anthropic(input_: float, output: float, write: float, read: float) -> Price:
    """Anthropic: 5-minute cache writes at 1.25x input, reads at 0.1x input."""
    return Price(input_, output, cached_input=read, cache_write=write, batch=BATCH)


def _gemini(input_: float, output: float, cached: float) -> Price:
    """Gemini (prompts <= 200k tokens): implicit cache writes cost the input price."""
    return Price(input_, output, cached_input=cached, cache_write=input_, batch=BATCH)


#: ``provider/model`` -> its list price (USD per million tokens), as of :data:`AS_OF`
PRICES: Mapping[str, Price] = {
    # OpenAI
    "openai/gpt-4o": _openai(2.50, 10.00, 1.25),
    "openai/gpt-4o-mini": _openai(0.15, 0.60, 0.075),
    "openai/gpt-4.1": _openai(2.00, 8.00, 0.50),
    "openai/gpt-4.1-mini": _openai(0.40, 1.60, 0.10),
    "openai/gpt-4.1-nano": _openai(0.10, 0.40, 0.025),
    "openai/o3": _openai(2.00, 8.00, 0.50),
    "openai/o4-mini": _openai(1.10, 4.40, 0.275),
    "openai/gpt-5": _openai(1.25, 10.00, 0.125),
    "openai/gpt-5-mini": _openai(0.25, 2.00, 0.025),
    "openai/gpt-5-nano": _openai(0.05, 0.40, 0.005),
    # Anthropic
    "anthropic/claude-opus-4-1": _anthropic(15.00, 75.00, 18.75, 1.50),
    "anthropic/claude-opus-4-5": _anthropic(5.00, 25.00, 6.25, 0.50),
    "anthropic/claude-sonnet-4-5": _anthropic(3.00, 15.00, 3.75, 0.30),
    "anthropic/claude-sonnet-4": _anthropic(3.00, 15.00, 3.75, 0.30),
    "anthropic/claude-haiku-4-5": _anthropic(1.00, 5.00, 1.25, 0.10),
    "anthropic/claude-3-5-haiku": _anthropic(0.80, 4.00, 1.00, 0.08),
    # Gemini
    "gemini/gemini-2.5-pro": _gemini(1.25, 10.00, 0.125),
    "gemini/gemini-2.5-flash": _gemini(0.30, 2.50, 0.03),
    "gemini/gemini-2.5-flash-lite": _gemini(0.10, 0.40, 0.01),
}

#: a dated snapshot id or alias people pass -> the row of :data:`PRICES` it is billed at
ALIASES: Mapping[str, str] = {
    "openai/gpt-4o-2024-08-06": "openai/gpt-4o",
    "openai/gpt-4o-2024-11-20": "openai/gpt-4o",
    "openai/gpt-4o-mini-2024-07-18": "openai/gpt-4o-mini",
    "openai/gpt-4.1-2025-04-14": "openai/gpt-4.1",
    "openai/gpt-4.1-mini-2025-04-14": "openai/gpt-4.1-mini",
    "openai/gpt-4.1-nano-2025-04-14": "openai/gpt-4.1-nano",
    "openai/o3-2025-04-16": "openai/o3",
    "openai/o4-mini-2025-04-16": "openai/o4-mini",
    "openai/gpt-5-2025-08-07": "openai/gpt-5",
    "openai/gpt-5-mini-2025-08-07": "openai/gpt-5-mini",
    "openai/gpt-5-nano-2025-08-07": "openai/gpt-5-nano",
    "anthropic/claude-opus-4-1-20250805": "anthropic/claude-opus-4-1",
    "anthropic/claude-opus-4-5-20251101": "anthropic/claude-opus-4-5",
    "anthropic/claude-sonnet-4-5-20250929": "anthropic/claude-sonnet-4-5",
    "anthropic/claude-sonnet-4-20250514": "anthropic/claude-sonnet-4",
    "anthropic/claude-sonnet-4-0": "anthropic/claude-sonnet-4",
    "anthropic/claude-haiku-4-5-20251001": "anthropic/claude-haiku-4-5",
    "anthropic/claude-3-5-haiku-20241022": "anthropic/claude-3-5-haiku",
    "anthropic/claude-3-5-haiku-latest": "anthropic/claude-3-5-haiku",
}
