"""A judge halted mid-run: the answers already on their way keep their own failure and
raw output; only what was never sent is `halted` (in-process executor, memory judge)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from flask_eval.producer.plan import open_calls
from flask_eval.storage import exports
from flask_eval.storage.store import Store
from flask_eval.workers.judge import CUT_OFF, GenerateConfig, JudgeOutput, Message
from flask_eval.workers.providers.memory_judge import MemoryJudge
from flask_eval.workers.runner import Executor, ExecutorConfig
from tests.storage.test_store import create
from tests.workers.test_judging import reset_memory_judge, set_retry_budget  # noqa: F401
from tests.workers.test_leases import run_to_end

JUDGE = "memory/j1"
#: the judge's larger budget for an answer cut off by its token limit
RETRY_BUDGET = 8192
#: what the judge answers, by the failure it gives (its finish reason)
ANSWERS = {"unparseable": "stop", "truncated": CUT_OFF}


@pytest.mark.parametrize("reason", list(ANSWERS))
def test_answers_on_the_wire_at_a_halt_keep_their_own_reason_and_raw_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reason: str
) -> None:
    """A judge that never answers in format (or always runs out of tokens): its first 3
    calls fail, each after its second request (a reminder, or the larger budget), and halt
    it; 3 more calls were on the wire meanwhile and come back after the halt, failing the
    same way. Those keep their reason and their answer (no second request is sent for
    them); only the calls never sent are `halted`, with no answer and no request."""
    store = Store(f"sqlite:///{tmp_path / 'h.db'}")
    run_id = create(store, mode="skill")  # one call per criterion: 33 calls of the judge
    set_retry_budget(store, run_id, RETRY_BUDGET)
    calls = [c.ids for c in open_calls(store, store.run_by_id(run_id)) if c.judge == JUDGE]
    executor = Executor(store, ExecutorConfig(in_flight=6, halt_after=3))
    first_asks = 0

    async def failing(
        self: MemoryJudge, messages: Sequence[Message], config: GenerateConfig
    ) -> JudgeOutput:
        nonlocal first_asks
        type(self).calls += 1
        if len(messages) <= 2 and config.max_tokens < RETRY_BUDGET:  # not a second request
            first_asks += 1
            if 3 < first_asks <= 6:  # on the wire until the judge is halted
                while executor.halts.halted(run_id, JUDGE) is None:
                    await asyncio.sleep(0.01)
            elif first_asks > 6:  # a judge's latency: the halt comes before all are sent
                await asyncio.sleep(0.5)
        return JudgeOutput("I think it is fine overall.", 100, 10, ANSWERS[reason])

    monkeypatch.setattr(MemoryJudge, "generate", failing)
    run_to_end(executor, run_id, calls)
    assert set(store.halts(run_id)) == {JUDGE}
    rows = [r for r in exports.export_rows(store, run_id, "r1") if r["judge"] == JUDGE]
    halted = [r for r in rows if r["reason"] == "halted"]
    failed = [r for r in rows if r["reason"] == reason]
    assert len(halted) + len(failed) == len(rows)
    assert all(r["raw"] == "I think it is fine overall." for r in failed)
    assert all(r["requests"] >= 1 for r in failed)
    assert halted and all(r["raw"] is None and r["requests"] == 0 for r in halted)
    after = [r for r in failed if "the judge was halted" in r["detail"]]
    assert len(after) >= 3  # the 3 on the wire at the halt, at least
