"""Sliding-window rate limits (pure; the caller supplies the clock)."""

from __future__ import annotations

from collections import deque


class SlidingWindow:
    """At most ``limit`` units within any ``window`` seconds.

    A single request larger than the whole limit is admitted when the window is empty
    (otherwise it could never be served) and then blocks the window until it expires.
    """

    def __init__(self, limit: int, window: float = 60.0) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        self.limit = limit
        self.window = window
        self._events: deque[tuple[float, int]] = deque()
        self._total = 0

    @property
    def used(self) -> int:
        return self._total

    def _expire(self, now: float) -> None:
        events = self._events
        horizon = now - self.window
        while events and events[0][0] <= horizon:
            self._total -= events.popleft()[1]

    def wait_time(self, now: float, amount: int) -> float:
        """0.0 if ``amount`` fits now, else the seconds until enough capacity frees up."""
        self._expire(now)
        if not self._events or self._total + amount <= self.limit:
            return 0.0
        need = self._total + amount - self.limit
        freed = 0
        for t, a in self._events:
            freed += a
            if freed >= need:
                return max(0.0, t + self.window - now)
        # Oversized request: it fits only once the window is empty.
        return max(0.0, self._events[-1][0] + self.window - now)

    def record(self, now: float, amount: int) -> None:
        self._events.append((now, amount))
        self._total += amount

    def reset(self) -> None:
        self._events.clear()
        self._total = 0
