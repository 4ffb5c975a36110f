"""Dispatchers: how planned batches reach the executor.

``CeleryDispatcher`` sends them through the broker to Celery workers;
``InProcessDispatcher`` runs the same executor code in this process (the embedded
default, no Redis); ``MemoryDispatcher`` only records them (unit tests).
"""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence

from flask_eval.exceptions import ConfigError
from flask_eval.redact import redact
from flask_eval.settings import Settings
from storage.store import Store
from workers.context import RunContext
from workers.limiter import MemoryLimiter
from workers.runner import Executor, ExecutorConfig

Batch = list[list[int]]


class Dispatcher(ABC):
    @abstractmethod
    def submit(self, run_id: int, batches: Sequence[Batch]) -> None:
        """Hand ``batches`` over for execution."""

    def join(self) -> None:  # noqa: B027  (default hook)
        """Wait for local execution (no-op where execution is remote)."""

    def check(self) -> None:  # noqa: B027  (default hook)
        """Raise ConfigError if the dispatcher cannot work (before anything is written)."""


class MemoryDispatcher(Dispatcher):
    def __init__(self) -> None:
        self.sent: list[tuple[int, Batch]] = []

    def submit(self, run_id: int, batches: Sequence[Batch]) -> None:
        self.sent.extend((run_id, b) for b in batches)


class CeleryDispatcher(Dispatcher):
    def __init__(self, settings: Settings) -> None:
        from workers.app import make_app  # lazy: Celery only when a broker is configured

        self.settings = settings
        self.app = make_app(settings)

    def check(self) -> None:
        try:
            with self.app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=2, interval_start=0.2, interval_step=0.5)
        except Exception as exc:
            raise ConfigError(
                f"cannot reach the broker at {redact(str(self.settings.broker_url))}: "
                f"{redact(str(exc))}; "
                "start Redis or unset FLASK_EVAL_BROKER_URL to run in-process"
            ) from None

    def submit(self, run_id: int, batches: Sequence[Batch]) -> None:
        from workers.app import TASK_NAME

        with self.app.producer_or_acquire() as producer:
            for batch in batches:
                self.app.send_task(
                    TASK_NAME, args=[run_id, batch], producer=producer, queue=self.settings.queue
                )


class InProcessDispatcher(Dispatcher):
    """Runs batches on a background thread's event loop, ``in_flight`` calls at once."""

    def __init__(self, store: Store, context: RunContext, config: ExecutorConfig) -> None:
        self.store = store
        self.context = context
        self.config = config
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def submit(self, run_id: int, batches: Sequence[Batch]) -> None:
        def work() -> None:
            try:
                asyncio.run(self._run(batches))
            except BaseException as exc:  # surfaced by join()
                self.error = exc

        self._thread = threading.Thread(target=work, name="flask-eval-inprocess", daemon=True)
        self._thread.start()

    async def _run(self, batches: Sequence[Batch]) -> None:
        executor = Executor(self.store, self.config, limiter=MemoryLimiter({}))
        per_batch = max(1, max((len(b) for b in batches), default=1))
        gate = asyncio.Semaphore(max(2, 2 * self.config.in_flight // per_batch))

        async def one(batch: Batch) -> None:
            async with gate:
                await executor.run_batch(batch, self.context)

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
