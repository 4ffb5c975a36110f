"""A broker without Celery, end to end in one process: a run dispatched through the
in-memory stub broker's transport, taken by the real consumer code (workers/broker.py)
with the real executor, a message the broker loses sent again by the real sweeper."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from flask_eval.core import settings as settings_mod
from flask_eval.producer.dispatch import dispatch_open
from flask_eval.storage import queries
from flask_eval.storage.store import Store
from flask_eval.workers import broker
from flask_eval.workers.broker import Message, Settle, Work, consumer_of, handle, transport_of
from flask_eval.workers.loop import run_sync
from flask_eval.workers.providers.memory_judge import MemoryJudge
from flask_eval.workers.runner import Executor, ExecutorConfig
from flask_eval.workers.stub_broker import StubConsumer, StubTransport
from flask_eval.workers.sweeper import sweep
from tests.helpers import wait_until
from tests.storage.test_store import create, open_ids
from tests.workers.test_judging import reset_memory_judge  # noqa: F401  (autouse)

STUB = (
    "flask_eval.workers.stub_broker:StubTransport",
    "flask_eval.workers.stub_broker:StubConsumer",
)


@pytest.fixture
def stub_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> settings_mod.Settings:
    """Settings whose broker is the stub (registered for stub://, for this test only)."""
    monkeypatch.setitem(broker.BROKERS, "stub", STUB)
    url = f"stub://{tmp_path.name}"  # a queue of this test's own
    return dataclasses.replace(settings_mod.load(), broker_url=url, queue="judge")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store(f"sqlite:///{tmp_path / 'x.db'}")
    yield store
    store.close()


def test_a_run_sent_through_the_stub_broker_is_judged_once_and_a_lost_message_swept(
    store: Store, stub_settings: settings_mod.Settings
) -> None:
    run_id = create(store)
    calls = open_ids(store, run_id)
    rows = sum(len(c) for c in calls)
    transport, consumer = transport_of(stub_settings), consumer_of(stub_settings)
    assert isinstance(transport, StubTransport) and isinstance(consumer, StubConsumer)
    sent = dispatch_open(store, store.run_by_id(run_id), transport, calls_per_message=2)
    assert sent.sent == len(calls)
    lost = transport.messages.lose()  # a worker killed after taking it: gone for good
    assert lost is not None
    lost_rows = sum(len(c) for c in lost[1])

    executor = Executor(store, ExecutorConfig(in_flight=4))
    work = Work(executor=lambda: executor, concurrency=3, name="w1")
    serving = threading.Thread(target=consumer.serve, args=(work,))
    serving.start()
    try:
        wait_until(transport.consumers, lambda names: names == ["w1"], timeout=30)

        def open_rows() -> int:
            st = queries.status(store, run_id, "r1")
            return st.total - st.done - st.failed

        wait_until(
            lambda: (consumer.idle(), open_rows()),
            lambda seen: seen == (True, lost_rows),
            timeout=60,
            what="every message but the lost one judged",
        )
        assert MemoryJudge.calls == len(calls) - len(lost[1])
        # the queue is idle and the lost rows untouched: the sweeper sends them again
        assert sweep(store, consumer, transport, stub_settings, grace=0.0) == len(lost[1])
        wait_until(open_rows, lambda n: n == 0, timeout=60, what="the swept calls judged")
        wait_until(consumer.idle, timeout=30, what="the swept messages settled")
        assert sweep(store, consumer, transport, stub_settings, grace=0.0) == 0
    finally:
        consumer.stop()
        serving.join(timeout=30)
    assert not serving.is_alive() and transport.consumers() == []
    st = queries.status(store, run_id, "r1")
    assert st.done == st.total == rows and st.failed == 0
    assert MemoryJudge.calls == len(calls)  # every call paid once, the lost one included
    run_sync(executor.aclose())


def test_the_sweeper_sends_nothing_while_a_message_is_waiting(
    store: Store, stub_settings: settings_mod.Settings
) -> None:
    run_id = create(store)
    transport, consumer = transport_of(stub_settings), consumer_of(stub_settings)
    dispatch_open(store, store.run_by_id(run_id), transport, calls_per_message=2)
    assert not consumer.idle()
    before = transport.messages.sent
    assert sweep(store, consumer, transport, stub_settings, grace=0.0) == 0
    assert transport.messages.sent == before


def test_a_message_is_refused_put_back_or_looked_at_again_as_the_ledger_says(
    store: Store,
) -> None:
    """Malformed: acknowledged unjudged. A run the database does not have: back in the
    queue. Rows another delivery holds: judged later, when their lease runs out."""
    run_id = create(store)
    first = open_ids(store, run_id)[0]
    executor = Executor(store, ExecutorConfig(in_flight=4, lease_seconds=30))
    later: list[tuple[int, list[list[int]], float]] = []

    def send_later(run: int, calls: list[list[int]], delay: float) -> None:
        later.append((run, calls, delay))

    assert handle(executor, Message("1", [[1]]), send_later) is Settle.ACK
    assert handle(executor, Message(run_id, [["x"]]), send_later) is Settle.ACK
    assert handle(executor, Message(run_id + 99, [first]), send_later) is Settle.REQUEUE
    store.claim_contexts(run_id, first, 30.0)  # another worker holds the call's rows
    assert handle(executor, Message(run_id, [first]), send_later) is Settle.ACK
    assert MemoryJudge.calls == 0
    [(run, again, delay)] = later
    assert (run, again) == (run_id, [first]) and 29 < delay <= 31 + broker.LOOK_AGAIN_MARGIN
    run_sync(executor.aclose())
