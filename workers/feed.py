"""The feed: a worker claims a batch's rows only when its lanes are about to need them.

A message carries many calls, and a task thread holds its message until the slowest of
them is written (it is acknowledged only then: at-least-once). With heavy-tailed judges
most of a message's calls are done long before its last one, so a process needs many
more messages open than its lanes hold calls, or the lanes starve behind the stragglers
(the batch barrier: docs/design/concurrency.md). But a message that is open is not yet
work that must be claimed: claiming ties rows to this process (under a lease), so rows
claimed long before a lane is free are rows no other worker can take.

So a process opens many messages (``batches_at_once``), and each waits here, before its
claim, until fewer than ``target`` calls are ready and waiting for a lane. Calls of
batches that passed this gate but are not queued yet count as ready, so a burst of
batches does not all pass at once. Every call that starts sending pokes the gate; a
periodic re-check keeps a gate that missed a poke from stalling.
"""

from __future__ import annotations

import asyncio
import collections
import math
from collections.abc import Callable

#: lane-fulls of calls a process keeps open in messages: enough that the stragglers of
#: sigma-1 log-normal latency (calls ~10x the median) never hold every open message
#: (docs/design/concurrency.md)
MESSAGES_PER_WAVE = 8
#: seconds after which a waiting batch looks at the level again without a poke
RECHECK_SECONDS = 0.5


def batches_at_once(in_flight: int, calls_per_message: int) -> int:
    """How many batches one process keeps open (its task threads): enough for
    ``MESSAGES_PER_WAVE`` lane-fulls of calls, and never fewer than 4."""
    return max(4, math.ceil(MESSAGES_PER_WAVE * in_flight / calls_per_message))


class Feed:
    """Lets a batch claim its rows once fewer than ``target`` calls wait for a lane."""

    def __init__(self, target: int, waiting: Callable[[], int]) -> None:
        self.target = max(1, target)
        self._waiting = waiting  # calls queued for a lane (or for an endpoint's slots)
        self._incoming = 0  # calls of batches past the gate, not yet queued
        self._gate: collections.deque[asyncio.Future[None]] = collections.deque()

    @property
    def level(self) -> int:
        return self._waiting() + self._incoming

    async def enter(self, calls: int) -> Ticket:
        """Wait until the lanes have room, then count ``calls`` as on their way until the
        ticket says they arrived."""
        loop = asyncio.get_running_loop()
        while self.level >= self.target:
            opened = loop.create_future()
            self._gate.append(opened)
            try:
                await asyncio.wait_for(asyncio.shield(opened), RECHECK_SECONDS)
            except TimeoutError:
                pass
            finally:
                if not opened.done():
                    opened.cancel()
        self._incoming += calls
        return Ticket(self, calls)

    def poke(self) -> None:
        """A call left the queue: let the next waiting batch in if there is room."""
        while self._gate and self.level < self.target:
            opened = self._gate.popleft()
            if not opened.done():
                opened.set_result(None)
                return


class Ticket:
    """A batch past the gate; :meth:`arrived` once its calls are queued (or never will be)."""

    __slots__ = ("calls", "feed")

    def __init__(self, feed: Feed, calls: int) -> None:
        self.feed = feed
        self.calls = calls

    def arrived(self) -> None:
        if self.calls:
            self.feed._incoming -= self.calls
            self.calls = 0
            self.feed.poke()
