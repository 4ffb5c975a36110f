"""`flask-eval worker`: P worker processes, N judge calls in flight in each.

Each process takes messages through its broker's consumer (workers/broker.py; Celery's
threads pool on Redis and RabbitMQ); its threads hand their batches to the
process's one event loop (workers/loop.py), where up to N calls are in flight. A message
carries several calls, and there are enough threads that batches waiting for their
slowest calls do not leave the lanes idle; each claims its rows only when the lanes are
about to need them (workers/feed.py).
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from flask_eval.core import settings as settings_mod
from flask_eval.core.errors import ConfigError

if TYPE_CHECKING:
    from flask_eval.workers.events import WorkerStats
    from flask_eval.workers.limiter import Limiter
    from flask_eval.workers.runner import Executor

log = logging.getLogger("flask_eval.worker")


def run_one(
    in_flight: int, loglevel: str = "INFO", index: int = 0, metrics: Serving | None = None
) -> int:
    """Run one worker in this process (blocks until it is stopped); its exit code. It
    takes messages through the consumer of FLASK_EVAL_BROKER_URL's broker
    (workers/broker.py). ``metrics``: where to serve its Prometheus metrics
    (workers/metrics.py)."""
    settings = settings_mod.load()
    if not settings.broker_url:
        raise ConfigError(
            "FLASK_EVAL_BROKER_URL is not set: workers need a broker, e.g. redis://127.0.0.1:6379/0"
        )
    from flask_eval.workers import batch_lane_thread, events, sweeper
    from flask_eval.workers.broker import Work, consumer_of
    from flask_eval.workers.feed import batches_at_once

    consumer = consumer_of(settings)
    metrics_url = None
    if metrics is not None:
        from flask_eval.workers.metrics import serve

        serve(metrics.host, metrics.port)
        metrics_url = f"http://{socket.gethostname()}:{metrics.port}/metrics"
    stats = events.WorkerStats()
    events.subscribe(stats)
    # built before any thread starts: the executor imports the Redis client (its limiter)
    # here, not in the batch lane's thread while the consumer imports it in this one (two
    # threads importing a package's cyclic modules at once raise Python's _DeadlockError)
    process_executor(in_flight)
    sweeper.start(settings, consumer)
    batch_lane_thread.start(settings, lambda: process_executor(in_flight))
    name = f"flask-eval-{os.getpid()}-{index}@{socket.gethostname()}"
    heartbeat = start_heartbeat(settings, name, stats, metrics_url)
    quiet_per_request_logs(loglevel)
    work = Work(
        executor=lambda: process_executor(in_flight),
        concurrency=batches_at_once(in_flight, settings.calls_per_message),
        name=name,
        loglevel=loglevel,
        ready=tune_gc,
    )
    try:
        return consumer.serve(work)
    finally:
        heartbeat.stop()  # a worker that stops says so: the producer need not wait 30 s


_executor_lock = threading.Lock()
_executors: dict[tuple[int, int], Executor] = {}


def process_executor(in_flight: int) -> Executor:
    """This process's one executor (created on first use, under the lock: the consumer's
    threads and the batch lane's thread share it; a forked child makes its own)."""
    with _executor_lock:
        key = (os.getpid(), in_flight)
        if key not in _executors:
            _executors[key] = _new_executor(in_flight)
        return _executors[key]


def _new_executor(in_flight: int) -> Executor:
    from flask_eval.core.redact import install_log_redaction
    from flask_eval.storage.store import Store
    from flask_eval.workers.runner import Executor, executor_config

    settings = settings_mod.load()
    store = Store(settings.database_url)
    install_log_redaction()
    return Executor(store, executor_config(settings, in_flight), limiter=_limiter(settings))


def _limiter(settings: settings_mod.Settings) -> Limiter:
    """Budgets shared through Redis by every worker (the broker's, unless
    FLASK_EVAL_LIMITER_URL names another Redis; with another broker and no limiter URL,
    each process keeps its own)."""
    from flask_eval.workers.limiter import MemoryLimiter
    from flask_eval.workers.limiter_redis import RedisLimiter

    url = settings.limiter_url or settings.broker_url or ""
    if url.startswith(("redis://", "rediss://")):
        return RedisLimiter(url, {})
    return MemoryLimiter({})


#: seconds between two announcements of a worker in the database
HEARTBEAT_SECONDS = 5.0
#: loggers that write a line per request or per message at INFO
PER_REQUEST_LOGGERS = (
    "httpx",
    "httpx2",
    "httpcore",
    "openai",
    "anthropic",
    "celery.app.trace",
    "celery.worker.strategy",
)


def quiet_per_request_logs(loglevel: str) -> None:
    """Per-request and per-message lines only at DEBUG (1.9 MB per 20,000 calls at INFO)."""
    if loglevel.upper() != "DEBUG":
        for name in PER_REQUEST_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)


