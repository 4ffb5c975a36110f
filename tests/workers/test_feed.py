"""The feed (workers/feed.py): batches claim their rows only when the lanes are about to
need them, and stragglers do not leave lanes idle while open calls remain."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from flask_eval.rubrics.messages import text_of
from flask_eval.storage import queries
from flask_eval.storage.store import Store
from flask_eval.workers.feed import RECHECK_SECONDS, Feed, batches_at_once
from flask_eval.workers.inprocess import InProcessTransport
from flask_eval.workers.judge import GenerateConfig, JudgeOutput, Message
from flask_eval.workers.providers.memory_judge import MemoryJudge, default_answer
from flask_eval.workers.runner import ExecutorConfig
from tests.storage.test_store import make_inputs, open_ids, run_config


def test_batches_at_once_opens_several_messages_per_lane_full() -> None:
    assert batches_at_once(256, 64) == 32  # 8 lane-fulls of calls in 64-call messages
    assert batches_at_once(16, 8) == 16
    assert batches_at_once(16, 64) == 4  # 2 messages hold 8 lane-fulls: the floor rules


def test_the_gate_holds_at_the_target_and_a_poke_lets_one_batch_in() -> None:
    async def main() -> None:
        queued = [3]
        feed = Feed(3, lambda: queued[0])
        first = asyncio.create_task(feed.enter(2))
        second = asyncio.create_task(feed.enter(2))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not first.done() and not second.done()  # 3 waiting >= target 3
        queued[0] = 0
        feed.poke()  # room for one batch: the first comes in and counts as incoming
        ticket = await asyncio.wait_for(first, 5)
        for _ in range(20):
            await asyncio.sleep(0)
        assert feed.level == 2 and not second.done()
        queued[0] = 2  # its calls are queued now
        ticket.arrived()
        assert feed.level == 2 and not second.done()
        queued[0] = 0
        feed.poke()
        later = await asyncio.wait_for(second, 5)
        later.arrived()
        later.arrived()  # idempotent: counted off once
        assert feed.level == 0

    asyncio.run(main())


def test_a_waiting_batch_looks_again_without_a_poke() -> None:
    async def main() -> None:
        queued = [10]
        feed = Feed(4, lambda: queued[0])
        entering = asyncio.create_task(feed.enter(1))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not entering.done()
        queued[0] = 0  # the level dropped, but nobody pokes
        (await asyncio.wait_for(entering, 10 * RECHECK_SECONDS + 5)).arrived()
        assert feed.level == 0

    asyncio.run(main())


def _is_straggler(messages: Sequence[Message]) -> bool:
    text = "\n".join(text_of(m) for m in messages)
    return hashlib.sha256(text.encode()).digest()[0] % 4 == 0


def test_stragglers_do_not_leave_lanes_idle_while_calls_are_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A quarter of the calls hang until released. A worker that holds a message until its
    slowest call returns, with a fixed few messages open, ends up with only those
    stragglers in flight and idle lanes; ours keeps opening messages until every lane
    holds a call."""
    in_flight, per_message = 16, 8
    release = threading.Event()
    hanging = [0]

    async def generate(
        self: MemoryJudge, messages: Sequence[Message], config: GenerateConfig
    ) -> JudgeOutput:
        if _is_straggler(messages):
            hanging[0] += 1
            deadline = time.monotonic() + 120
            while not release.is_set() and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            hanging[0] -= 1
        await asyncio.sleep(0)
        answer = default_answer(messages)
        return JudgeOutput(answer, 100, len(answer) // 4)

    monkeypatch.setattr(MemoryJudge, "generate", generate)
    store = Store(f"sqlite:///{tmp_path / 'ledger.db'}")
    instances, sets = make_inputs(60)
    run, _ = store.create_run(
        name="r1",
        fingerprint="f" * 64,
        mode="instance",
        config=run_config("instance"),
        instances=instances,
        response_sets=sets,
        judges=["memory/j1", "memory/j2"],
    )
    calls = open_ids(store, run.id)
    batches = [calls[i : i + per_message] for i in range(0, len(calls), per_message)]
    transport = InProcessTransport(store, ExecutorConfig(in_flight=in_flight))
    transport.submit(run.id, batches)
    deadline = time.monotonic() + 60
    while hanging[0] < in_flight and time.monotonic() < deadline and transport.alive():
        time.sleep(0.02)
    peak = hanging[0]
    release.set()
    transport.join()
    counts = queries.status(store, run.id, "r1")
    store.close()
    assert peak == in_flight, f"only {peak} of {in_flight} lanes busy with calls open"
    assert counts.done == counts.total and counts.total > 0
