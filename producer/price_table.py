"""The list prices of the judge models flask-eval knows (USD per million tokens), dated,
with sources: the ``price`` of each row of the model table (``core/models.toml``, read by
:mod:`core.models`), which also says where each price was transcribed from and when.

Prices change: check them against the pages in :data:`SOURCES` before relying on them,
and give a judge its own ``price:`` in a judges file where they differ (it wins over this
table, field by field: see :func:`producer.prices.price_of`).

What each field means, per provider:

- ``input`` / ``output``: an uncached prompt token / a completion token (a reasoning
  model's thinking tokens are completion tokens).
- ``cached_input``: a prompt token read from the provider's prompt cache (from each
  model's ``cache_min_tokens``). OpenAI and Gemini cache repeated prefixes by themselves;
  Anthropic reads the blocks marked ``cache_control``.
- ``cache_write``: a prompt token written to the cache: the input price for OpenAI and
  Gemini's implicit cache, 1.25x the input price for Anthropic's 5-minute cache (its
  1-hour cache, 2x, is not used by flask-eval).
- ``batch``: the multiplier of a call made through the provider's batch API: 0.5 on all
  three.

**Model ids.** The table is keyed by ``provider/model`` as a judge spec names it. A
dated snapshot id (``claude-sonnet-4-5-20250929``, ``gpt-5.5-2026-04-23``) is priced only
when the table names it as an alias: snapshots of one model have not always had one price
(``gpt-4o-2024-05-13`` cost $5/$15, the later ``gpt-4o`` snapshots $2.50/$10), so a date
is never stripped by rule. An id the table does not know has no known price (its cost is
unknown, never free) until a judges file gives one.
"""

from __future__ import annotations

from collections.abc import Mapping

from flask_eval.core.models import table
from flask_eval.core.types import Price

__all__ = ["ALIASES", "AS_OF", "PRICES", "SOURCES"]

#: when the table was last checked against its sources (each row has its own
#: ``price_as_of``)
AS_OF = table().checked.isoformat()

#: provider -> its pricing and deprecation pages
SOURCES: Mapping[str, Mapping[str, str]] = table().sources

#: ``provider/model`` -> its list price (USD per million tokens)
PRICES: Mapping[str, Price] = {
    key: row.price for key, row in table().models.items() if row.price is not None
}

#: a dated snapshot id or alias people pass -> the row of :data:`PRICES` it is billed at
ALIASES: Mapping[str, str] = {a: m for a, m in table().aliases.items() if m in PRICES}
