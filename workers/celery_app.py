"""Everything Celery and Kombu: the app (JSON only, late acks), its one task that judges a
batch of calls, and the broker's two sides: ``CeleryTransport`` sends batches to it,
``CeleryConsumer`` runs a Celery worker that takes them (workers/broker.py), and answers
the sweeper from Kombu's own keys on Redis."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from typing import Any

from celery import Celery
from celery.exceptions import Reject

from flask_eval.core import settings as settings_mod
from flask_eval.core.errors import ConfigError
from flask_eval.core.redact import redact
from flask_eval.producer.dispatch import Batch, Transport
from flask_eval.workers.broker import Consumer, Message, Settle, Work, handle, pause_before_requeue

TASK_NAME = "flask_eval.judge_batch"
log = logging.getLogger("flask_eval.worker")

#: Kombu's Redis transport: priority queue keys are ``queue + SEP + priority``
_KOMBU_SEP, _KOMBU_PRIORITIES, _KOMBU_UNACKED = "\x06\x16", (3, 6, 9), "unacked"


def make_app(settings: settings_mod.Settings) -> Celery:
    """The app of producers (which only send) and workers (whose consumer gives it the
    process's executor: ``conf.flask_eval_executor``)."""
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
    app.conf.flask_eval_executor = None
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


def judge_batch(task: Any, run_id: int, calls: list[list[int]]) -> None:
    """Judge ``calls`` (lists of ledger ids, one list per judge call) of run ``run_id``
    (workers.broker.handle). A message that cannot be judged now never raises: a task that
    raised is dropped (late acks), so it goes back to the queue itself (Reject)."""
    app = task.app

    def later(run: int, again: Batch, delay: float) -> None:
        app.send_task(
            TASK_NAME, args=[run, again], countdown=delay, queue=app.conf.task_default_queue
        )

    executor = app.conf.flask_eval_executor
    if executor is None:
        raise ConfigError("this Celery app only sends: it has no executor (CeleryConsumer)")
    if handle(executor(), Message(run_id, calls), later) is Settle.REQUEUE:
        pause_before_requeue()  # Redis and RabbitMQ alike: no spinning on it
        raise Reject("cannot be judged now", requeue=True)


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


class CeleryConsumer(Consumer):
    """A Celery worker on the broker's queue: Celery's threads pool, one message per
    thread, acknowledged late (after its rows are written)."""

    def __init__(self, settings: settings_mod.Settings) -> None:
        super().__init__(settings)
        url = settings.broker_url or ""
        #: Kombu's Redis transport pops a message (BRPOP) before it records it as
        #: unacknowledged: a worker killed between the two loses it (workers/sweeper.py)
        self.loses_messages = url.startswith(("redis://", "rediss://"))
        self._redis: Any = None

    def serve(self, work: Work) -> int:
        from celery.signals import worker_ready
        from celery.utils.log import mlevel

        app = make_app(self.settings)
        app.conf.flask_eval_executor = work.executor
        worker_ready.connect(lambda **_: work.ready(), weak=False)
        # app.Worker, not app.worker_main: the same worker without Celery's command line,
        # whose imports (click-repl, prompt_toolkit, every subcommand) cost ~0.2 s of start-up
        worker = app.Worker(
            pool_cls="threads",
            concurrency=work.concurrency,
            loglevel=mlevel(work.loglevel.upper()),
            hostname=work.name,
            queues=[self.queue],
            without_gossip=True,
            without_mingle=True,
        )
        worker.start()
        return int(worker.exitcode or 0)

    def _client(self) -> Any:
        if self._redis is None:
            import redis

            self._redis = redis.Redis.from_url(self.settings.broker_url or "")
        return self._redis

    def idle(self) -> bool:
        """On Redis: none of the queue's keys holds a message, and Kombu's unacknowledged
        hash holds none routed to it. Elsewhere: cannot tell (False)."""
        if not self.loses_messages:
            return False
        return queue_idle(self._client(), self.queue)

    def sweep_turn(self, seconds: float) -> bool:
        """A Redis lock per queue, held for the round (``flask_eval:sweep:QUEUE``)."""
        lock = f"flask_eval:sweep:{self.queue}"
        return bool(self._client().set(lock, uuid.uuid4().hex, nx=True, ex=max(1, int(seconds))))


def queue_idle(client: Any, queue: str) -> bool:
    """No message of ``queue`` is queued or delivered-but-unacknowledged (Kombu's Redis
    keys, read with the Redis ``client``)."""
    keys = [queue, *(f"{queue}{_KOMBU_SEP}{p}" for p in _KOMBU_PRIORITIES)]
    if any(client.llen(k) for k in keys):
        return False
    for _tag, raw in client.hscan_iter(_KOMBU_UNACKED):
        try:
            routing_key = json.loads(raw)[2]
        except (ValueError, IndexError, TypeError):
            continue
        if routing_key == queue:
            return False
    return True
