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


class InProcessTransport(Transport):
    """Runs batches on a background thread's event loop, ``in_flight`` calls at once."""

    def __init__(self, store: Store, config: ExecutorConfig) -> None:
        self.store = store
        self.config = config
        self._thread: threading.Thread | None = None
        self._executor: Executor | None = None
        self._stop = threading.Event()
        self._ended = threading.Event()  # the judging thread's work is over
        self.error: BaseException | None = None

    def submit(self, run_id: int, batches: Sequence[Batch]) -> None:
        def work() -> None:
            try:
                asyncio.run(self._run(run_id, batches))
            except BaseException as exc:  # surfaced by join()
                self.error = exc
            finally:
                self._ended.set()

        self._thread = threading.Thread(target=work, name="flask-eval-inprocess", daemon=True)
        self._thread.start()

    async def _run(self, run_id: int, batches: Sequence[Batch]) -> None:
        executor = Executor(self.store, self.config, limiter=MemoryLimiter({}))
        # the executor is published before the flag is read, and interrupt() sets the flag
        # before it reads the executor: an interrupt at any moment reaches one of the two
        self._executor = executor
        executor.leases.stopping = self._stop.is_set()
        per_batch = max(1, max((len(b) for b in batches), default=1))
        gate = asyncio.Semaphore(batches_at_once(self.config.in_flight, per_batch))

        async def one(batch: Batch) -> None:
            async with gate:
                if not executor.leases.stopping:
                    await executor.run_batch(run_id, batch)

        try:
            await asyncio.gather(*(one(b) for b in batches))
            # the calls parked for provider batches: submitted at once (no more will
            # come), polled until collected; Ctrl-C leaves them to `resume` or a worker
            await executor.batches.drain(run_id, self.config.batch_poll,
                                         lambda: executor.leases.stopping)  # fmt: skip
        finally:
            await executor.aclose()

    def interrupt(self, say: Callable[[str], None]) -> None:
        """Ctrl-C: send nothing more and wait until the calls already sent are answered
        and stored, and the rows not sent are given back. A second Ctrl-C (a
        KeyboardInterrupt while this waits) quits at once: answers still on their way,
        paid or not, are then lost."""
        self._stop.set()
        if self._executor is not None:
            self._executor.leases.stopping = True
        if not self.alive():
            return
        say("interrupted: sending nothing more; waiting for the calls already sent to be "
            "answered and stored (they are paid for); Ctrl-C again quits at once and loses "
            "them")  # fmt: skip
        while self.alive():
            assert self._thread is not None
            self._thread.join(_JOIN_POLL)

    def pause(self, seconds: float) -> None:
        """Until the judging thread's work is over (every batch judged and written), at
        most ``seconds``: a run is seen done as soon as it is, not at the next poll. An
        event, not ``Thread.join``: a Ctrl-C inside ``join(timeout)`` marks a running
        thread as stopped on Python 3.11 and 3.12 (it releases the thread's own lock), and
        :meth:`interrupt` would then not wait for the answers on the wire."""
        if self._thread is None:
            super().pause(seconds)
        else:
            self._ended.wait(seconds)

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()
        if self.error is not None:
            raise self.error
