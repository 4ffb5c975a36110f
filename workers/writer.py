"""Write-behind: many calls' answers and outcomes committed in one transaction.

Each judge call awaits its own write, so a batch is acknowledged only after its rows are
stored; but calls finishing within ``window`` seconds of each other share one database
transaction instead of paying two round trips each. A flush costs about 1 ms of CPU
whatever its size, so the window is long (100 ms: nothing waits on it but the
acknowledgement of a batch) and a flush starts at once when ``max_items`` calls wait.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from storage.records import CallRecord, Outcome
from storage.store import Store

Pending = tuple[Sequence[CallRecord], Sequence[Outcome], asyncio.Future[int]]


class WriteBehind:
    def __init__(self, store: Store, window: float = 0.1, max_items: int = 512) -> None:
        self.store = store
        self.window = window
        self.max_items = max_items
        self._pending: list[Pending] = []
        self._flusher: asyncio.Task[None] | None = None
        self._full = asyncio.Event()

    async def write(
        self, calls: Sequence[CallRecord] = (), outcomes: Sequence[Outcome] = ()
    ) -> int:
        """Store ``calls`` and ``outcomes``; returns how many rows were finished."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pending.append((calls, outcomes, future))
        if len(self._pending) >= self.max_items:
            self._full.set()
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        while self._pending:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._full.wait(), self.window)
            self._full.clear()
            items, self._pending = self._pending, []
            calls = [c for c_list, _, _ in items for c in c_list]
            outcomes = [o for _, o_list, _ in items for o in o_list]
            try:
                await asyncio.to_thread(self.store.write, calls, outcomes)
            except Exception as exc:  # every waiting call sees the failure
                for *_, future in items:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for _, o_list, future in items:
                if not future.done():
                    future.set_result(len(o_list))
