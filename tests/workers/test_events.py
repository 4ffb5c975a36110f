"""The executor's events (workers/events.py), its metrics (workers/metrics.py) and the
context of its log lines, with the in-memory judge."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from flask_eval.core.errors import FailureReason, JudgeError
from flask_eval.core.logs import JsonFormatter
from flask_eval.rubrics.messages import text_of
from flask_eval.storage import queries
from flask_eval.storage.store import Store
from flask_eval.workers import events
from flask_eval.workers.judge import Message
from flask_eval.workers.metrics import Metrics
from flask_eval.workers.providers.memory_judge import MemoryJudge, default_answer
from tests.storage.test_store import create
from tests.workers.test_executor import run_all


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'x.db'}")


@pytest.fixture(autouse=True)
def memory_judge() -> Iterator[None]:
    MemoryJudge.calls = 0
    yield
    MemoryJudge.script = staticmethod(default_answer)  # type: ignore[assignment]
    MemoryJudge.calls = 0
    MemoryJudge.max_attempts = 6


@pytest.fixture
def recorder() -> Iterator[events.Recorder]:
    rec = events.subscribe(events.Recorder())
    yield rec  # type: ignore[misc]
    events.unsubscribe(rec)


def flaky(messages: Sequence[Message]) -> str:
    """Instance 0 is always rate limited; the others answer."""
    if "question 0" in text_of(messages[1]):
        raise JudgeError(FailureReason.RATE_LIMITED, "429", retry_after=0.0)
    return default_answer(messages)


def ledger(store: Store, run_id: int) -> dict[tuple[str, str], int]:
    st = queries.status(store, run_id, "r1")
    return {("done", ""): st.done, **{("failed", r): n for r, n in st.failed_by_reason.items()}}


def written(recorded: list[events.JudgmentsWritten]) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for e in recorded:
        for status, reason, n in e.counts:
            out[(status, reason)] = out.get((status, reason), 0) + n
    return out


def test_events_tell_every_request_and_every_judgment_the_ledger_holds(
    store: Store, recorder: events.Recorder
) -> None:
    MemoryJudge.script = staticmethod(flaky)  # type: ignore[assignment]
    MemoryJudge.max_attempts = 2
    run_id = create(store)
    run_all(store, run_id)
    started = recorder.of(events.CallStarted)
    answered = [e for e in recorder.of(events.CallAnswered) if e.source == "paid"]
    failed = recorder.of(events.CallFailed)
    assert len(started) == MemoryJudge.calls == len(answered) + len(failed)
    assert {e.reason for e in failed} == {"rate_limited"}
    assert len(recorder.of(events.RateLimited)) == len(failed)
    assert written(recorder.of(events.JudgmentsWritten)) == ledger(store, run_id)
    assert {e.judge for e in recorder.of(events.JudgmentsWritten)} == {"memory/j1", "memory/j2"}
    assert all(e.latency_s >= 0 and e.prompt_tokens > 0 for e in answered)


def test_a_cached_answer_is_told_as_cache_not_paid(store: Store, recorder: events.Recorder) -> None:
    run_all(store, create(store, "a", "a" * 64))
    recorder.events.clear()
    run_all(store, create(store, "b", "b" * 64))
    sources = {e.source for e in recorder.of(events.CallAnswered)}
    assert sources == {"cache"} and not recorder.of(events.CallStarted)


def test_an_observer_that_raises_is_dropped_and_the_run_goes_on(
    store: Store, recorder: events.Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken:
        def observe(self, event: events.Event) -> None:
            raise RuntimeError("boom")

    broken = events.subscribe(Broken())
    run_id = create(store)
    run_all(store, run_id)
    assert broken not in events.OBSERVERS
    assert caplog.text.count("event observer") == 1
    assert queries.status(store, run_id, "r1").done == 66
    assert written(recorder.of(events.JudgmentsWritten)) == {("done", ""): 66}


def test_no_observer_no_event(store: Store) -> None:
    assert not events.OBSERVERS
    calls = []
    original = events.emit
    events.emit = calls.append  # type: ignore[assignment]
    try:
        run_all(store, create(store))
    finally:
        events.emit = original
    assert calls == []


def sample(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_metrics_count_what_the_ledger_holds(store: Store) -> None:
    MemoryJudge.script = staticmethod(flaky)  # type: ignore[assignment]
    MemoryJudge.max_attempts = 2
    metrics = events.subscribe(Metrics())
    try:
        run_id = create(store)
        run_all(store, run_id)
    finally:
        events.unsubscribe(metrics)
    text = generate_latest(metrics.registry).decode()  # type: ignore[attr-defined]
    counts = ledger(store, run_id)
    for (status, reason), n in counts.items():
        assert sample(text, "flask_eval_judgments_total", status=status, reason=reason) == n
    assert sample(text, "flask_eval_rate_limited_total") == MemoryJudge.calls - sample(
        text, "flask_eval_calls_total", outcome="answered"
    )
    assert sample(text, "flask_eval_in_flight_calls") == 0
    assert sample(text, "flask_eval_judge_latency_seconds_count", judge="memory/j1") > 0
    assert sample(text, "flask_eval_tokens_total", kind="prompt") > 0


def test_a_calls_log_lines_name_its_run_judge_and_prompt(store: Store) -> None:
    MemoryJudge.script = staticmethod(flaky)  # type: ignore[assignment]
    MemoryJudge.max_attempts = 2
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("flask_eval.worker")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        run_id = create(store)
        run_all(store, run_id)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    retries = [x for x in lines if x["message"].startswith("retrying")]
    assert retries, lines[:3]
    for x in retries:
        assert (
            x["run"] == run_id and x["judge"] in {"memory/j1", "memory/j2"} and len(x["call"]) == 16
        )
        assert x["level"] == "DEBUG" and x["logger"] == "flask_eval.worker" and x["ts"]
