"""What a judge's calls cost: the price it was given, else a price known for its model,
else none (its cost is unknown: never taken as free).

A judge's price is settled once, when its run is planned (:func:`settle_prices`), and
stored with the run: the workers meter every paid call at that price, and a price table
that changes later never changes what a run already costs. A price given in a judges
file (``price: {input: USD, output: USD}``, per million tokens; ``0`` for a free local
judge) always wins.

:data:`KNOWN_PRICES` is the table of known prices, by ``provider/model``
(:mod:`producer.price_table`: list prices transcribed from the providers' pricing pages,
dated, with their sources; dated snapshot ids it names resolve to their model's row). It
applies only to a judge on its provider's own API (a spec without ``@BASE_URL``: a
server elsewhere, a proxy or a local model may charge anything).

A judges file's price may be partial (:func:`price_of`): for a model the table knows,
the fields it gives replace the table's, field by field, and the others are the
table's (``price: {batch: 1}`` says "no batch discount on my account"; ``price: {input:
2}``, a negotiated input price, keeps the table's cache and batch prices). For a model
the table does not know, ``input`` and ``output`` are both required: a missing one
would count its tokens as free; the cache prices then default to ``input`` (no cache
discount assumed) and ``batch`` to 1 (no batch discount assumed), so a cost is never
underestimated for want of a field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from flask_eval.core.errors import ConfigError
from flask_eval.core.text import clip
from flask_eval.core.types import JudgeConfig, JudgeSpec, Price
from flask_eval.producer.price_table import ALIASES, PRICES

__all__ = [
    "KNOWN_PRICES",
    "PRICE_KEYS",
    "PriceError",
    "check_budget_prices",
    "known_price",
    "price_of",
    "settle_prices",
    "unpriced",
    "unpriced_reason",
    "unpriced_reasons",
]

#: ``provider/model`` (a dated snapshot id too, where :data:`price_table.ALIASES` names
#: it) -> its list price in USD per million tokens
KNOWN_PRICES: Mapping[str, Price] = {**PRICES, **{a: PRICES[m] for a, m in ALIASES.items()}}

#: the fields of a judges file's ``price`` mapping
PRICE_KEYS = ("input", "output", "cached_input", "cache_write", "batch")
_SHAPE = (
    "`price` must be a mapping of input, output, cached_input, cache_write (USD per 1M "
    "tokens) and batch (the batch API's multiplier, e.g. 0.5)"
)

#: how a user gives a judge its price
HOW_TO_PRICE = (
    "give each judge `price: {input: USD, output: USD}` (per million tokens; 0 for a free "
    "local judge) in a --judges file"
)


def known_price(spec: str, table: Mapping[str, Price] | None = None) -> Price | None:
    """The known price (in ``table``, default :data:`KNOWN_PRICES`) of the judge ``spec``
    calls; None: not known, or not its provider's own API."""
    parsed = JudgeSpec.parse(spec)
    if parsed.base_url is not None:
        return None
    return (KNOWN_PRICES if table is None else table).get(parsed.default_name)


class PriceError(ConfigError):
    """A judges file's ``price`` is wrong; ``key`` names the field at fault (None: the
    mapping itself)."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


def price_of(value: Any, spec: str, table: Mapping[str, Price] | None = None) -> Price | None:
    """The price a judges file gives the judge ``spec`` (``value``: its ``price``
    mapping; None: none given), completed from the known price of its model (see the
    module's docstring); PriceError saying what is wrong."""
    if value is None:
        return None  # no price given: settle_prices may know one
    if not isinstance(value, dict) or any(k not in PRICE_KEYS for k in value):
        raise PriceError(_SHAPE)
    given: dict[str, float] = {}
    for key, v in value.items():
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            ok = False
        else:
            ok = 0 < v <= 1 if key == "batch" else v >= 0
        if not ok:
            rule = "a number in (0, 1] (0.5: half price)" if key == "batch" else "a number >= 0"
            raise PriceError(f"`price.{key}` must be {rule}, got {clip(v)}", key)
        given[key] = float(v)
    known = known_price(spec, table)
    if known is not None:
        return replace(known, **given)
    missing = [k for k in ("input", "output") if k not in given]
    if missing:
        raise PriceError(
            f"`price.{missing[0]}` is missing: {clip(spec, 80)} has no known price to fill "
            "it from; give both input and output (0 for a free local judge)"
        )
    return Price(**given)


def settle_prices(
    judges: Sequence[JudgeConfig], table: Mapping[str, Price] | None = None
) -> list[JudgeConfig]:
    """``judges``, each without a price of its own given the known price of its model
    (if any), as they are stored with a run."""
    return [
        j if j.price is not None else replace(j, price=known_price(j.spec, table)) for j in judges
    ]


def unpriced(judges: Sequence[JudgeConfig]) -> list[str]:
    """The names of the judges whose cost is unknown (no price)."""
    return [j.name for j in judges if j.price is None]


def unpriced_reason(judge: JudgeConfig) -> str | None:
    """Why ``judge``'s cost is unknown, in a few words (None: it has a price). A model
    the price table knows, called through another server (``@BASE_URL``), is unpriced by
    design: that server may charge anything."""
    if judge.price is not None:
        return None
    try:
        spec = JudgeSpec.parse(judge.spec)
    except ValueError:
        return "no price"
    if spec.base_url is not None and KNOWN_PRICES.get(spec.default_name) is not None:
        return (
            f"no price: {spec.default_name} behind {spec.base_url} is not priced from "
            "the list prices (another server may charge anything)"
        )
    return f"no price known for {spec.default_name}"


def unpriced_reasons(judges: Sequence[JudgeConfig]) -> dict[str, str]:
    """Judge name -> why its cost is unknown, for the judges without a price."""
    return {j.name: why for j in judges if (why := unpriced_reason(j)) is not None}


def check_budget_prices(judges: Sequence[JudgeConfig], max_cost: float | None) -> None:
    """ConfigError when a cost budget (``--max-cost``) is set and some judge has no price:
    its calls would count as free and the budget would not hold."""
    names = unpriced(judges)
    if max_cost is None or not names:
        return
    which = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    judge, has = ("judges", "have") if len(names) > 1 else ("judge", "has")
    raise ConfigError(
        f"--max-cost {max_cost:g} needs a price for every judge: {judge} {which} {has} none "
        f"(their calls would count as free); {HOW_TO_PRICE}"
    )
