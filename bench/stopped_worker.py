"""What a worker stopped past its lease pays for when it wakes:
`python -m bench.stopped_worker [--stop 40] [--instances 100]`.

Worker A (4 calls in flight) is stopped with SIGSTOP once the run has started; worker B
(16 in flight) takes A's messages when their visibility timeout (12 s) runs out and
claims A's rows once A's leases (6 s) have run out; A is woken after ``--stop`` seconds.
Reports the requests the simulator received against the calls planned: every request
beyond a call is a call paid twice. Redis at FLASK_EVAL_BENCH_REDIS_URL (flushed).
"""

from __future__ import annotations

import argparse
import json
import signal
import tempfile
import time
from pathlib import Path

from bench.harness import REPO, env_for, run_cli, write_result
from flask_eval.producer.synthetic import write_inputs
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import spawn_simulator
from flask_eval.workers.processes import WorkerGroup

SETTINGS = {
    "FLASK_EVAL_LEASE_SECONDS": "6",
    "FLASK_EVAL_VISIBILITY_TIMEOUT": "12",
    "FLASK_EVAL_CALLS_PER_MESSAGE": "16",
}


def status(env: dict[str, str]) -> dict[str, int]:
    proc, _ = run_cli(["status", "stop", "--json"], env)
    result: dict[str, int] = json.loads(proc.stdout)
    return result


def until(env: dict[str, str], done: int, timeout: float) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while (st := status(env))["done"] < done:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the run did not get to {done} judgments: {st}")
        time.sleep(1)
    return st


def measure(folder: Path, stop: float, n: int) -> dict[str, object]:
    instances, responses = write_inputs(folder / "in", n)
    env = env_for(f"sqlite:///{folder / 'x.db'}", **SETTINGS)
    with spawn_simulator(SimConfig(latency_ms=1000, seed=1)) as sim:
        args = [
            "run",
            "--instances",
            str(instances),
            "--run",
            "stop",
            "--no-wait",
            "--quiet",
            "--judge",
            f"openai/sim-gpt@{sim.openai_base_url}",
            "--judge",
            f"anthropic/sim-claude@{sim.anthropic_base_url}",
        ]
        for r in responses:
            args += ["--responses", r]
        run_cli(args, env)
        with WorkerGroup(env, 1, 4, "WARNING", folder / "a.log", cwd=REPO) as a:
            until(env, 1, 120)
            a.signal(signal.SIGSTOP)
            with WorkerGroup(env, 1, 16, "WARNING", folder / "b.log", cwd=REPO):
                time.sleep(stop)  # A is stopped this long
                a.signal(signal.SIGCONT)
                st = until(env, n * 12, 900)
        requests = int(sim.stats()["requests"])
    log = (folder / "a.log").read_text().splitlines()
    dropped = sum(
        int(line.split(" rows this worker held")[0].rsplit(" ", 1)[-1])
        for line in log
        if "rows this worker held are no longer" in line
    )
    return {
        "stop_seconds": stop,
        "calls": st["total"] // 3,
        "requests": requests,
        "ledger_calls": st["calls"],
        "rows_not_sent_by_the_woken_worker": dropped,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop", type=float, default=40.0, help="seconds worker A is stopped")
    parser.add_argument("--instances", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        result = measure(Path(folder), args.stop, args.instances)
    write_result(
        "stopped_worker",
        result,
        f"{result['requests']} requests for {result['calls']} calls "
        f"({result['rows_not_sent_by_the_woken_worker']} rows not sent by the woken worker)",
    )


if __name__ == "__main__":
    main()
