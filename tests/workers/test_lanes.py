"""Lanes: at most n calls at once, first come first served, and a freed lane taken at once."""

from __future__ import annotations

import asyncio

import pytest

from flask_eval.workers.lanes import Lanes


def test_never_more_than_n_at_once_and_first_come_first_served() -> None:
    async def main() -> tuple[int, list[int]]:
        lanes = Lanes(3)
        running, peak, started = 0, 0, []

        async def call(i: int) -> int:
            nonlocal running, peak
            started.append(i)
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.001 * (i % 4))
            running -= 1
            return i * 10

        results = await asyncio.gather(*(lanes.run(lambda i=i: call(i)) for i in range(20)))
        assert results == [i * 10 for i in range(20)]
        await lanes.aclose()
        return peak, started

    peak, started = asyncio.run(main())
    assert peak == 3
    assert started == list(range(20))


def test_the_next_call_starts_in_the_step_that_frees_its_lane() -> None:
    """What keeps HTTP connections warm: no other callback runs between the two calls."""

    async def main() -> list[str]:
        lanes, order = Lanes(1), []

        async def first() -> None:
            await asyncio.sleep(0)
            asyncio.get_running_loop().call_soon(order.append, "other")
            order.append("first ends")

        async def second() -> None:
            order.append("second starts")

        await asyncio.gather(lanes.run(first), lanes.run(second))
        await lanes.aclose()
        return order

    assert asyncio.run(main()) == ["first ends", "second starts", "other"]


def test_an_error_reaches_its_caller_and_the_lane_goes_on() -> None:
    async def main() -> list[object]:
        lanes = Lanes(1)

        async def fail() -> int:
            raise ValueError("boom")

        async def ok() -> int:
            return 7

        out = await asyncio.gather(lanes.run(fail), lanes.run(ok), return_exceptions=True)
        await lanes.aclose()
        return out

    err, value = asyncio.run(main())
    assert isinstance(err, ValueError) and str(err) == "boom"
    assert value == 7


def test_a_cancelled_caller_cancels_its_call_not_the_lane() -> None:
    async def main() -> tuple[list[str], int]:
        lanes, events = Lanes(1), []
        started = asyncio.Event()

        async def slow() -> int:
            started.set()
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                events.append("slow cancelled")
                raise
            return 1

        async def queued() -> int:
            events.append("queued ran")
            return 2

        async def after() -> int:
            return 3

        slow_caller = asyncio.create_task(lanes.run(slow))
        queued_caller = asyncio.create_task(lanes.run(queued))
        await started.wait()
        queued_caller.cancel()  # waiting for the lane: it never runs
        slow_caller.cancel()  # running: its call is stopped
        for t in (slow_caller, queued_caller):
            with pytest.raises(asyncio.CancelledError):
                await t
        value = await asyncio.wait_for(lanes.run(after), 1)
        # the lane is still usable with timeouts inside it (its cancel count was reset)
        async with asyncio.timeout(1):
            value += await lanes.run(after)
        await lanes.aclose()
        return events, value

    events, value = asyncio.run(main())
    assert events == ["slow cancelled"]
    assert value == 6


def test_aclose_cancels_running_and_waiting_calls() -> None:
    async def main() -> list[bool]:
        lanes = Lanes(1)

        async def forever() -> None:
            await asyncio.sleep(10)

        callers = [asyncio.create_task(lanes.run(forever)) for _ in range(3)]
        await asyncio.sleep(0.01)
        await lanes.aclose()
        done = await asyncio.gather(*callers, return_exceptions=True)
        return [isinstance(d, asyncio.CancelledError) for d in done]

    assert asyncio.run(main()) == [True, True, True]


def test_needs_at_least_one_lane() -> None:
    with pytest.raises(ValueError):
        Lanes(0)
