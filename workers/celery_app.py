"""Everything Celery: the app (JSON only, late acks), its one task that judges a batch of
calls, and the transport that sends batches to it (``CeleryTransport``)."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from functools import cache
from typing import Any, NoReturn

from celery import Celery
from celery.exceptions import Reject

from flask_eval.core import settings as settings_mod
from flask_eval.core.errors import ConfigError
from flask_eval.core.redact import install_log_redaction, redact
from flask_eval.producer.dispatch import Batch, Transport
from flask_eval.storage.retry import is_transient
from flask_eval.storage.store import Store
from flask_eval.workers.limiter import Limiter, MemoryLimiter
from flask_eval.workers.limiter_redis import RedisLimiter
from flask_eval.workers.loop import run_sync
from flask_eval.workers.runner import Executor, RunNotFound, executor_config

TASK_NAME = "flask_eval.judge_batch"
DEFAULT_IN_FLIGHT = 256
#: seconds after a lease runs out before its rows are looked at again
LOOK_AGAIN_MARGIN = 1.0
#: seconds a message this worker cannot judge now waits before it goes back to the queue
REQUEUE_PAUSE = 2.0
log = logging.getLogger("flask_eval.worker")


def make_app(settings: settings_mod.Settings, in_flight: int = DEFAULT_IN_FLIGHT) -> Celery:
    """The app of producers (which only send) and workers (whose executors keep
    ``in_flight`` judge calls in flight per process)."""
    app = Celery("flask_eval", broker=settings.broker_url, set_as_current=False)
    app.conf.update(
        # JSON only: a pickled message is refused, never executed.
        task_serializer="json",
        accept_content=["json"],
        result_serializer="json",
        result_accept_content=["json"],
        event_serializer="json",
        task_ignore_result=True,
        # At-least-once delivery; the SQL ledger makes the result exactly-once.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        # A task that raised is rejected without requeue (Celery's rule for late acks:
        # dropped on both brokers). So a message that cannot be judged *now* (the
        # database still away after its retry window, a run this worker's database does
        # not have) never raises: judge_batch puts it back in the queue itself.
        task_acks_on_failure_or_timeout=False,
        task_publish_retry=True,
        task_publish_retry_policy={
            "max_retries": 60,
            "interval_start": 0.2,
            "interval_step": 0.5,
            "interval_max": 5,
        },
        worker_prefetch_multiplier=1,
        broker_transport_options=transport_options(settings.visibility_timeout),
        task_default_queue=settings.queue,
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
    )
    app.conf.flask_eval_in_flight = in_flight
    app.task(name=TASK_NAME, ignore_result=True, bind=True)(judge_batch)
    return app


def transport_options(visibility_timeout: float) -> dict[str, float]:
    """The broker's options. On Redis, a message left unacknowledged by a dead worker is
    handed back by a periodic scan, which Kombu runs every ``unacked_restore_interval`` x
    ``unacked_restore_throttle`` seconds (10 x 10 by default): with our short visibility
    timeout, a kill -9 took 100 s more than the timeout to recover. The scan now runs
    every quarter of the timeout (at most every 10 s, and never more than once a second),
    so the messages come back within a timeout and a quarter (plus at most 1 s).
    RabbitMQ ignores these options."""
    return {
        "visibility_timeout": visibility_timeout,
        "unacked_restore_interval": min(10.0, max(1.0, visibility_timeout / 4)),
        "unacked_restore_throttle": 1,
    }


_executor_lock = threading.Lock()


def process_executor(in_flight: int) -> Executor:
    """This process's one executor (created on first use, under the lock: the task
    threads and the batch lane's thread share it)."""
    with _executor_lock:
        return _executor(os.getpid(), in_flight)


@cache
def _executor(pid: int, in_flight: int) -> Executor:
    settings = settings_mod.load()
    store = Store(settings.database_url)
    config = executor_config(settings, in_flight)
    install_log_redaction()
    return Executor(store, config, limiter=_limiter(settings))


