"""The in-process transport: batches judged on a background thread's event loop, by the
same executor as the Celery workers' (the embedded default, no broker)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

from flask_eval.producer.dispatch import Batch, Transport
from flask_eval.storage.store import Store
from flask_eval.workers.feed import batches_at_once
from flask_eval.workers.limiter import MemoryLimiter
from flask_eval.workers.runner import Executor, ExecutorConfig


class InProcessTransport(Transport):
    """Runs batches on a background thread's event loop, ``in_flight`` calls at once."""

    def __init__(self, store: Store, config: ExecutorConfig) -> None:
        self.store = store
        self.config = config
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def submit(self, run_id: int, batches: Sequence[Batch]) -> None:
        def work() -> None:
            try:
                asyncio.run(self._run(run_id, batches))
            except BaseException as exc:  # surfaced by join()
                self.error = exc

        self._thread = threading.Thread(target=work, name="flask-eval-inprocess", daemon=True)
        self._thread.start()

    async def _run(self, run_id: int, batches: Sequence[Batch]) -> None:
        executor = Executor(self.store, self.config, limiter=MemoryLimiter({}))
        per_batch = max(1, max((len(b) for b in batches), default=1))
        gate = asyncio.Semaphore(batches_at_once(self.config.in_flight, per_batch))

        async def one(batch: Batch) -> None:
            async with gate:
                await executor.run_batch(run_id, batch)

        try:
            await asyncio.gather(*(one(b) for b in batches))
        finally:
            await executor.aclose()

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()
        if self.error is not None:
            raise self.error
