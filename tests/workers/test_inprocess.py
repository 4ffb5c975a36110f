"""The in-process transport judges every submission of a run: a large run is submitted in
several parts (producer/dispatch.py), and the run is waited for until the last of them is
judged, by one executor."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from flask_eval.storage import queries
from flask_eval.storage.store import Store
from flask_eval.workers.inprocess import InProcessTransport
from flask_eval.workers.judge import GenerateConfig, JudgeOutput, Message
from flask_eval.workers.providers.memory_judge import MemoryJudge, default_answer
from flask_eval.workers.runner import ExecutorConfig
from tests.helpers import wait_until
from tests.storage.test_store import create, open_ids
from tests.workers.test_judging import reset_memory_judge  # noqa: F401  (autouse)


def judging_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "flask-eval-inprocess"]


def test_a_run_submitted_in_two_parts_is_judged_to_the_end_by_one_executor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first part's call is still on the wire when the second part is judged: the
    transport stays alive (the run is not taken for stopped with judgments open) until
    the first is answered too, and both parts are judged on one thread."""
    store = Store(f"sqlite:///{tmp_path / 'x.db'}")
    run_id = create(store)
    first, second = open_ids(store, run_id)[:2]
    release = threading.Event()

    async def generate(
        self: MemoryJudge, messages: Sequence[Message], _: GenerateConfig
    ) -> JudgeOutput:
        type(self).calls += 1
        if type(self).calls == 1:  # the first part's call: answered when released
            deadline = time.monotonic() + 120
            while not release.is_set() and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
        return JudgeOutput(default_answer(messages), 100, 20)

    def done() -> int:
        return queries.status(store, run_id, "r1").done

    monkeypatch.setattr(MemoryJudge, "generate", generate)
    transport = InProcessTransport(store, ExecutorConfig(in_flight=4))
    try:
        transport.submit(run_id, [[first]])
        wait_until(lambda: MemoryJudge.calls, timeout=60, what="the first call on the wire")
        transport.submit(run_id, [[second]])
        wait_until(done, lambda n: n == len(second), timeout=60, what="the second part judged")
        wait_until(lambda: len(judging_threads()) <= 1, timeout=60, what="one thread judging")
        assert transport.alive()  # the first part is still being judged
    finally:
        release.set()
    transport.join()
    assert not transport.alive() and not judging_threads()
    assert done() == len(first) + len(second)
    store.close()
