"""A broker's worker side: the :class:`Consumer` seam, what a worker does with each message
(:func:`handle`), and the registry of brokers by URL scheme.

A broker is one module per side. The producer's side is a ``producer.dispatch.Transport``
(it sends batches); the worker's side is a :class:`Consumer`: it takes the queue's
messages until the worker is stopped and hands each to :func:`handle`, which judges it
with the process's executor and says how to settle it (acknowledge it, or put it back in
the queue). A consumer also answers the sweeper (workers/sweeper.py): whether the broker
can lose a message a worker took, whether its queue is idle, and which worker sweeps a
round. Celery's two sides are in ``workers.celery_app`` (the only module that knows Celery
and Kombu); ``workers.stub_broker`` keeps both in memory (the unit tests').

A broker that pulls messages itself (no framework of its own) subclasses
:class:`PullConsumer`: four methods (``receive``, ``ack``, ``requeue``, ``send_later``),
and its threads, stopping and settling come with it.
"""

from __future__ import annotations

import enum
import importlib
import logging
import signal
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeGuard

from flask_eval.core.errors import ConfigError
from flask_eval.storage.retry import is_transient
from flask_eval.workers.loop import run_sync
from flask_eval.workers.runner import RunNotFound

if TYPE_CHECKING:
    from flask_eval.core.settings import Settings
    from flask_eval.producer.dispatch import Batch, Transport
    from flask_eval.workers.runner import Executor

log = logging.getLogger("flask_eval.worker")

#: seconds after a lease runs out before its rows are looked at again
LOOK_AGAIN_MARGIN = 1.0
#: seconds a message this worker cannot judge now waits before it goes back to the queue
REQUEUE_PAUSE = 2.0

_CELERY = (
    "flask_eval.workers.celery_app:CeleryTransport",
    "flask_eval.workers.celery_app:CeleryConsumer",
)
#: a broker URL's scheme -> its producer side and its worker side ("module:Class", each
#: imported when first used, constructed with the producer's or worker's Settings)
BROKERS: dict[str, tuple[str, str]] = {
    "redis": _CELERY,
    "rediss": _CELERY,
    "redis+socket": _CELERY,
    "amqp": _CELERY,
    "amqps": _CELERY,
    "memory": _CELERY,  # Kombu's in-memory transport: one process (tests)
}


@dataclass(frozen=True)
class Message:
    """One message as the broker delivered it: ``(run id, [[ledger ids of a call], ...])``,
    untrusted (:func:`handle` checks it); ``receipt`` is the broker's own handle on it."""

    run_id: object
    calls: object
    receipt: Any = None


class Settle(enum.Enum):
    """What becomes of a message once handled."""

    ACK = "ack"  # judged, or refused for good: acknowledged (gone from the queue)
    REQUEUE = "requeue"  # cannot be judged now: back in the queue, after REQUEUE_PAUSE


#: send ``(run id, calls)`` to the queue again after ``delay`` seconds
Later = Callable[[int, "Batch", float], None]


@dataclass(frozen=True)
class Work:
    """What a worker process gives its consumer."""

    executor: Callable[[], Executor]  # the process's one executor (created on first use)
    concurrency: int  # messages handled at once
    name: str  # the worker's name, as the broker and the heartbeat know it
    loglevel: str = "INFO"
    ready: Callable[[], None] = lambda: None  # called once the consumer takes messages


def handle(executor: Executor, message: Message, later: Later) -> Settle:
    """Judge ``message`` with ``executor``: how to settle it.

    The message is only a hint: ids must be whole numbers, and the executor claims only
    rows of its run and checks each call's grouping against the ledger. A run this
    worker's database does not have, or a database still away after its retry window,
    puts the message back (a worker that can see the run, or a later try, judges it). Rows
    another delivery held when this one claimed are sent again (``later``) for when that
    lease runs out (at once if it ran out meanwhile: a worker killed a moment before). Any
    other exception is the caller's: the message is dropped.
    """
    run_id, calls = message.run_id, message.calls
    if not isinstance(run_id, int) or not _is_calls(calls):
        log.error("refused a malformed message (run %r): not (run id, [[row ids], ...])", run_id)
        return Settle.ACK
    try:
        summary = run_sync(executor.run_batch(run_id, calls))
    except RunNotFound as exc:
        with _lock:
            said = run_id in _unknown_runs
            _unknown_runs.add(run_id)
        if not said:
            log.error("%s", exc)
        return Settle.REQUEUE
    except Exception as exc:
        if not is_transient(exc):
            raise
        log.warning(
            "run %s: the database is still unavailable after its retry window "
            "(FLASK_EVAL_DB_RETRY_SECONDS): %s; the message goes back to the queue",
            run_id,
            type(exc).__name__,
        )
        return Settle.REQUEUE
    if summary.leased:
        keep = set(summary.leased)
        again = [c for c in ([i for i in call if i in keep] for call in calls) if c]
        later(run_id, again, summary.lease_wait + LOOK_AGAIN_MARGIN)
        log.info(
            "run %s: %d rows leased elsewhere; looking again in %.0f s",
            run_id,
            len(keep),
            summary.lease_wait,
        )
    return Settle.ACK


