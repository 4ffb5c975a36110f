"""Dispatchers: how planned batches reach the executor, and the one way a run's open calls
are dispatched (by `run`, `resume` and the workers' sweeper alike).

``CeleryDispatcher`` sends them through the broker to Celery workers;
``InProcessDispatcher`` runs the same executor code in this process (the embedded
default, no broker); ``MemoryDispatcher`` only records them (unit tests).
"""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from flask_eval.exceptions import ConfigError
from flask_eval.redact import redact
from flask_eval.settings import Settings
from producer.estimate import Estimator
from producer.plan import batches, open_calls
from storage import queries
from storage.records import RunInfo
from storage.store import Store
from workers.endpoints import JudgeConfig, Price
from workers.limiter import MemoryLimiter
from workers.runner import Executor, ExecutorConfig

Batch = list[list[int]]


class Dispatcher(ABC):
    #: the broker queue the batches go to (None: executed here)
    queue: str | None = None

    @abstractmethod
    def submit(self, run_id: int, batches: Sequence[Batch]) -> None:
        """Hand ``batches`` over for execution."""

    def join(self) -> None:  # noqa: B027  (default hook)
        """Wait for local execution (no-op where execution is remote)."""

    def check(self) -> None:  # noqa: B027  (default hook)
        """Raise ConfigError if the dispatcher cannot work (before anything is written)."""

    def consumers(self) -> list[str] | None:
        """Workers taking this dispatcher's queue, as the broker knows them (None: not
        applicable, execution is local)."""
        return None


class MemoryDispatcher(Dispatcher):
    def __init__(self) -> None:
        self.sent: list[tuple[int, Batch]] = []

    def submit(self, run_id: int, batches: Sequence[Batch]) -> None:
        self.sent.extend((run_id, b) for b in batches)


class CeleryDispatcher(Dispatcher):
    def __init__(self, settings: Settings) -> None:
        from workers.app import make_app  # lazy: Celery only when a broker is configured

        self.settings = settings
        self.queue = settings.queue
        self.app = make_app(settings)

    def check(self) -> None:
        try:
            with self.app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=2, interval_start=0.2, interval_step=0.5)
        except Exception as exc:
            raise ConfigError(
                f"cannot reach the broker at {redact(str(self.settings.broker_url))}: "
                f"{redact(str(exc))}; "
                "start it or unset FLASK_EVAL_BROKER_URL to run in-process"
            ) from None

    def submit(self, run_id: int, batches: Sequence[Batch]) -> None:
        from workers.app import TASK_NAME

        with self.app.producer_or_acquire() as producer:
            for batch in batches:
                self.app.send_task(
                    TASK_NAME, args=[run_id, batch], producer=producer, queue=self.settings.queue
                )

    def consumers(self) -> list[str] | None:
        replies = self.app.control.inspect(timeout=1.0).active_queues() or {}
        return sorted(
            worker
            for worker, queues in replies.items()
            if any(q.get("name") == self.settings.queue for q in queues or ())
        )


class InProcessDispatcher(Dispatcher):
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
        gate = asyncio.Semaphore(max(2, 2 * self.config.in_flight // per_batch))

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


@dataclass(frozen=True)
class Dispatched:
    sent: int  # calls sent
    held_back: int = 0  # calls left pending by the run's --max-cost budget
    held_back_rows: int = 0
    estimated_cost: float = 0.0  # of the calls sent
    spent: float = 0.0  # metered before


def dispatch_open(
    store: Store,
    run: RunInfo,
    dispatcher: Dispatcher,
    calls_per_message: int,
    estimator: Estimator | None = None,
) -> Dispatched:
    """Send every open call of ``run``, within the run's stored cost budget.

    The budget (``--max-cost``, kept with the run) belongs to the run: calls go in order
    only while the cost already metered for the run plus the estimated cost of the calls
    sent stays within it. On a broker, the run is marked fully dispatched to the queue
    only when nothing was held back, so that the sweeper never sends what the budget
    kept back (workers/sweeper.py).
    """
    calls = open_calls(store, run)
    max_cost = run.config.get("max_cost")
    judges = [JudgeConfig.from_data(j) for j in run.config["judges"]]
    if max_cost is None and all(j.price == Price() for j in judges):
        # nothing to meter: skip rendering every prompt for an estimate of $0
        if calls:
            dispatcher.submit(run.id, batches([c.ids for c in calls], calls_per_message))
        _mark(store, run, dispatcher, complete=True)
        return Dispatched(len(calls))
    estimator = estimator or Estimator.of_run(store, run)
    spent = queries.status(store, run.id, run.name).cost
    chosen, estimated = [], 0.0
    for call in calls:
        cost = estimator.cost(call)
        if max_cost is not None and spent + estimated + cost > float(max_cost):
            break
        chosen.append(call)
        estimated += cost
    if chosen:
        dispatcher.submit(run.id, batches([c.ids for c in chosen], calls_per_message))
    held = calls[len(chosen) :]
    _mark(store, run, dispatcher, complete=not held)
    return Dispatched(len(chosen), len(held), sum(len(c.ids) for c in held), estimated, spent)


def _mark(store: Store, run: RunInfo, dispatcher: Dispatcher, complete: bool) -> None:
    if dispatcher.queue is not None:
        store.set_dispatched(run.id, dispatcher.queue if complete else None)
