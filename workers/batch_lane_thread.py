"""The batch lane's thread in a worker process (workers/batch_lane.py: the lane)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from flask_eval.core.settings import Settings
from flask_eval.workers.batch_lane import BatchLane

log = logging.getLogger("flask_eval.batches")


class LaneOwner(Protocol):
    """An executor with its lane (``workers.runner.Executor``)."""

    batches: BatchLane


def start(settings: Settings, executor: Callable[[], LaneOwner]) -> threading.Thread:
    """Run the lane's passes in a daemon thread of a worker process: every
    ``settings.batch_poll_seconds`` seconds, if this process holds the lane's lease (any worker
    takes it once its holder stopped renewing it), one :meth:`BatchLane.tick` on the
    process's event loop."""
    from flask_eval.workers.loop import run_sync

    def loop() -> None:
        lane: BatchLane | None = None
        while True:
            time.sleep(settings.batch_poll_seconds)
            try:
                lane = lane or executor().batches
                run_sync(lane.tick())
            except Exception:  # never kill the worker; the next pass tries again
                log.exception("batch lane pass failed")

    thread = threading.Thread(target=loop, name="flask-eval-batch-lane", daemon=True)
    thread.start()
    return thread