class Heartbeat:
    """Announce a worker in its database every few seconds, so that a producer can tell
    "no worker" from "workers that use another database" (app/waiting.py); :meth:`stop`
    withdraws the announcement, so that a producer sees at once that a worker which
    stopped cleanly is gone (one killed is seen when its last beat is 30 s old)."""

    def __init__(
        self,
        settings: settings_mod.Settings,
        name: str,
        stats: WorkerStats | None = None,
        metrics_url: str | None = None,
    ) -> None:
        from flask_eval.storage.models import utcnow

        self.settings, self.name, self.started = settings, name, utcnow()
        self.stats, self.metrics_url = stats, metrics_url
        self._stopped = threading.Event()
        self._lock = threading.Lock()  # a beat and the withdrawal never interleave
        self.thread = threading.Thread(target=self._run, name="flask-eval-heartbeat", daemon=True)

    def _run(self) -> None:
        from flask_eval.storage.store import Store

        store: Store | None = None
        while not self._stopped.is_set():
            try:
                with self._lock:
                    if self._stopped.is_set():
                        return
                    store = store or Store(self.settings.database_url)
                    store.beat(self.name, self.settings.queue, self.started, **self.said())
            except Exception:  # an outage: the next beat tries again
                log.warning("worker heartbeat failed", exc_info=True)
            self._stopped.wait(HEARTBEAT_SECONDS)

    def said(self) -> dict[str, str | int | None]:
        """What a beat says besides "alive": where, and how busy (the live view)."""
        stats = self.stats
        return {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "metrics_url": self.metrics_url,
            "in_flight": max(stats.in_flight, 0) if stats else 0,
            "calls": stats.calls if stats else 0,
        }

    def stop(self) -> None:
        """No more beats, and this worker's announcement withdrawn (best effort: if the
        database is away, the announcement simply ages out)."""
        from flask_eval.storage.store import Store

        self._stopped.set()
        with self._lock:
            try:
                store = Store(self.settings.database_url)
                try:
                    store.forget_worker(self.name)
                finally:
                    store.close()
            except Exception:
                log.warning("could not withdraw the worker's announcement", exc_info=True)


def start_heartbeat(
    settings: settings_mod.Settings,
    name: str,
    stats: WorkerStats | None = None,
    metrics_url: str | None = None,
) -> Heartbeat:
    """A started :class:`Heartbeat` of the worker ``name``."""
    heartbeat = Heartbeat(settings, name, stats, metrics_url)
    heartbeat.thread.start()
    return heartbeat


#: collect the youngest generation every 7,000 net container allocations, not 700
GC_GEN0_THRESHOLD = 7_000


def tune_gc(**_signal: object) -> None:
    """Once the worker is up: freeze what start-up built, and collect young objects less often.

    A worker at 0 ms latency spent ~10% of its CPU in the cyclic garbage collector: each
    judge call allocates thousands of short-lived SDK objects, which trigger a young
    collection every 700 net allocations, and every full collection walked the ~120,000
    objects of the imports (SQLAlchemy, Celery, the SDKs) that live as long as the
    process. ``gc.freeze`` moves those out of the collector's sight, and a 10x young
    threshold lets most short-lived objects die by reference counting first.
    Measured in docs/design/concurrency.md.
    """
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)


@dataclass(frozen=True)
class Serving:
    """Where a worker process serves its metrics: ``http://host:port/metrics``."""

    host: str
    port: int


def run(
    processes: int,
    in_flight: int,
    loglevel: str = "INFO",
    metrics: Serving | None = None,
    log_format: str = "text",
) -> int:
    """Run ``processes`` workers; returns an exit code. ``metrics``: the first process
    serves on its port, the next on port + 1, and so on (each checked first)."""
    if processes < 1 or in_flight < 1:
        raise ConfigError("--processes and --in-flight must be at least 1")
    settings_mod.load()  # fail fast on bad settings
    if metrics is not None:
        from flask_eval.workers.metrics import check_port

        for i in range(processes):
            check_port(metrics.host, metrics.port + i)
    if processes == 1:
        return run_one(in_flight, loglevel, metrics=metrics)
    from flask_eval.workers.processes import command

    def child(i: int) -> list[str]:
        cmd = command(1, in_flight, loglevel, log_format)
        if metrics is not None:
            cmd += ["--metrics-host", metrics.host, "--metrics-port", str(metrics.port + i)]
        return cmd

    children = [subprocess.Popen(child(i)) for i in range(processes)]

    def forward(signum: int, _frame: object) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    code = 0
    while any(c.poll() is None for c in children):
        for c in children:
            if c.poll() not in (None, 0) and code == 0:
                code = c.returncode or 1
                forward(
                    signal.SIGTERM, None
                )  # one died: stop the rest, let a supervisor restart us
        time.sleep(0.5)
    return code
