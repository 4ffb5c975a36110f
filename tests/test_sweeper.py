"""Messages the broker loses are sent again by the workers; held-back calls are not.

Real Redis, real worker processes, the real SDKs against the simulator.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from producer.synthetic import write_inputs
from simulator.config import SimConfig
from simulator.testing import spawn_simulator
from tests.helpers import cli_env, flask_eval, status, wait_done, workers
from tests.test_reliability import ledger_is_exactly_once, run_cmd

pytestmark = [pytest.mark.redis, pytest.mark.slow]

#: the sweeper looks every 5 s and sends again rows untouched for 8 s
FAST_SWEEP = {"FLASK_EVAL_LEASE_SECONDS": "4", "FLASK_EVAL_VISIBILITY_TIMEOUT": "8"}


def test_a_message_lost_by_the_broker_is_sent_again_by_a_worker(
    sqlite_url: str, redis_url: str, tmp_path: Path
) -> None:
    instances, responses = write_inputs(tmp_path / "in", 40)
    planned = 40 * 3 * 2 * 2  # instances x skills x models x judges
    calls = planned // 3
    env = cli_env(sqlite_url, redis_url, **FAST_SWEEP)
    with spawn_simulator(SimConfig(latency_ms=50, seed=5)) as sim:
        flask_eval(*run_cmd(instances, responses, sim, "lossy"), "--no-wait", env=env)
        client = redis.Redis.from_url(redis_url)
        queue = env["FLASK_EVAL_QUEUE"]
        queued = client.llen(queue)
        assert client.rpop(queue) is not None  # what a worker killed after BRPOP loses
        assert client.llen(queue) == queued - 1
        log = tmp_path / "worker.log"
        with workers(env, processes=1, in_flight=16, log=log):
            st = wait_done(env, "lossy", timeout=90)
        paid = sim.stats()["requests"]
    assert st["done"] == st["total"] == planned and st["failed"] == 0
    ledger_is_exactly_once(sqlite_url, "lossy", planned)
    assert paid == calls  # the lost calls were paid once, nothing twice
    assert "their messages were lost by the broker" in log.read_text()


def test_calls_held_back_by_max_cost_are_not_swept(
    sqlite_url: str, redis_url: str, tmp_path: Path
) -> None:
    instances, responses = write_inputs(tmp_path / "in", 20)
    env = cli_env(sqlite_url, redis_url, **FAST_SWEEP)
    with spawn_simulator(SimConfig(latency_ms=20, seed=6)) as sim:
        price = tmp_path / "judges.yaml"
        price.write_text(
            f"- spec: openai/sim-gpt@{sim.openai_base_url}\n  price: {{input: 1.0, output: 1.0}}\n"
        )
        args = ["run", "--instances", str(instances), "--run", "capped", "--quiet"]
        for r in responses:
            args += ["--responses", r]
        proc = flask_eval(*args, "--judges", str(price), "--max-cost", "0.01", "--no-wait", env=env)
        assert "stopped enqueueing" in proc.stderr
        held = status(env, "capped")["pending"]
        with workers(env, processes=1, in_flight=16, log=tmp_path / "worker.log"):
            time.sleep(16)  # the sent calls finish; then rounds of the sweeper, queue idle
            st = status(env, "capped")
        paid = sim.stats()["requests"]
    assert 0 < st["done"] < st["total"] == held
    assert st["pending"] == st["total"] - st["done"]  # held back, not swept
    assert paid == st["done"] // 3
