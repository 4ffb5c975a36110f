"""Lanes: ``n`` long-lived sender tasks that keep up to ``n`` judge calls in flight.

A semaphore would also cap the calls in flight, but it hands a freed slot to the next
caller one event-loop step later. By then the HTTP pool has seen the finished call's
connection go idle, together with every other connection freed in the same step, and
closes those beyond its keep-alive cap; the next step opens new ones. A lane instead
takes the next waiting call as soon as its own returns, in the same step, so the
connection just freed can be reused. At 0 ms latency (12,000 calls, 64 in flight) a
semaphore opened 6,400 connections and lanes 4,800, and producer + worker CPU per call
fell ~3% (docs/design/concurrency.md).

A caller that is cancelled while its call runs cancels that call, not the lane.

``urgent`` calls go before the others: the second request of a call already begun (a
format reminder, a retry, a re-ask with a larger budget). Work already paid for once
finishes first, so its outcome is known early (and a failing judge is noticed, and
halted, before the queue behind it is sent).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class _Job(Generic[T]):
    __slots__ = ("abandoned", "fn", "future", "lane")

    def __init__(self, fn: Callable[[], Awaitable[T]], future: asyncio.Future[T]) -> None:
        self.fn = fn
        self.future = future
        self.lane: asyncio.Task[None] | None = None
        self.abandoned = False


class Lanes:
    """Runs submitted coroutine functions, at most ``n`` at a time, first come first served."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError("lanes need n >= 1")
        self.n = n
        self._queue: asyncio.PriorityQueue[tuple[int, int, _Job[Any]]] = asyncio.PriorityQueue()
        self._lanes: list[asyncio.Task[None]] = []
        self._order = itertools.count()

    @property
    def waiting(self) -> int:
        """Calls queued for a lane (abandoned ones included until a lane skips them)."""
        return self._queue.qsize()

    async def run(self, fn: Callable[[], Awaitable[T]], *, urgent: bool = False) -> T:
        """Wait for a lane, run ``fn()`` in it and return its result (or raise its error);
        ``urgent`` calls are taken before the others, each kind first come first served."""
        loop = asyncio.get_running_loop()
        job: _Job[T] = _Job(fn, loop.create_future())
        if not self._lanes:
            self._lanes = [loop.create_task(self._lane()) for _ in range(self.n)]
        self._queue.put_nowait((0 if urgent else 1, next(self._order), job))
        try:
            return await job.future
        except asyncio.CancelledError:
            job.abandoned = True
            if job.lane is not None:  # running: stop it; the lane goes on with the next
                job.lane.cancel()
            raise

    async def _lane(self) -> None:
        me = asyncio.current_task()
        assert me is not None
        while True:
            *_, job = await self._queue.get()
            if job.abandoned:
                continue
            job.lane = me
            try:
                result = await job.fn()
            except asyncio.CancelledError:
                if not job.abandoned:  # the lane itself is being stopped
                    job.future.cancel()
                    raise
            except Exception as exc:  # handed to the caller
                if not job.future.done():
                    job.future.set_exception(exc)
            else:
                if not job.future.done():
                    job.future.set_result(result)
            finally:
                job.lane = None
            if job.abandoned and me.cancelling():
                me.uncancel()  # the cancel was meant for that job only

    async def aclose(self) -> None:
        """Stop the lanes; calls running or still waiting are cancelled."""
        for lane in self._lanes:
            lane.cancel()
        for lane in self._lanes:
            with contextlib.suppress(asyncio.CancelledError):
                await lane
        self._lanes = []
        while not self._queue.empty():
            self._queue.get_nowait()[2].future.cancel()
