"""Leases: the rows a worker process is judging stay claimed by it while it lives.

A claimed row is leased for ``lease_seconds``; a heartbeat renews the leases of every row
this process holds every third of that. A row held by two batches of the process (a
redelivered message whose rows this process still judges) stays held until both let go.
If the process dies, its leases run out and another worker may claim the rows again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from flask_eval.storage.store import Store

log = logging.getLogger("flask_eval.worker")


class Leases:
    def __init__(self, store: Store, lease_seconds: float) -> None:
        self.store = store
        self.lease_seconds = lease_seconds
        self._owned: dict[int, int] = {}  # row id -> batches holding it
        self._heartbeat: asyncio.Task[None] | None = None

    @property
    def held(self) -> int:
        return len(self._owned)

    def hold(self, ids: Iterable[int]) -> None:
        for i in ids:
            self._owned[i] = self._owned.get(i, 0) + 1
        if self._owned and (self._heartbeat is None or self._heartbeat.done()):
            self._heartbeat = asyncio.get_running_loop().create_task(self._beat())

    def release(self, ids: Iterable[int]) -> None:
        for i in ids:
            left = self._owned.get(i, 0) - 1
            if left > 0:
                self._owned[i] = left
            else:
                self._owned.pop(i, None)

    def stop(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            self._heartbeat = None

    async def _beat(self) -> None:
        """Renew the leases of every row this process is judging, until it has none."""
        interval = self.lease_seconds / 3
        while self._owned:
            await asyncio.sleep(interval)
            ids = list(self._owned)
            try:
                await asyncio.to_thread(self.store.extend_leases, ids, self.lease_seconds)
            except Exception:  # the store retries outages itself; never kill the loop
                log.exception("lease heartbeat failed")
