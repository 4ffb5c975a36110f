"""What a judge costs: its own price, else a known one, else unknown (never free)."""

from __future__ import annotations

import pytest

from flask_eval.core.errors import ConfigError
from flask_eval.core.types import JudgeConfig, Price
from flask_eval.producer.prices import check_budget_prices, known_price, settle_prices

TABLE = {"openai/gpt-4o": Price(2.5, 10.0)}


def test_a_known_price_applies_to_the_providers_own_api_only() -> None:
    assert known_price("openai/gpt-4o", TABLE) == Price(2.5, 10.0)
    assert known_price("openai/gpt-4o@http://127.0.0.1:8000/v1", TABLE) is None
    assert known_price("openai/gpt-5", TABLE) is None


def test_a_price_given_wins_and_a_free_judge_is_priced() -> None:
    given = JudgeConfig("a", "openai/gpt-4o", price=Price(1.0, 1.0))
    free = JudgeConfig("b", "openai/local@http://127.0.0.1:8000/v1", price=Price())
    bare = JudgeConfig("c", "openai/gpt-4o")
    settled = settle_prices([given, free, bare], TABLE)
    assert [j.price for j in settled] == [Price(1.0, 1.0), Price(), Price(2.5, 10.0)]
    check_budget_prices(settled, 1.0)  # all priced: no error
    assert settled[1].cost(1000, 1000) == 0.0 and JudgeConfig("d", "x/y").cost(10, 10) == 0.0


def test_a_budget_needs_every_price() -> None:
    judges = [JudgeConfig("a", "openai/m"), JudgeConfig("b", "openai/n")]
    check_budget_prices(judges, None)  # no budget: unknown costs are said, not refused
    with pytest.raises(
        ConfigError, match="--max-cost 2 needs a price for every judge: judges a, b have none"
    ):
        check_budget_prices(judges, 2.0)


def test_cached_and_cache_written_tokens_and_batches_are_priced_as_their_share() -> None:
    price = Price(3.0, 15.0, cached_input=0.3, cache_write=3.75, batch=0.5)
    # 1M prompt tokens: 600k read from the cache, 100k written to it, 300k plain
    live = price.cost(1_000_000, 0, cached_tokens=600_000, cache_write_tokens=100_000)
    assert live == pytest.approx(0.3 * 3.0 + 0.6 * 0.3 + 0.1 * 3.75)
    assert price.cost(0, 1_000_000, batch=True) == pytest.approx(7.5)
    # without cache prices a cached token costs what any prompt token does
    assert Price(2.0, 0.0).cost(1_000_000, 0, cached_tokens=500_000) == pytest.approx(2.0)
    # counts a provider overstates never make a call cheaper than nothing or pay twice
    assert price.cost(100, 0, cached_tokens=500, cache_write_tokens=500) == pytest.approx(
        100 * 0.3 / 1_000_000
    )
