"""The test helpers' waiting: a condition with a deadline, never a fixed sleep."""

from __future__ import annotations

import itertools
import time

import pytest

from tests.helpers import wait_until


def test_wait_until_returns_the_first_value_that_satisfies_the_condition() -> None:
    counter = itertools.count()
    value = wait_until(lambda: next(counter), lambda n: n >= 3, timeout=5, interval=0)
    assert value == 3


def test_wait_until_without_a_condition_waits_for_a_truthy_value() -> None:
    values = iter([0, None, "", "ready"])
    assert wait_until(lambda: next(values), timeout=5, interval=0) == "ready"


def test_wait_until_names_what_it_waited_for_and_the_last_value_seen() -> None:
    counter = itertools.count()
    started = time.monotonic()
    with pytest.raises(AssertionError) as info:
        wait_until(
            lambda: {"done": next(counter)},
            lambda st: st["done"] < 0,
            timeout=0.3,
            interval=0.05,
            what="a negative count",
        )
    elapsed = time.monotonic() - started
    message = str(info.value)
    assert "a negative count" in message and "0.3" in message
    assert "last observed: {'done': " in message
    assert "{'done': 0}" not in message  # the last value, not the first
    assert 0.3 <= elapsed < 3


def test_wait_until_clips_a_long_last_value() -> None:
    with pytest.raises(AssertionError) as info:
        wait_until(lambda: "x" * 10_000, lambda s: False, timeout=0, what="never")
    assert len(str(info.value)) < 1_000


def test_wait_until_observes_at_least_once_even_past_the_deadline() -> None:
    assert wait_until(lambda: 7, lambda n: n == 7, timeout=0) == 7
