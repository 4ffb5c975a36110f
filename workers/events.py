"""What the executor tells observers as it works: a request left, was answered or failed,
a 429, a wait for the shared budget, a provider batch changed state, judgments written
(docs/design/events.md).

The executor (workers/runner.py, asking.py, sender.py, batch_lane.py) emits small frozen
events to the observers registered in this process: the Prometheus metrics
(workers/metrics.py) and the worker's heartbeat counters (:class:`WorkerStats`) are
observers; the tests register a :class:`Recorder`. With no observer registered an emitting
site costs one truth test of :data:`OBSERVERS`
(``if events.OBSERVERS: events.emit(...)``): no event is built. An observer must be quick
and must not block (it runs on the executor's event loop); one that raises is logged once
and dropped, never raising into the executor.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from flask_eval.core.types import JudgeConfig
    from flask_eval.storage.records import JobContext, Outcome
    from flask_eval.workers.judge import JudgeOutput

log = logging.getLogger("flask_eval.worker")


@dataclass(frozen=True, slots=True)
class CallStarted:
    """A request to a judge left this process (each retry is one more)."""

    run_id: int
    judge: str


@dataclass(frozen=True, slots=True)
class CallAnswered:
    """A judge call got an answer. ``source``: ``paid`` (a request of this process, which
    :class:`CallStarted` announced), ``cache`` (the answer cache: free, no request) or
    ``batch`` (a provider batch's answer, collected)."""

    run_id: int
    judge: str
    source: str
    latency_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost: float = 0.0


@dataclass(frozen=True, slots=True)
class CallFailed:
    """A request that :class:`CallStarted` announced ended without an answer (``reason``:
    a ``core.errors.FailureReason``, or ``cancelled``); it may be retried."""

    run_id: int
    judge: str
    reason: str


@dataclass(frozen=True, slots=True)
class RateLimited:
    """The judge's endpoint answered 429 (the shared budget is slowed for everyone)."""

    run_id: int
    judge: str


@dataclass(frozen=True, slots=True)
class LimiterWait:
    """A request waited ``seconds`` for the judge's shared budget (rpm/tpm) before it left."""

    judge: str
    seconds: float


@dataclass(frozen=True, slots=True)
class BatchStateChanged:
    """A provider batch of a judge changed state (``submitted``, ``collected``,
    ``failed``); ``size``: its requests (the calls it held, for a failed one)."""

    run_id: int
    judge: str
    state: str
    size: int = 0
    #: the run's batches of this judge by state, as the ledger has them after the change
    counts: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class JudgmentsWritten:
    """Ledger rows of one judge ended and were written: ``counts`` of (status, reason)
    (reason ``""`` for done rows)."""

    run_id: int
    judge: str
    counts: tuple[tuple[str, str, int], ...]


Event = (
    CallStarted
    | CallAnswered
    | CallFailed
    | RateLimited
    | LimiterWait
    | BatchStateChanged
    | JudgmentsWritten
)


class Observer(Protocol):
    """Anything with ``observe(event)``: quick, non-blocking, called on the emitting thread."""

    def observe(self, event: Event) -> None: ...


#: the observers of this process; emitting sites test it before building an event
OBSERVERS: list[Observer] = []


def subscribe(observer: Observer) -> Observer:
    """Register ``observer`` for this process's events; returns it."""
    OBSERVERS.append(observer)
    return observer


def unsubscribe(observer: Observer) -> None:
    """Stop telling ``observer`` (no error if it was not registered)."""
    if observer in OBSERVERS:
        OBSERVERS.remove(observer)


def emit(event: Event) -> None:
    """Tell every observer; one that raises is logged once and dropped."""
    for observer in tuple(OBSERVERS):
        try:
            observer.observe(event)
        except Exception:
            log.exception("event observer %r failed; it is dropped", observer)
            unsubscribe(observer)


def answered(
    run_id: int, config: JudgeConfig, output: JudgeOutput, source: str, latency_s: float = 0.0
) -> CallAnswered:
    """The event of an answer ``output`` of ``config``'s judge, costed at its price (the
    batch price for a provider batch's answer)."""
    cost = config.cost(
        output.prompt_tokens,
        output.completion_tokens,
        cached_tokens=output.cached_tokens,
        cache_write_tokens=output.cache_write_tokens,
        batch=source == "batch",
    )
    return CallAnswered(
        run_id,
        config.name,
        source,
        latency_s,
        output.prompt_tokens,
        output.completion_tokens,
        output.cached_tokens,
        cost,
    )


def emit_written(outcomes: Sequence[Outcome], rows: Sequence[JobContext]) -> None:
    """One :class:`JudgmentsWritten` per (run, judge) of ``outcomes`` (of ``rows``)."""
    of = {r.id: (r.run_id, r.judge) for r in rows}
    counts: dict[tuple[int, str], dict[tuple[str, str], int]] = {}
    for o in outcomes:
        by = counts.setdefault(of.get(o.id, (0, "")), {})
        key = (str(o.status), o.reason or "")
        by[key] = by.get(key, 0) + 1
    for (run_id, judge), by in counts.items():
        emit(JudgmentsWritten(run_id, judge, tuple((s, r, n) for (s, r), n in by.items())))


E = TypeVar("E")


class Recorder:
    """An observer that keeps every event (tests): ``events``, or ``of(kind)``."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()

    def observe(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)

    def of(self, kind: type[E]) -> list[E]:
        with self._lock:
            return [e for e in self.events if isinstance(e, kind)]


class WorkerStats:
    """Counters a worker's heartbeat announces (workers/worker.py): requests in flight now
    and calls answered so far by this process (from cache, batch or paid)."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.calls = 0

    def observe(self, event: Event) -> None:
        if isinstance(event, CallStarted):
            self.in_flight += 1
        elif isinstance(event, CallAnswered):
            if event.source == "paid":
                self.in_flight -= 1
            self.calls += 1
        elif isinstance(event, CallFailed):
            self.in_flight -= 1
