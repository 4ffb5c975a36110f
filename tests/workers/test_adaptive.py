"""An endpoint's adaptive in-flight limit (workers/adaptive.py): cut on timeouts and 429s
(once per window, to what the endpoint answered within a timeout), raised by rounds of
clean answers, and no gate at all while it is at the process's lanes."""

from __future__ import annotations

import asyncio

import pytest

from flask_eval.workers.adaptive import InFlightLimit


def answer(limit: InFlightLimit, n: int, seconds: float = 1.0, timeout: float = 100.0) -> None:
    for _ in range(n):
        limit.answered(limit.mark(), seconds, timeout, retried=False)


def test_a_timeout_cuts_to_half_what_was_answered_within_it_once_per_window() -> None:
    limit = InFlightLimit("j", ceiling=64, lanes=64)
    sent = [limit.mark() for _ in range(60)]  # 60 requests leave at once
    for mark in sent[:8]:  # the server answers 8 within the timeout ...
        limit.answered(mark, 20.0, 100.0, retried=False)
    limit.overloaded(sent[8], "timeout")  # ... and the others time out
    assert limit.limit == 4  # 8 answered while it waited: half of them at once
    for mark in sent[9:]:
        limit.overloaded(mark, "timeout")  # the same window: already answered by the cut
    assert limit.limit == 4 and [h[1:] for h in limit.history] == [(64, 4, "timeout")]
    limit.overloaded(limit.mark(), "timeout")  # sent after the cut, nothing answered since
    assert limit.limit == 1


def test_a_rate_limit_cuts_by_a_fifth_and_the_floor_is_one() -> None:
    limit = InFlightLimit("j", ceiling=100, lanes=100)
    limit.overloaded(limit.mark(), "rate_limited")
    assert limit.limit == 80
    for _ in range(30):
        limit.overloaded(limit.mark(), "rate_limited")
    assert limit.limit == 1


def test_clean_answers_raise_the_limit_by_rounds_up_to_the_ceiling() -> None:
    limit = InFlightLimit("j", ceiling=30, lanes=64)
    limit.overloaded(limit.mark(), "rate_limited")
    assert limit.limit == 24
    answer(limit, 23)
    assert limit.limit == 24  # a round is `limit` clean answers
    answer(limit, 1)
    assert limit.limit == 25  # +5%, at least 1
    answer(limit, 500)
    assert limit.limit == 30  # never above the ceiling (max_in_flight)


def test_slow_retried_or_old_answers_raise_nothing() -> None:
    limit = InFlightLimit("j", ceiling=10, lanes=10)
    before_cut = limit.mark()
    limit.overloaded(limit.mark(), "rate_limited")
    assert limit.limit == 8
    for _ in range(50):
        limit.answered(limit.mark(), 60.0, 100.0, retried=False)  # past half the timeout
        limit.answered(limit.mark(), 1.0, 100.0, retried=True)  # a retry's answer
        limit.answered(before_cut, 1.0, 100.0, retried=False)  # sent under the old limit
    assert limit.limit == 8


def test_without_adaptation_the_limit_is_the_ceiling() -> None:
    limit = InFlightLimit("j", ceiling=5, lanes=64, adaptive=False)
    limit.overloaded(limit.mark(), "timeout")
    assert limit.limit == 5 and not limit.history


def test_at_the_lanes_count_nothing_waits_below_it_calls_wait_in_order() -> None:
    async def go() -> None:
        full = InFlightLimit("j", ceiling=2, lanes=2)
        for _ in range(5):  # the lanes cap these calls: no second gate in front of them
            await asyncio.wait_for(full.acquire(), 1)
        limit = InFlightLimit("j", ceiling=2, lanes=8)
        await limit.acquire()
        await limit.acquire()
        order: list[int] = []

        async def take(i: int) -> None:
            await limit.acquire()
            order.append(i)

        waiting = [asyncio.create_task(take(i)) for i in range(3)]
        await asyncio.sleep(0)
        assert limit.waiting == 3 and order == []
        waiting[1].cancel()  # a caller that gives up leaves the line
        await asyncio.sleep(0)
        limit.release()
        await asyncio.sleep(0)
        assert order == [0]
        limit.overloaded(limit.mark(), "rate_limited")  # 2 -> 1: the next waits longer
        limit.release()
        await asyncio.sleep(0)
        assert order == [0] and limit.in_use == 1
        limit.release()
        await asyncio.wait_for(waiting[2], 1)
        assert order == [0, 2] and limit.waiting == 0 and limit.in_use == 1

    asyncio.run(go())


@pytest.mark.parametrize("why", ["timeout", "rate_limited"])
def test_a_cut_is_logged_once(why: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="flask_eval.worker")
    limit = InFlightLimit("my-judge", ceiling=64, lanes=64)
    mark = limit.mark()
    limit.overloaded(mark, why)
    limit.overloaded(mark, why)
    lines = [r.getMessage() for r in caplog.records if "my-judge" in r.getMessage()]
    assert len(lines) == 1 and why in lines[0] and "at most" in lines[0]


