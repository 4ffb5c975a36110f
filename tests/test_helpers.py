"""The test helpers' waiting: a condition with a deadline, never a fixed sleep."""

from __future__ import annotations

import itertools
import types

import pytest

from tests import helpers
from tests.helpers import wait_until


def test_wait_until_returns_the_first_value_that_satisfies_the_condition() -> None:
    counter = itertools.count()
    value = wait_until(lambda: next(counter), lambda n: n >= 3, timeout=5, interval=0)
    assert value == 3


def test_wait_until_without_a_condition_waits_for_a_truthy_value() -> None:
    values = iter([0, None, "", "ready"])
    assert wait_until(lambda: next(values), timeout=5, interval=0) == "ready"


def test_wait_until_names_what_it_waited_for_and_the_last_value_seen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a clock that moves only by wait_until's sleeps: how long it waited does not depend
    # on how busy the machine is
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    monkeypatch.setattr(
        helpers, "time", types.SimpleNamespace(monotonic=lambda: now[0], sleep=sleep)
    )
    counter = itertools.count()
    with pytest.raises(AssertionError) as info:
        wait_until(
            lambda: {"done": next(counter)},
            lambda st: st["done"] < 0,
            timeout=0.3,
            interval=0.05,
            what="a negative count",
        )
    message = str(info.value)
    assert "a negative count" in message and "0.3" in message
    assert "last observed: {'done': " in message
    assert "{'done': 0}" not in message  # the last value, not the first
    assert 0.3 <= now[0] < 0.3 + 0.05 + 1e-9  # the deadline, then at most one interval


def test_wait_until_clips_a_long_last_value() -> None:
    with pytest.raises(AssertionError) as info:
        wait_until(lambda: "x" * 10_000, lambda s: False, timeout=0, what="never")
    assert len(str(info.value)) < 1_000


def test_wait_until_observes_at_least_once_even_past_the_deadline() -> None:
    assert wait_until(lambda: 7, lambda n: n == 7, timeout=0) == 7
