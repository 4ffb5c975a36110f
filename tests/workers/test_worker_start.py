"""A worker process builds its executor (which imports the Redis client for its limiter)
before it starts its sweeper and batch-lane threads: a thread importing ``redis.asyncio``
while the consumer imports ``redis`` in the main thread made the worker die at start-up
with Python's ``_DeadlockError`` (seen with a short ``FLASK_EVAL_BATCH_POLL_SECONDS``)."""

from __future__ import annotations

from typing import Any

import pytest

from flask_eval.workers import batch_lane_thread, broker, events, sweeper, worker


def test_the_executor_is_built_before_any_thread_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    order: list[str] = []

    class Consumer:
        def serve(self, work: Any) -> int:
            order.append("serve")
            return 0

    class Beat:
        def stop(self) -> None:
            order.append("stop")

    monkeypatch.setenv("FLASK_EVAL_BROKER_URL", "redis://127.0.0.1:6379/0")
    monkeypatch.setattr(broker, "consumer_of", lambda settings: Consumer())
    monkeypatch.setattr(worker, "_new_executor", lambda in_flight: order.append("executor"))
    monkeypatch.setattr(worker, "_executors", {})
    monkeypatch.setattr(events, "OBSERVERS", [])
    monkeypatch.setattr(sweeper, "start", lambda *a: order.append("sweeper"))
    monkeypatch.setattr(batch_lane_thread, "start", lambda *a: order.append("batch lane"))
    monkeypatch.setattr(worker, "quiet_per_request_logs", lambda loglevel: None)
    monkeypatch.setattr(worker, "start_heartbeat", lambda *a: order.append("heartbeat") or Beat())
    assert worker.run_one(8, "WARNING") == 0
    assert order == ["executor", "sweeper", "batch lane", "heartbeat", "serve", "stop"]
