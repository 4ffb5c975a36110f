"""What a judge's calls cost: the price it was given, else a price known for its model,
else none (its cost is unknown: never taken as free).

A judge's price is settled once, when its run is planned (:func:`settle_prices`), and
stored with the run: the workers meter every paid call at that price, and a price table
that changes later never changes what a run already costs. A price given in a judges
file (``price: {input: USD, output: USD}``, per million tokens; ``0`` for a free local
judge) always wins.

:data:`KNOWN_PRICES` is the table of known prices, by ``provider/model``; it applies
only to a judge on its provider's own API (a spec without ``@BASE_URL``: a server
elsewhere, a proxy or a local model may charge anything). It is empty until the
price-table issue fills it; nothing else changes when it does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from flask_eval.core.errors import ConfigError
from flask_eval.core.types import JudgeConfig, JudgeSpec, Price

__all__ = ["KNOWN_PRICES", "check_budget_prices", "known_price", "settle_prices", "unpriced"]

#: ``provider/model`` -> its list price in USD per million tokens (input, output)
KNOWN_PRICES: Mapping[str, Price] = {}

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
