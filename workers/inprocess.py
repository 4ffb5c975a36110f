"""The in-process transport: batches judged on a background thread's event loop, by the
same executor as the Celery workers' (the embedded default, no broker).

Ctrl-C (:meth:`InProcessTransport.interrupt`) keeps every answer already paid for: nothing
more is sent, the calls on the wire are answered and stored, and the rows claimed but not
sent are given back (pending) for the next run; a second Ctrl-C quits at once.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence

from flask_eval.producer.dispatch import Batch, Transport
from flask_eval.storage.store import Store
from flask_eval.workers.feed import batches_at_once
from flask_eval.workers.limiter import MemoryLimiter
from flask_eval.workers.runner import Executor, ExecutorConfig

#: seconds between two looks at the judging thread while Ctrl-C waits for it
_JOIN_POLL = 0.2
#: seconds between two looks for batches submitted while the judging thread runs
_TAKE_POLL = 0.2


class InProcessTransport(Transport):
    """Runs batches on a background thread's event loop, ``in_flight`` calls at once.

    Every submission of a run (the producer submits a large run in several) goes to one
    executor: the thread that judges takes the batches submitted while it runs, and ends
    only when none is left; a submission after that starts a new one. The transport is
    :meth:`alive` while any of its threads judges."""

    def __init__(self, store: Store, config: ExecutorConfig) -> None:
        self.store = store
        self.config = config
        self._lock = threading.Lock()
        self._queued: list[tuple[int, Sequence[Batch]]] = []  # submitted, not yet taken
        self._taker: threading.Thread | None = None  # the thread taking submissions
        self._threads: list[threading.Thread] = []
        self._running = 0  # judging threads not ended
        self._executors: list[Executor] = []  # of the judging threads
        self._stop = threading.Event()
        self._ended = threading.Event()  # no judging thread runs: the work is over
        self._ended.set()
        self.error: BaseException | None = None

    def submit(self, run_id: int, batches: Sequence[Batch]) -> None:
        with self._lock:
            self._queued.append((run_id, list(batches)))
            if self._taker is not None:
                return  # the judging thread takes them
            thread = threading.Thread(target=self._work, name="flask-eval-inprocess", daemon=True)
            self._taker = thread
            self._threads.append(thread)
            self._running += 1
            self._ended.clear()
        thread.start()

    def _work(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as exc:  # surfaced by join()
            if self.error is None:
                self.error = exc
        finally:
            with self._lock:
                if self._taker is threading.current_thread():
                    self._taker = None
                self._running -= 1
                if not self._running:
                    self._ended.set()

    def _take(self, idle: bool) -> list[tuple[int, Sequence[Batch]]]:
        """The batches submitted since the last look; when the thread is ``idle`` and
        none came, it takes no more (a later submission starts a new thread)."""
        with self._lock:
            taken, self._queued = self._queued, []
            if idle and not taken and self._taker is threading.current_thread():
                self._taker = None
            return taken

    async def _run(self) -> None:
        executor = Executor(self.store, self.config, limiter=MemoryLimiter({}))
        # the executor is published before the flag is read, and interrupt() sets the flag
        # before it reads the executors: an interrupt at any moment reaches one of the two
        with self._lock:
            self._executors.append(executor)
        executor.leases.stopping = self._stop.is_set()
        gate: asyncio.Semaphore | None = None
        running: set[asyncio.Task[None]] = set()
        runs: list[int] = []

        async def one(run_id: int, batch: Batch, gate: asyncio.Semaphore) -> None:
            async with gate:
                if not executor.leases.stopping:
                    await executor.run_batch(run_id, batch)

        try:
            while True:
                for run_id, batches in self._take(idle=not running):
                    if gate is None:
                        per_batch = max(1, max((len(b) for b in batches), default=1))
                        gate = asyncio.Semaphore(batches_at_once(self.config.in_flight, per_batch))
                    runs += [] if run_id in runs else [run_id]
                    running.update(asyncio.create_task(one(run_id, b, gate)) for b in batches)
                if not running:
                    break
                done, running = await asyncio.wait(
                    running, timeout=_TAKE_POLL, return_when=asyncio.FIRST_COMPLETED
                )
                for task in done:
                    task.result()  # an executor's crash ends the run (join() raises it)
            # the calls parked for provider batches: submitted at once (no more will
            # come), polled until collected; Ctrl-C leaves them to `resume` or a worker
            for run_id in runs:
                await executor.batches.drain(
                    run_id, self.config.batch_poll, lambda: executor.leases.stopping
                )
        finally:
            await executor.aclose()
            with self._lock:
                self._executors.remove(executor)

    def interrupt(self, say: Callable[[str], None]) -> None:
        """Ctrl-C: send nothing more and wait until the calls already sent are answered
        and stored, and the rows not sent are given back. A second Ctrl-C (a
        KeyboardInterrupt while this waits) quits at once: answers still on their way,
        paid or not, are then lost."""
        self._stop.set()
        with self._lock:
            executors = list(self._executors)
        for executor in executors:
            executor.leases.stopping = True
        if not self.alive():
            return
        say(
            "interrupted: sending nothing more; waiting for the calls already sent to be "
            "answered and stored (they are paid for); Ctrl-C again quits at once and loses "
            "them"
        )
        while not self._ended.wait(_JOIN_POLL):
            pass

    def pause(self, seconds: float) -> None:
        """Until the judging thread's work is over (every batch judged and written), at
        most ``seconds``: a run is seen done as soon as it is, not at the next poll. An
        event, not ``Thread.join``: a Ctrl-C inside ``join(timeout)`` marks a running
        thread as stopped on Python 3.11 and 3.12 (it releases the thread's own lock), and
        :meth:`interrupt` would then not wait for the answers on the wire."""
        if not self._threads:
            super().pause(seconds)
        else:
            self._ended.wait(seconds)

    def alive(self) -> bool:
        """Whether a thread of this transport still judges."""
        return not self._ended.is_set()

    def join(self) -> None:
        for thread in list(self._threads):
            thread.join()
        if self.error is not None:
            raise self.error