def _limiter(settings: settings_mod.Settings) -> Limiter:
    """Budgets shared through Redis by every worker (the broker's, unless
    FLASK_EVAL_LIMITER_URL names another Redis; with a RabbitMQ broker and no limiter
    URL, each process keeps its own)."""
    url = settings.limiter_url or settings.broker_url or ""
    if url.startswith(("redis://", "rediss://")):
        return RedisLimiter(url, {})
    return MemoryLimiter({})


def judge_batch(task: Any, run_id: int, calls: list[list[int]]) -> dict[str, Any]:
    """Judge ``calls`` (lists of ledger ids, one list per judge call) of run ``run_id``.

    The message is only a hint: ids must be whole numbers, and the executor claims only
    rows of ``run_id`` and checks each call's grouping against the ledger.
    """
    if not isinstance(run_id, int) or not _is_calls(calls):
        log.error("refused a malformed message (run %r): not (run id, [[row ids], ...])", run_id)
        return {"refused": True}
    executor = process_executor(int(task.app.conf.flask_eval_in_flight))
    try:
        summary = run_sync(executor.run_batch(run_id, calls))
    except RunNotFound as exc:
        with _executor_lock:
            said = run_id in _unknown_runs
            _unknown_runs.add(run_id)
        if not said:
            log.error("%s", exc)
        _requeue(exc)  # a worker that can see the run may take it
    except Exception as exc:
        if not is_transient(exc):
            raise
        log.warning(
            "run %s: the database is still unavailable after its retry window "
            "(FLASK_EVAL_DB_RETRY_SECONDS): %s; the message goes back to the queue",
            run_id,
            type(exc).__name__,
        )
        _requeue(exc)
    if summary.leased:
        _look_again(task, run_id, calls, summary.leased, summary.lease_wait)
    return vars(summary)


#: runs this process was sent but its database does not have (said once each)
_unknown_runs: set[int] = set()


def _requeue(exc: Exception) -> NoReturn:
    """Give the message back to the queue, after a pause (Redis and RabbitMQ alike; the
    pause keeps a worker that cannot judge it from spinning on it)."""
    time.sleep(REQUEUE_PAUSE)
    raise Reject(exc, requeue=True) from exc


def _look_again(
    task: Any, run_id: int, calls: list[list[int]], leased: list[int], wait: float
) -> None:
    """Rows another delivery holds under a live lease: send them again for when that lease
    runs out. If their holder is alive, they are done by then (or leased still, and sent
    again); if it died (kill -9: RabbitMQ hands its unacknowledged messages back at once,
    before its leases run out), they are claimed then."""
    keep = set(leased)
    again = [[i for i in call if i in keep] for call in calls]
    task.app.send_task(
        TASK_NAME,
        args=[run_id, [c for c in again if c]],
        countdown=wait + LOOK_AGAIN_MARGIN,
        queue=task.app.conf.task_default_queue,
    )
    log.info("run %s: %d rows leased elsewhere; looking again in %.0f s", run_id, len(keep), wait)


def _is_calls(calls: object) -> bool:
    return isinstance(calls, list) and all(
        isinstance(c, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in c)
        for c in calls
    )


class CeleryTransport(Transport):
    """Batches as Celery messages (JSON only) on the broker's queue."""

    def __init__(self, settings: settings_mod.Settings) -> None:
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
        with self.app.producer_or_acquire() as producer:
            for batch in batches:
                # argsrepr: Celery would otherwise build a repr of every id for its logs
                # (~10% of a large run's dispatch)
                self.app.send_task(
                    TASK_NAME,
                    args=[run_id, batch],
                    producer=producer,
                    queue=self.settings.queue,
                    argsrepr=f"[{run_id}, <{len(batch)} calls>]",
                    kwargsrepr="{}",
                )

    def consumers(self) -> list[str] | None:
        replies = self.app.control.inspect(timeout=1.0).active_queues() or {}
        return sorted(
            worker
            for worker, queues in replies.items()
            if any(q.get("name") == self.settings.queue for q in queues or ())
        )
