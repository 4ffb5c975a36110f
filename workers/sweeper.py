"""The sweeper: send again the judgments whose message the broker lost.

Redis's transport pops a message (``BRPOP``) before it records it as unacknowledged, so
a worker killed between the two loses that message for good: no visibility timeout
brings it back. A kill -9 test lost one message of 255 this way. The ledger still knows
the rows are open, so every worker process runs this loop:

every ``interval`` seconds, one worker (a Redis lock) checks that the queue is empty
and that no message of it is waiting unacknowledged; then the open rows (pending, or
running on an expired lease) of every run whose producer sent all its calls, untouched
for ``grace`` seconds, have no message anywhere, and they are sent again. A spare copy
costs nothing: claims make a second delivery skip rows that are done or leased. Runs
held back by ``--max-cost`` are never swept (see ``pipeline.mark_dispatched``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from typing import Any

from flask_eval.core.settings import Settings
from flask_eval.storage import queries
from flask_eval.storage.store import Store

log = logging.getLogger("flask_eval.sweeper")

#: kombu's Redis transport: priority queue keys are ``queue + SEP + priority``
_KOMBU_SEP, _KOMBU_PRIORITIES, _KOMBU_UNACKED = "\x06\x16", (3, 6, 9), "unacked"


def queue_idle(client: Any, queue: str) -> bool:
    """No message of ``queue`` is queued or delivered-but-unacknowledged."""
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


def sweep(store: Store, client: Any, settings: Settings, grace: float) -> int:
    """One pass (the caller holds the lock); returns how many calls were sent again."""
    if not queue_idle(client, settings.queue):
        return 0
    from flask_eval.producer.dispatch import dispatch_open
    from flask_eval.workers.celery_app import CeleryTransport

    dispatcher = CeleryTransport(settings)
    sent = 0
    for run in queries.stale_open_runs(store, grace, settings.queue):
        # calls sent before, within the budget then: not estimated again (a metered
        # estimate would read every text of the run into this worker)
        result = dispatch_open(store, run, dispatcher, settings.calls_per_message, meter=False)
        if result.sent:
            log.warning(
                "run %s: sent %d calls again; their messages were lost by the broker",
                run.name,
                result.sent,
            )
        sent += result.sent
    return sent


def start(settings: Settings, interval: float | None = None) -> threading.Thread | None:
    """Run the sweeper in a daemon thread of this worker process (Redis brokers only)."""
    url = settings.broker_url or ""
    if not url.startswith(("redis://", "rediss://")):
        return None
    import redis

    every = interval if interval is not None else max(5.0, settings.visibility_timeout / 2)
    grace = settings.visibility_timeout
    lock_key = f"flask_eval:sweep:{settings.queue}"

    def loop() -> None:
        client = redis.Redis.from_url(url)
        store: Store | None = None
        while True:
            time.sleep(every)
            try:
                if not client.set(lock_key, uuid.uuid4().hex, nx=True, ex=max(1, int(every))):
                    continue  # another worker sweeps this round
                store = store or Store(settings.database_url)
                sweep(store, client, settings, grace)
            except Exception:  # never kill the worker; the next round tries again
                log.exception("sweeper round failed")

    thread = threading.Thread(target=loop, name="flask-eval-sweeper", daemon=True)
    thread.start()
    return thread