def _run_against(
    sim_config: object, tmp_path: object, **executor: object
) -> tuple[list[dict[str, object]], dict[str, object], InFlightLimit]:
    """The test run's 66 judgments (one call per criterion), both judges one endpoint of
    a simulator, judged in-process; (rows, simulator stats, the endpoint's limit)."""
    from pathlib import Path

    from flask_eval.simulator.config import SimConfig
    from flask_eval.simulator.testing import running_simulator
    from flask_eval.storage.store import Store
    from flask_eval.workers.runner import Executor, ExecutorConfig
    from tests.storage.test_store import create, open_ids
    from tests.workers.test_judging import point_judges_at, rows

    assert isinstance(sim_config, SimConfig) and isinstance(tmp_path, Path)
    store = Store(f"sqlite:///{tmp_path / 'a.db'}")
    run_id = create(store, mode="skill")
    with running_simulator(sim_config) as sim:
        point_judges_at(store, run_id, f"openai/local@{sim.openai_base_url}")
        executor = Executor(store, ExecutorConfig(halt_after=0, **executor))  # type: ignore[arg-type]

        async def go() -> InFlightLimit:
            try:
                await executor.run_batch(run_id, open_ids(store, run_id))
                config = next(iter((await executor.run_context(run_id)).judges.values()))  # type: ignore[union-attr]
                return executor.sender.in_flight_limit(config)
            finally:
                await executor.aclose()

        limit = asyncio.run(go())
        stats = sim.stats()
    return rows(store, run_id), stats, limit


def test_a_one_slot_server_gets_every_call_answered(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local server that answers one request at a time, 64 lanes, two attempts per
    call: the first wave mostly times out, the judge's limit falls to what the server
    answers within the timeout, and every call is answered on its second attempt
    (without adaptation most of the 66 fail as ``timeout``)."""
    from flask_eval.simulator.config import SimConfig

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    ended, stats, limit = _run_against(
        # 8 answers fit in one timeout, as at 50 ms and 0.4 s, but each answer's fixed cost
        # (the in-thread server's, the SDK's) is a smaller share of it on a loaded machine
        SimConfig(slots=1, latency_ms=150),
        tmp_path,
        in_flight=64,
        timeout=1.2,
        max_attempts=2,
    )
    assert {r["status"] for r in ended} == {"done"}, {r["reason"] for r in ended}
    assert len(ended) == 66 and stats["max_serving"] == 1
    cuts = [h for h in limit.history if h[3] == "timeout"]
    assert cuts and cuts[0][1] == 64 and cuts[0][2] <= 8


def test_a_healthy_judge_keeps_every_lane(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An endpoint that answers well within its timeout never sees its limit move: all
    the lanes' calls are at the server at once."""
    from flask_eval.simulator.config import SimConfig

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    ended, stats, limit = _run_against(SimConfig(latency_ms=200), tmp_path, in_flight=32)
    assert {r["status"] for r in ended} == {"done"}
    assert stats["max_in_flight"] == 32 and limit.limit == 32 and not limit.history


def test_429s_cut_a_judge_s_limit_in_the_sender(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sender hands a 429 to the judge's limit (and a timeout, above): fewer calls at
    once from then on; the calls are retried and answered."""
    from pathlib import Path

    from flask_eval.core.errors import FailureReason, JudgeError
    from flask_eval.storage.store import Store
    from flask_eval.workers.providers.memory_judge import MemoryJudge, default_answer
    from flask_eval.workers.runner import Executor, ExecutorConfig
    from tests.storage.test_store import create, open_ids
    from tests.workers.test_judging import rows

    asked = 0

    def script(messages: object) -> str:
        nonlocal asked
        asked += 1
        if asked <= 10:
            raise JudgeError(FailureReason.RATE_LIMITED, "429", retry_after=0.01)
        return default_answer(messages)  # type: ignore[arg-type]

    monkeypatch.setattr(MemoryJudge, "script", staticmethod(script))
    assert isinstance(tmp_path, Path)
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    run_id = create(store, mode="skill")
    executor = Executor(store, ExecutorConfig(in_flight=16, halt_after=0))

    async def go() -> list[InFlightLimit]:
        try:
            await executor.run_batch(run_id, open_ids(store, run_id))
            context = await executor.run_context(run_id)
            assert context is not None
            return [executor.sender.in_flight_limit(c) for c in context.judges.values()]
        finally:
            await executor.aclose()

    limits = asyncio.run(go())
    assert {r["status"] for r in rows(store, run_id)} == {"done"}
    cuts = [h for limit in limits for h in limit.history if h[3] == "rate_limited"]
    assert cuts and all(new < old for _, old, new, _ in cuts)


def test_flask_eval_adaptive_0_turns_the_adaptation_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from flask_eval.core import settings
    from flask_eval.workers.runner import executor_config

    assert executor_config(settings.load(), 8).adaptive is True
    monkeypatch.setenv("FLASK_EVAL_ADAPTIVE", "0")
    config = executor_config(settings.load(), 8)
    assert config.adaptive is False
    limit = InFlightLimit("j", 8, 8, config.adaptive)
    limit.overloaded(limit.mark(), "rate_limited")
    assert limit.limit == 8
