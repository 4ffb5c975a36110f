"""Write-behind: many calls' answers and outcomes committed in one transaction, and kept
through database outages.

Each judge call awaits its own write, so a batch is acknowledged only after its rows are
stored; but calls finishing within ``window`` seconds of each other share one database
transaction instead of paying two round trips each. A flush costs about 1 ms of CPU
whatever its size, so the window is long (100 ms: nothing waits on it but the
acknowledgement of a batch) and a flush starts at once when ``max_items`` calls wait.

A paid answer is never dropped because the database is away: a flush that fails for a
connection error keeps its items, spills them to the local spool (workers/spool.py) once,
and retries with capped backoff for as long as it takes; nothing is recorded as our bug.
Memory stays bounded without a cap of its own: while the database is away no new batch
can be claimed, so what waits is at most what was in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Sequence
from pathlib import Path

from flask_eval.storage.records import CallRecord, Outcome
from flask_eval.storage.retry import is_transient
from flask_eval.storage.store import Store
from flask_eval.workers.spool import Spool

log = logging.getLogger("flask_eval.worker")

Pending = tuple[Sequence[CallRecord], Sequence[Outcome], asyncio.Future[int]]

#: the longest wait between two attempts while the database is away (seconds)
MAX_BACKOFF = 5.0


class WriteBehind:
    def __init__(
        self,
        store: Store,
        window: float = 0.1,
        max_items: int = 512,
        spool: Spool | None = None,
    ) -> None:
        self.store = store
        self.window = window
        self.max_items = max_items
        self.spool = spool
        self.outages = 0  # flushes that had to wait for the database
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
            try:
                items = await self._write_through_outages(items)
            except Exception as exc:  # not the connection: every waiting call sees it
                for *_, future in items:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for _, o_list, future in items:
                if not future.done():
                    future.set_result(len(o_list))

    async def _write_through_outages(self, items: list[Pending]) -> list[Pending]:
        """Write ``items``; while the database is away, keep retrying, and spill every
        item to the spool once (those that arrive meanwhile join the retry). Returns the
        items written (``items`` and the ones that joined)."""
        spilled: list[Path] = []
        kept = 0  # items already on disk
        attempt = 0
        while True:
            calls = [c for c_list, _, _ in items for c in c_list]
            outcomes = [o for _, o_list, _ in items for o in o_list]
            try:
                await asyncio.to_thread(self.store.write, calls, outcomes)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                attempt += 1
                if attempt == 1:
                    self.outages += 1
                    log.warning(
                        "database unavailable (%s): keeping %d paid answers and %d outcomes "
                        "until it is back",
                        type(exc).__name__,
                        len(calls),
                        len(outcomes),
                    )
                if self.spool is not None and kept < len(items):
                    fresh = items[kept:]
                    spilled.append(
                        await asyncio.to_thread(
                            self.spool.save,
                            [c for c_list, _, _ in fresh for c in c_list],
                            [o for _, o_list, _ in fresh for o in o_list],
                        )
                    )
                    kept = len(items)
                await asyncio.sleep(min(MAX_BACKOFF, 0.1 * 2**attempt) * random.uniform(0.5, 1))
                items += self._pending  # answers that arrived meanwhile wait with these
                self._pending = []
                continue
            for path in spilled:
                Spool.drop(path)
            if attempt:
                log.warning("database back: wrote %d kept paid answers", len(calls))
            return items
