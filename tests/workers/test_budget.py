"""Shared budgets with real Redis and real worker processes."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from aiohttp import web

from flask_eval.producer.synthetic import write_inputs
from flask_eval.rubrics.protocol import requested_skills, scores_line
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import spawn_simulator
from flask_eval.simulator.wire_bodies import TokenCounts, success_body
from tests.helpers import cli_env, flask_eval, status, workers

pytestmark = [pytest.mark.redis, pytest.mark.slow, pytest.mark.serial]


def run_args(instances: Path, responses: list[str], judges_file: Path, name: str) -> list[str]:
    args = [
        "run",
        "--instances",
        str(instances),
        "--judges",
        str(judges_file),
        "--run",
        name,
        "--quiet",
    ]
    for r in responses:
        args += ["--responses", r]
    return args


# Its minute at 120 rpm is a light load (2 calls/s): it runs beside the other timing tests,
# which run one after another (tests/conftest.py TIMING_GROUP), not after them.
@pytest.mark.xdist_group("a-minute-at-120-rpm")
def test_two_workers_share_a_120_rpm_budget_without_exceeding_it(
    sqlite_url: str, redis_url: str, tmp_path: Path
) -> None:
    # 140 calls at 120 rpm: ~70 s, more than the simulator's 60 s sliding window
    calls = 140
    instances, responses = write_inputs(tmp_path / "in", calls // 2, models=("m1", "m2"))
    env = cli_env(sqlite_url, redis_url)
    # a process of its own: the simulator's clock is the instrument that counts the minute
    with spawn_simulator(SimConfig(latency_ms=50, rpm=120, seed=1)) as sim:
        judges = tmp_path / "judges.yaml"
        judges.write_text(f"- spec: openai/sim@{sim.openai_base_url}\n  rpm: 120\n")
        with workers(env, processes=2, in_flight=32, log=tmp_path / "w.log"):
            flask_eval(*run_args(instances, responses, judges, "budget"), env=env)
        stats = sim.stats()
    assert status(env, "budget")["done"] == calls * 3
    assert stats["rate_limited"] == 0, f"the workers together went over the limit: {stats}"
    assert stats["requests"] == calls
    # at the budget, not far below it: 140 calls at 120/min, less the first burst. On the
    # simulator's clock, from the first request to the last answer: the run's start-up
    # and its last look at the ledger take what a loaded machine makes them take
    served = stats["last_answer_at"] - stats["first_request_at"]
    assert served < calls / 120 * 60 * 1.2, f"{served:.0f}s for {calls} calls at 120 rpm"


@contextmanager
def limited_once(retry_after: int) -> Iterator[tuple[str, list[tuple[float, int]]]]:
    """An OpenAI-compatible judge that answers its first request with 429 + Retry-After
    and logs (arrival time, status) of every request."""
    log: list[tuple[float, int]] = []
    ready = threading.Event()
    holder: dict[str, object] = {}

    async def handle(request: web.Request) -> web.Response:
        body = await request.json()
        if not log:
            log.append((time.monotonic(), 429))
            error = {
                "error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}
            }
            return web.json_response(error, status=429, headers={"Retry-After": str(retry_after)})
        log.append((time.monotonic(), 200))
        prompt = "\n".join(m["content"] for m in body["messages"])
        text = "Fine.\n" + scores_line({s: 3 for s in requested_skills(prompt) or []})
        return web.json_response(
            success_body("openai", body["model"], text, TokenCounts(100, 20), False)
        )

    def serve() -> None:
        loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handle)
        runner = web.AppRunner(app, access_log=None)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        holder["port"] = runner.addresses[0][1]
        holder["loop"] = loop
        ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(120), "the judge server did not start"  # a deadline
    try:
        yield f"http://127.0.0.1:{holder['port']}/v1", log
    finally:
        loop = holder["loop"]
        assert isinstance(loop, asyncio.AbstractEventLoop)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def test_a_429_with_retry_after_pauses_the_endpoint_for_every_worker(
    sqlite_url: str, redis_url: str, tmp_path: Path
) -> None:
    instances, responses = write_inputs(tmp_path / "in", 60, models=("m1", "m2"))
    env = cli_env(sqlite_url, redis_url)
    # a request let through just before the workers learnt of the 429 may reach the
    # server up to `late` after it (a loaded machine delays sending): a long pause keeps
    # a long stretch in which nothing may arrive
    pause, late = 8, 1.5
    with limited_once(retry_after=pause) as (url, log):
        judges = tmp_path / "judges.yaml"
        judges.write_text(f"- spec: openai/limited@{url}\n  rpm: 600\n")
        with workers(env, processes=2, in_flight=16, log=tmp_path / "w.log"):
            flask_eval(*run_args(instances, responses, judges, "pause"), env=env)
    assert status(env, "pause")["done"] == 120 * 3
    (t429, code), *rest = log
    assert code == 429
    # requests already on the wire when the 429 came may land just after it; then nobody
    # (neither process) sends until the Retry-After has passed
    during = [t - t429 for t, _ in rest if late < t - t429 < pause - late]
    assert during == [], f"requests sent during the pause: {during}"
    assert any(t - t429 >= pause for t, _ in rest)
