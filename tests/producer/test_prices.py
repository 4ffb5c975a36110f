"""What a judge costs: its own price, else a known one, else unknown (never free)."""

from __future__ import annotations

import pytest

from flask_eval.core.errors import ConfigError
from flask_eval.core.types import JudgeConfig, Price
from flask_eval.producer.price_table import ALIASES, PRICES, SOURCES
from flask_eval.producer.prices import (
    KNOWN_PRICES,
    PriceError,
    check_budget_prices,
    known_price,
    price_of,
    settle_prices,
)

TABLE = {"openai/gpt-5.4": Price(2.5, 10.0)}


def test_a_known_price_applies_to_the_providers_own_api_only() -> None:
    assert known_price("openai/gpt-5.4", TABLE) == Price(2.5, 10.0)
    assert known_price("openai/gpt-5.4@http://127.0.0.1:8000/v1", TABLE) is None
    assert known_price("openai/gpt-5.5", TABLE) is None


def test_a_price_given_wins_and_a_free_judge_is_priced() -> None:
    given = JudgeConfig("a", "openai/gpt-5.4", price=Price(1.0, 1.0))
    free = JudgeConfig("b", "openai/local@http://127.0.0.1:8000/v1", price=Price())
    bare = JudgeConfig("c", "openai/gpt-5.4")
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


# -- the price table -------------------------------------------------------------------


def test_the_table_prices_each_providers_major_models_with_cache_and_batch_prices() -> None:
    gpt = known_price("openai/gpt-5.4")
    assert gpt == Price(2.5, 15.0, cached_input=0.25, cache_write=2.5, batch=0.5)
    sonnet = known_price("anthropic/claude-sonnet-4-5")
    assert sonnet == Price(3.0, 15.0, cached_input=0.3, cache_write=3.75, batch=0.5)
    flash = known_price("gemini/gemini-3-flash-preview")
    assert flash == Price(0.5, 3.0, cached_input=0.05, cache_write=0.5, batch=0.5)
    for provider in ("openai", "anthropic", "gemini"):
        rows = {k: p for k, p in KNOWN_PRICES.items() if k.startswith(f"{provider}/")}
        assert len(rows) >= 3 and provider in SOURCES
        for name, price in rows.items():  # reads are cheaper than writes, batches half
            assert price.cached_input is not None and price.cache_write is not None, name
            assert price.cached_input < price.input <= price.cache_write, name
            assert price.batch == 0.5 and price.output > price.input, name
    # Anthropic: a 5-minute cache write is 1.25x the input price, a read 0.1x
    for name, price in KNOWN_PRICES.items():
        if name.startswith("anthropic/"):
            assert price.cache_write == pytest.approx(1.25 * price.input), name
            assert price.cached_input == pytest.approx(0.1 * price.input), name


def test_a_dated_snapshot_id_is_priced_only_when_the_table_names_it() -> None:
    assert known_price("anthropic/claude-sonnet-4-5-20250929") == known_price(
        "anthropic/claude-sonnet-4-5"
    )
    assert known_price("openai/gpt-5.5-2026-04-23") == known_price("openai/gpt-5.5")
    assert set(ALIASES.values()) <= set(PRICES)
    # an older snapshot billed at another price is not guessed from its name
    assert known_price("openai/gpt-4o-2024-05-13") is None
    assert known_price("anthropic/claude-sonnet-4-5-20990101") is None
    # nor is a known model behind another server
    assert known_price("anthropic/claude-sonnet-4-5@http://127.0.0.1:9/v1") is None


# -- a judges file's price ---------------------------------------------------------------


def test_a_partial_price_of_a_known_model_fills_the_rest_from_the_table() -> None:
    no_discount = price_of({"batch": 1}, "anthropic/claude-haiku-4-5")
    assert no_discount == Price(1.0, 5.0, cached_input=0.1, cache_write=1.25, batch=1.0)
    negotiated = price_of({"input": 2}, "openai/gpt-5.4")
    assert negotiated == Price(2.0, 15.0, cached_input=0.25, cache_write=2.5, batch=0.5)
    assert price_of({}, "openai/gpt-5.4") == known_price("openai/gpt-5.4")
    assert price_of(None, "openai/gpt-5.4") is None  # none given: settled later


def test_a_price_of_an_unknown_model_needs_input_and_output_and_assumes_no_discount() -> None:
    full = price_of({"input": 1, "output": 2, "cached_input": 0.5}, "openai/x@http://h:1/v1")
    assert full == Price(1.0, 2.0, cached_input=0.5)
    assert full is not None and full.cost(10**6, 0, cache_write_tokens=10**6) == 1.0
    assert full.cost(0, 10**6, batch=True) == 2.0  # no batch discount unless given
    with pytest.raises(PriceError, match=r"`price.output` is missing: 'openai/x' has no known"):
        price_of({"input": 1}, "openai/x")
    assert price_of({"input": 0, "output": 0}, "openai/local@http://h:1/v1") == Price()


@pytest.mark.parametrize(
    ("value", "key", "message"),
    [
        ({"input": -1, "output": 1}, "input", "`price.input` must be a number >= 0, got -1"),
        ({"input": 1, "output": "ten"}, "output", "`price.output` must be a number >= 0"),
        ({"cached_input": True}, "cached_input", "`price.cached_input` must be a number"),
        ({"cache_write": float("nan")}, "cache_write", "`price.cache_write` must be"),
        ({"batch": 0}, "batch", "`price.batch` must be a number in (0, 1]"),
        (
            {"batch": 1.5},
            "batch",
            "`price.batch` must be a number in (0, 1] (0.5: half price), got 1.5",
        ),
        ({"input": 1, "discount": 2}, None, "`price` must be a mapping of input, output"),
        ([1, 2], None, "`price` must be a mapping"),
    ],
)
def test_bad_prices_say_which_field(value: object, key: str | None, message: str) -> None:
    with pytest.raises(PriceError) as err:
        price_of(value, "openai/gpt-5.4")
    assert str(err.value).startswith(message) and err.value.key == key