_lock = threading.Lock()
#: runs this process was sent but its database does not have (said once each)
_unknown_runs: set[int] = set()


def _is_calls(calls: object) -> TypeGuard[list[list[int]]]:
    return isinstance(calls, list) and all(
        isinstance(c, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in c)
        for c in calls
    )


class Consumer(ABC):
    """A broker's worker side, for the queue of ``settings``."""

    #: whether a message a worker took can be lost for good (then the sweeper runs)
    loses_messages: bool = False

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.queue = settings.queue

    @abstractmethod
    def serve(self, work: Work) -> int:
        """Take the queue's messages, ``work.concurrency`` at a time, each handled by
        :func:`handle`, until the process is stopped (SIGTERM or SIGINT: the messages being
        handled are finished first); the exit code."""

    def idle(self) -> bool:
        """No message of the queue is waiting, queued or taken but not settled (False when
        the broker cannot tell)."""
        return False

    def sweep_turn(self, seconds: float) -> bool:
        """Whether this process sweeps this round (one worker per queue per ``seconds``,
        where the broker can say so; else every process: a spare copy is harmless)."""
        return True


class PullConsumer(Consumer):
    """A consumer whose threads pull messages: each takes one (:meth:`receive`), handles
    it, and acknowledges it or puts it back, until :meth:`stop`."""

    #: seconds a thread waits for a message before it looks whether to stop
    poll: float = 0.5
    requeue_pause: float = REQUEUE_PAUSE

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self._stop = threading.Event()

    @abstractmethod
    def receive(self, timeout: float) -> Message | None:
        """The next message (taken, not yet settled), or None after ``timeout`` seconds."""

    @abstractmethod
    def ack(self, message: Message) -> None:
        """Done with ``message``: it leaves the queue."""

    @abstractmethod
    def requeue(self, message: Message) -> None:
        """Put ``message`` back in the queue."""

    @abstractmethod
    def send_later(self, run_id: int, calls: Batch, delay: float) -> None:
        """Send ``(run_id, calls)`` to the queue, to be delivered in ``delay`` seconds."""

    def stop(self) -> None:
        """Take no more messages; :meth:`serve` returns once those taken are settled."""
        self._stop.set()

    def serve(self, work: Work) -> int:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, lambda *_: self.stop())
        threads = [
            threading.Thread(target=self._take, args=(work,), name=f"flask-eval-consumer-{i}")
            for i in range(work.concurrency)
        ]
        for thread in threads:
            thread.start()
        work.ready()
        for thread in threads:
            while thread.is_alive():  # a timeout: signals reach the main thread meanwhile
                thread.join(self.poll)
        return 0

    def _take(self, work: Work) -> None:
        while not self._stop.is_set():
            message = self.receive(self.poll)
            if message is None:
                continue
            try:
                settle = handle(work.executor(), message, self.send_later)
            except Exception:
                log.exception("dropped a message of run %r: it raised", message.run_id)
                settle = Settle.ACK
            if settle is Settle.REQUEUE:
                self._stop.wait(self.requeue_pause)  # keeps a worker from spinning on it
                self.requeue(message)
            else:
                self.ack(message)


# -- the registry --------------------------------------------------------------------


def register_broker(scheme: str, transport: str, consumer: str) -> None:
    """Make the broker URLs of ``scheme`` use ``transport`` and ``consumer``
    ("module:Class" each)."""
    BROKERS[scheme.lower()] = (transport, consumer)


def _load(settings: Settings, side: int) -> Any:
    url = settings.broker_url or ""
    scheme = url.partition("://")[0].lower()
    if scheme not in BROKERS:
        raise ConfigError(f"no broker speaks {scheme}:// (known: {', '.join(sorted(BROKERS))})")
    module, _, name = BROKERS[scheme][side].partition(":")
    return getattr(importlib.import_module(module), name)(settings)


def transport_of(settings: Settings) -> Transport:
    """The producer's side of the broker at ``settings.broker_url``."""
    transport: Transport = _load(settings, 0)
    return transport


def consumer_of(settings: Settings) -> Consumer:
    """The worker's side of the broker at ``settings.broker_url``."""
    consumer: Consumer = _load(settings, 1)
    return consumer


def pause_before_requeue() -> None:
    """The pause before a message that cannot be judged now goes back to the queue."""
    time.sleep(REQUEUE_PAUSE)
