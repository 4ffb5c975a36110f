"""How many calls one judge endpoint gets in flight in this process: a limit that falls when
the endpoint times out or rate-limits, and climbs back while it answers well within the
timeout (additive increase, multiplicative decrease: the idea of inspect_ai's adaptive
connections; docs/design/concurrency.md says what we took and where we differ).

One :class:`InFlightLimit` per judge endpoint and process, on the process's event loop.
Its ceiling is the judge's ``max_in_flight`` or the process's lanes (``--in-flight``); it
starts there, so a healthy endpoint never waits on it. While the limit is at the lanes'
count it blocks nothing (the lanes already cap the calls, and a second gate in front of
them would hand each freed lane over one event-loop step late); below it, calls wait for
a slot, first come first served, before they queue for a lane.

- A **timeout or a 429** cuts the limit to 0.8 of itself, and a timeout also to half the
  answers the endpoint gave while the timed-out request waited (a server that answered
  ``k`` requests in one timeout serves about ``k`` at once within it; half leaves the
  answers well inside it). One cut per window: a signal from a request sent before the
  last cut says what that cut already answered, and is ignored.
- A **clean answer** (first attempt, sent after the last change, back within half the
  timeout) counts towards a round; a round of ``max(limit, 4)`` of them raises the limit
  by 5% (at least 1), up to the ceiling. An answer close to the timeout raises nothing:
  a local server's queue shows as latency before it shows as timeouts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass

log = logging.getLogger("flask_eval.worker")

#: a cut keeps this share of the limit (inspect_ai: 0.8)
DECREASE = 0.8
#: a round of clean answers is at least this many (inspect_ai: 4)
ROUND_FLOOR = 4
#: a round raises the limit by this share of itself, at least 1 (inspect_ai: 5%)
INCREASE = 0.05
#: an answer slower than this share of the timeout is not clean
SLOW = 0.5
#: changes kept for logs and tests
HISTORY = 200


@dataclass(frozen=True)
class Mark:
    """What the limit was when a request was sent: its cuts and changes so far and the
    answers the endpoint had given."""

    cuts: int
    changes: int
    answered: int


class InFlightLimit:
    """The calls one judge endpoint may have in flight in this process (see the module)."""

    def __init__(self, name: str, ceiling: int, lanes: int, adaptive: bool = True) -> None:
        self.name = name
        self.ceiling = ceiling
        self.lanes = lanes
        self.adaptive = adaptive
        self.limit = ceiling
        self.in_use = 0
        #: (monotonic time, old limit, new limit, why) of each change
        self.history: deque[tuple[float, int, int, str]] = deque(maxlen=HISTORY)
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._cuts = self._changes = self._answered = self._clean = 0

    @property
    def waiting(self) -> int:
        """Calls waiting for a slot."""
        return len(self._waiters)

    def _free(self) -> bool:
        return self.limit >= self.lanes or self.in_use < self.limit

    async def acquire(self) -> None:
        """Take a slot, waiting (first come, first served) while the limit is reached."""
        if not self._waiters and self._free():
            self.in_use += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # granted meanwhile: pass it on
                self.release()
            else:
                self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        self.in_use -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._free():
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_use += 1
                waiter.set_result(None)

    def mark(self) -> Mark:
        """Taken when a request is sent; handed back with what became of it."""
        return Mark(self._cuts, self._changes, self._answered)

    def answered(self, sent: Mark, seconds: float, timeout: float, retried: bool) -> None:
        """A request sent at ``sent`` was answered after ``seconds``."""
        self._answered += 1
        clean = not retried and sent.changes == self._changes and seconds <= SLOW * timeout
        if not self.adaptive or not clean or self.limit >= self.ceiling:
            return
        self._clean += 1
        if self._clean >= max(self.limit, ROUND_FLOOR):
            raised = min(self.ceiling, self.limit + max(1, round(self.limit * INCREASE)))
            self._set(raised, "clean answers")

    def overloaded(self, sent: Mark, why: str) -> None:
        """A request sent at ``sent`` timed out (``why`` ``timeout``) or was refused for
        the rate (``rate_limited``)."""
        self._clean = 0
        if not self.adaptive or sent.cuts != self._cuts:
            return  # the last cut already answered what this request saw
        cut = int(self.limit * DECREASE)
        if why == "timeout":
            cut = min(cut, (self._answered - sent.answered) // 2)
        self._cuts += 1
        self._set(max(1, cut), why)

    def _set(self, new: int, why: str) -> None:
        if new == self.limit:
            return
        old, self.limit = self.limit, new
        self._changes += 1
        self._clean = 0
        self.history.append((time.monotonic(), old, new, why))
        if new < old:
            log.info(
                "judge %s: %s; at most %d calls in flight from now on (was %d), more as it answers",
                self.name,
                why,
                new,
                old,
            )
        else:
            log.debug("judge %s: %d calls in flight (was %d) after %s", self.name, new, old, why)
        self._wake()
