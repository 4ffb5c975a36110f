"""An in-memory broker, both sides in one module: the unit tests' (and the smallest whole
example of a broker: workers/broker.py).

Its queues live in this process, one per (broker URL, queue name): a ``StubTransport`` and
a ``StubConsumer`` built from the same settings share one. A message taken and not
settled waits as unacknowledged (a lost worker's would come back only through the
sweeper: ``loses_messages``); :meth:`StubQueue.lose` drops one the way a broker loses it.
Delayed messages are delivered once their time has come.

Register it for a URL scheme to run the worker's whole start-up on it::

    register_broker("stub", "flask_eval.workers.stub_broker:StubTransport",
                    "flask_eval.workers.stub_broker:StubConsumer")
"""

from __future__ import annotations

import collections
import itertools
import threading
import time
from collections.abc import Sequence

from flask_eval.core.settings import Settings
from flask_eval.producer.dispatch import Batch, Transport
from flask_eval.workers.broker import Message, PullConsumer, Work


class StubQueue:
    """One queue: ready messages, taken ones not yet settled, delayed ones."""

    def __init__(self) -> None:
        self.ready: collections.deque[tuple[int, Batch]] = collections.deque()
        self.unacked: dict[int, tuple[int, Batch]] = {}
        self.delayed: list[tuple[float, tuple[int, Batch]]] = []
        self.consumers: set[str] = set()
        self.sent = 0  # messages put in the queue, ever
        self._tags = itertools.count(1)
        self._changed = threading.Condition()

    def put(self, body: tuple[int, Batch], delay: float = 0.0) -> None:
        with self._changed:
            self.sent += 1
            if delay > 0:
                self.delayed.append((time.monotonic() + delay, body))
            else:
                self.ready.append(body)
            self._changed.notify()

    def take(self, timeout: float) -> tuple[int, tuple[int, Batch]] | None:
        """The next ready message, marked unacknowledged under a new tag."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                now = time.monotonic()
                due = [d for d in self.delayed if d[0] <= now]
                for d in due:
                    self.delayed.remove(d)
                    self.ready.append(d[1])
                if self.ready:
                    tag = next(self._tags)
                    self.unacked[tag] = self.ready.popleft()
                    return tag, self.unacked[tag]
                left = deadline - now
                if self.delayed:
                    left = min(left, min(d[0] for d in self.delayed) - now)
                if deadline <= now:
                    return None
                self._changed.wait(max(0.0, left))

    def settle(self, tag: int, requeue: bool) -> None:
        with self._changed:
            body = self.unacked.pop(tag, None)
            if requeue and body is not None:
                self.ready.append(body)
                self._changed.notify()

    def lose(self) -> tuple[int, Batch] | None:
        """Drop the next ready message, as a worker killed just after taking it would."""
        with self._changed:
            return self.ready.popleft() if self.ready else None

    def idle(self) -> bool:
        with self._changed:
            return not (self.ready or self.unacked or self.delayed)


_queues: dict[tuple[str, str], StubQueue] = {}
_queues_lock = threading.Lock()


def stub_queue(settings: Settings) -> StubQueue:
    """The queue of ``settings`` (its broker URL and queue name), created on first use."""
    key = (settings.broker_url or "", settings.queue)
    with _queues_lock:
        return _queues.setdefault(key, StubQueue())


class StubTransport(Transport):
    """The producer's side: batches put in the in-memory queue."""

    def __init__(self, settings: Settings) -> None:
        self.queue = settings.queue
        self.messages = stub_queue(settings)

    def submit(self, run_id: int, batches: Sequence[Batch]) -> None:
        for batch in batches:
            self.messages.put((run_id, batch))

    def consumers(self) -> list[str] | None:
        return sorted(self.messages.consumers)


class StubConsumer(PullConsumer):
    """The worker's side: threads that take the in-memory queue's messages."""

    loses_messages = True  # the sweeper runs: StubQueue.lose plays the lost message

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.messages = stub_queue(settings)

    def receive(self, timeout: float) -> Message | None:
        taken = self.messages.take(timeout)
        if taken is None:
            return None
        tag, (run_id, calls) = taken
        return Message(run_id, calls, receipt=tag)

    def ack(self, message: Message) -> None:
        self.messages.settle(int(message.receipt), requeue=False)

    def requeue(self, message: Message) -> None:
        self.messages.settle(int(message.receipt), requeue=True)

    def send_later(self, run_id: int, calls: Batch, delay: float) -> None:
        self.messages.put((run_id, calls), delay)

    def idle(self) -> bool:
        return self.messages.idle()

    def serve(self, work: Work) -> int:
        self.messages.consumers.add(work.name)
        try:
            return super().serve(work)
        finally:
            self.messages.consumers.discard(work.name)
