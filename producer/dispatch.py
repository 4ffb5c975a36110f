"""The transport interface (how planned batches reach an executor), and the one way a
run's open calls are dispatched, by `run`, `resume` and the workers' sweeper alike.

A transport is one subclass of :class:`Transport`, a broker's producer side (its worker
side is a ``workers.broker.Consumer``; ``workers.broker.BROKERS`` names both by URL
scheme): ``workers.celery_app.CeleryTransport`` sends batches through Redis or RabbitMQ to
Celery workers and is the only code that knows Celery; ``workers.stub_broker`` keeps both
sides in memory (unit tests). ``workers.inprocess.InProcessTransport`` runs the executor
in this process (the embedded default, no broker); :class:`MemoryTransport` only records
the batches (unit tests)."""

from __future__ import annotations

import hashlib
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice

from flask_eval.core.types import Price
from flask_eval.producer.estimate import CHUNK, CallCosts, Estimator
from flask_eval.producer.plan import batches, open_call_stream
from flask_eval.storage import queries
from flask_eval.storage.records import PlannedCall, RunInfo
from flask_eval.storage.store import Store

Batch = list[list[int]]


class Transport(ABC):
    #: the broker queue the batches go to (None: executed here)
    queue: str | None = None

    @abstractmethod
    def submit(self, run_id: int, batches: Sequence[Batch]) -> None:
        """Hand ``batches`` over for execution."""

    def join(self) -> None:  # noqa: B027  (default hook)
        """Wait for local execution (no-op where execution is remote)."""

    def check(self) -> None:  # noqa: B027  (default hook)
        """Raise ConfigError if the dispatcher cannot work (before anything is written)."""

    def pause(self, seconds: float) -> None:
        """Wait ``seconds`` before the ledger is looked at again (a transport that knows
        when its work is over returns then, if sooner)."""
        time.sleep(seconds)

    def consumers(self) -> list[str] | None:
        """Workers taking this dispatcher's queue, as the broker knows them (None: not
        applicable, execution is local)."""
        return None


class MemoryTransport(Transport):
    def __init__(self) -> None:
        self.sent: list[tuple[int, Batch]] = []

    def submit(self, run_id: int, batches: Sequence[Batch]) -> None:
        self.sent.extend((run_id, b) for b in batches)


@dataclass(frozen=True)
class Dispatched:
    sent: int  # calls sent
    held_back: int = 0  # calls left pending by the run's --max-cost budget
    held_back_rows: int = 0
    estimated_cost: float = 0.0  # of the calls sent
    spent: float = 0.0  # metered before
    #: calls sent that the answer cache will answer, free (counted only when estimating)
    cached: int = 0


def metered(run: RunInfo) -> bool:
    """Whether dispatching ``run`` estimates the cost of its calls: it has a budget, or a
    judge with a price above 0 (else every estimate would be $0: prompts are not
    rendered for it)."""
    return run.config.max_cost is not None or any(
        j.price not in (None, Price()) for j in run.config.judges
    )


def dispatch_open(
    store: Store,
    run: RunInfo,
    dispatcher: Transport,
    calls_per_message: int,
    estimator: CallCosts | None = None,
    meter: bool = True,
    calls: Iterable[PlannedCall] | None = None,
) -> Dispatched:
    """Send every open call of ``run``, within the run's stored cost budget.

    The budget (``--max-cost``, kept with the run) belongs to the run: calls go in order
    only while the cost already metered for the run plus the estimated cost of the calls
    sent stays within it. On a broker, the run is marked fully dispatched to the queue
    only when nothing was held back, so that the sweeper never sends what the budget
    kept back (workers/sweeper.py). ``meter`` False sends without estimating: for calls
    sent before, whose cost the budget counted then (the sweeper's). ``calls``: the open
    calls when the caller knows them (a ledger it has just written), else read from it.
    """
    calls = iter(calls) if calls is not None else open_call_stream(store, run)
    max_cost = run.config.max_cost
    if max_cost is not None and meter:
        calls = iter(balanced(calls))
    if not meter or not metered(run):
        # nothing to meter: skip rendering every prompt for an estimate of $0
        sent = _send(run.id, calls, dispatcher, calls_per_message)
        _mark(store, run, dispatcher, complete=True)
        return Dispatched(sent)
    estimator = estimator or Estimator.of_run(store, run)
    spent = queries.status(store, run.id, run.name).cost
    estimated, cached = 0.0, 0
    over: list[PlannedCall] = []  # the estimated calls past the budget

    def within_budget() -> Iterator[PlannedCall]:
        nonlocal estimated, cached
        while chunk := list(islice(calls, CHUNK)):
            for k, one in enumerate(estimator.each(chunk)):
                if max_cost is not None and spent + estimated + one.cost > float(max_cost):
                    over.extend(chunk[k:])
                    return
                estimated += one.cost
                cached += one.cached
                yield one.call

    sent = _send(run.id, within_budget(), dispatcher, calls_per_message)
    held, held_rows = len(over), sum(len(c.ids) for c in over)
    for call in calls:  # what the budget holds back: counted, not kept (nor estimated)
        held += 1
        held_rows += len(call.ids)
    _mark(store, run, dispatcher, complete=not held)
    return Dispatched(sent, held, held_rows, estimated, spent, cached)


def _instance_order(instance_id: str) -> bytes:
    return hashlib.blake2b(instance_id.encode(), digest_size=8).digest()


def balanced(calls: Iterable[PlannedCall]) -> list[PlannedCall]:
    """``calls`` in the order a budgeted run (``--max-cost``) sends them: instance by
    instance, each instance's calls of every model and judge together, so that a budget
    that stops part-way leaves every model and judge the same instances (one instance
    apart at most). Instances go in a fixed order by a hash of their id, a sample spread
    over the whole set rather than its first rows; a later, larger budget continues in
    the same order. The run's open calls are held to be ordered."""
    return sorted(calls, key=lambda c: (_instance_order(c.instance_id), c.instance_id))


#: messages handed to the transport at a time
SUBMIT_MESSAGES = 256


def _send(
    run_id: int, calls: Iterable[PlannedCall], dispatcher: Transport, calls_per_message: int
) -> int:
    """Submit ``calls`` in messages of ``calls_per_message``, a few hundred messages at a
    time; returns the calls sent."""
    sent = 0
    it = iter(calls)
    while chunk := [c.ids for c in islice(it, calls_per_message * SUBMIT_MESSAGES)]:
        dispatcher.submit(run_id, batches(chunk, calls_per_message))
        sent += len(chunk)
    return sent


def _mark(store: Store, run: RunInfo, dispatcher: Transport, complete: bool) -> None:
    if dispatcher.queue is not None:
        store.set_dispatched(run.id, dispatcher.queue if complete else None)
