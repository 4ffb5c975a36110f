"""Messages the broker loses are sent again by the workers; held-back calls are not.

Real Redis, real worker processes, the real SDKs against the simulator.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import redis

from flask_eval.producer.synthetic import write_inputs
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.workers.celery_app import queue_idle
from tests.helpers import cli_env, flask_eval, running_rows, status, wait_done, wait_until, workers
from tests.workers.test_reliability import ledger_is_exactly_once, run_cmd

pytestmark = [pytest.mark.redis, pytest.mark.slow]

#: the sweeper looks every 5 s and sends again rows untouched for 8 s
SWEEP_GRACE = 8
FAST_SWEEP = {"FLASK_EVAL_LEASE_SECONDS": "4", "FLASK_EVAL_VISIBILITY_TIMEOUT": str(SWEEP_GRACE)}


def test_a_message_lost_by_the_broker_is_sent_again_by_a_worker(
    sqlite_url: str, redis_url: str, tmp_path: Path
) -> None:
    instances, responses = write_inputs(tmp_path / "in", 40)
    planned = 40 * 3 * 2 * 2  # instances x skills x models x judges
    calls = planned // 3
    env = cli_env(sqlite_url, redis_url, **FAST_SWEEP)
    with running_simulator(SimConfig(latency_ms=50, seed=5)) as sim:
        flask_eval(*run_cmd(instances, responses, sim, "lossy"), "--no-wait", env=env)
        client = redis.Redis.from_url(redis_url)
        queue = env["FLASK_EVAL_QUEUE"]
        queued = client.llen(queue)
        assert client.rpop(queue) is not None  # what a worker killed after BRPOP loses
        assert client.llen(queue) == queued - 1
        log = tmp_path / "worker.log"
        with workers(env, processes=1, in_flight=16, log=log):
            st = wait_done(env, "lossy")  # its deadline: generous, for a loaded machine
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
    with running_simulator(SimConfig(latency_ms=20, seed=6)) as sim:
        price = tmp_path / "judges.yaml"
        price.write_text(
            f"- spec: openai/sim-gpt@{sim.openai_base_url}\n  price: {{input: 1.0, output: 1.0}}\n"
        )
        args = ["run", "--instances", str(instances), "--run", "capped", "--quiet"]
        for r in responses:
            args += ["--responses", r]
        proc = flask_eval(*args, "--judges", str(price), "--max-cost", "0.01", "--no-wait", env=env)
        created_at = time.monotonic()  # every row of the run exists by now
        assert "stopped dispatching" in proc.stderr
        dispatched = re.search(r"(\d+) judge calls dispatched", proc.stderr)
        assert dispatched is not None, proc.stderr
        sent = int(dispatched.group(1))
        held = status(env, "capped")["pending"]
        client = redis.Redis.from_url(redis_url)
        queue, lock = env["FLASK_EVAL_QUEUE"], f"flask_eval:sweep:{env['FLASK_EVAL_QUEUE']}"
        log = tmp_path / "worker.log"
        with workers(env, processes=1, in_flight=16, log=log):
            wait_until(  # the sent calls finish: from then on the queue is idle
                lambda: (
                    sim.stats()["requests"],
                    running_rows(sqlite_url, "capped"),
                    queue_idle(client, queue),
                ),
                lambda seen: seen == (sent, 0, True),
                timeout=120,
                what="the sent calls to finish (requests, rows running, queue idle)",
            )
            # rounds of the sweeper that start once the held rows are older than its grace;
            # a second one starting means the first finished (one worker process)
            wait_until(
                lambda: time.monotonic() >= created_at + SWEEP_GRACE,
                timeout=60,
                what="the held rows to be older than the sweeper's grace",
            )
            before = client.get(lock)  # a round started earlier does not count
            rounds: set[object] = set()

            def sweeper_rounds() -> int:
                value = client.get(lock)
                if value is not None and value != before:
                    rounds.add(value)
                return len(rounds)

            wait_until(
                sweeper_rounds,
                lambda n: n >= 2,
                timeout=60,
                interval=0.1,
                what="two sweeper rounds with the queue idle and the held rows stale",
            )
            st = status(env, "capped")
        paid = sim.stats()["requests"]
        client.close()
    assert 0 < st["done"] < st["total"] == held
    assert st["done"] == sent * 3 and paid == sent  # held back, not swept
    assert st["pending"] == st["total"] - st["done"]
    assert paid == st["done"] // 3
    assert "their messages were lost by the broker" not in log.read_text()
