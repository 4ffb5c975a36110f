"""Runs on a busy machine: an in-process run of 18,000 judgments and a single worker's run
of 3,000 calls, each beside ``scripts/cpu-hog`` (started here, stopped after), against a
simulated judge in its own process (lognormal latency).

What each must show: every judgment done (done == total), every served answer stored
(served == paid calls), no worker warning that rows it held "are no longer its own", exit 0.

    python -m bench.busy_runs                 # both, beside 4 busy processes
    python -m bench.busy_runs --hog 0 inprocess --latency-ms 1000

Writes bench/results/busy_runs.json.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import REPO, Workers, env_for, fresh_postgres, write_result
from flask_eval.producer.synthetic import write_inputs
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import spawn_simulator

MODELS = ("m1", "m2", "m3")
WARNING = "no longer its own"


def _status(env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [str(REPO / ".venv" / "bin" / "python"), "-m", "flask_eval", "status", "busy", "--json"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    status: dict[str, Any] = json.loads(done.stdout)
    return status


def one(which: str, folder: Path, latency_ms: float, in_flight: int) -> dict[str, Any]:
    """One run: ``inprocess`` (3 models x 1,000 instances x 3 skills x 2 judges: 18,000
    judgments in 6,000 calls, SQLite) or ``worker`` (3,000 calls by one worker process,
    PostgreSQL and Redis)."""
    instances, responses = write_inputs(folder / "in", 1000, models=MODELS)
    named = [a for r in responses for a in ("--responses", r)]
    config = SimConfig(latency_ms=latency_ms, latency_dist="lognormal", seed=7)
    with spawn_simulator(config) as sim:
        judge = f"openai/sim@{sim.openai_base_url}"
        args = ["run", "--instances", str(instances), *named, "--run", "busy", "--quiet"]
        python = str(REPO / ".venv" / "bin" / "python")
        started = time.monotonic()
        if which == "inprocess":
            env = env_for(f"sqlite:///{folder / 'busy.db'}", broker=False)
            args += ["--judge", f"a={judge}", "--judge", f"b={judge}"]
            proc = subprocess.run(
                [python, "-m", "flask_eval", *args],
                env=env,
                cwd=REPO,
                capture_output=True,
                text=True,
            )
            log = proc.stderr
            status = _status(env)
        else:
            with fresh_postgres() as url:
                env = env_for(url)
                log_file = folder / "worker.log"
                workers = Workers(env, processes=1, in_flight=in_flight, log=log_file)
                try:
                    proc = subprocess.run(
                        [python, "-m", "flask_eval", *args, "--judge", judge],
                        env=env,
                        cwd=REPO,
                        capture_output=True,
                        text=True,
                    )
                finally:
                    workers.stop()
                log = proc.stderr + log_file.read_text(encoding="utf-8", errors="replace")
                status = _status(env)
        seconds = time.monotonic() - started
        served = int(sim.stats()["served"])
    return {
        "which": which,
        "exit": proc.returncode,
        "seconds": round(seconds, 1),
        "done": status["done"],
        "total": status["total"],
        "paid_calls": status.get("calls"),
        "served": served,
        "no_longer_its_own": log.count(WARNING),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", nargs="*", help="inprocess, worker (default: both)")
    parser.add_argument("--hog", type=int, default=4, help="busy processes beside the runs")
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--in-flight", type=int, default=256)
    args = parser.parse_args(argv)
    if set(args.which) - {"inprocess", "worker"}:
        parser.error(f"runs are inprocess and worker, not {args.which}")
    hog_command = ["bash", str(REPO / "scripts" / "cpu-hog"), str(args.hog)]
    hog = subprocess.Popen(hog_command) if args.hog else None
    results = []
    try:
        for which in args.which or ["inprocess", "worker"]:
            with tempfile.TemporaryDirectory(prefix="busy-") as folder:
                results.append(one(which, Path(folder), args.latency_ms, args.in_flight))
                print(json.dumps(results[-1]), flush=True)
    finally:
        if hog is not None:
            hog.send_signal(signal.SIGTERM)
            hog.wait()
    ok = all(
        r["exit"] == 0
        and r["done"] == r["total"]
        and r["served"] == r["paid_calls"]
        and r["no_longer_its_own"] == 0
        for r in results
    )
    summary = "; ".join(
        f"{r['which']}: exit {r['exit']}, {r['done']}/{r['total']} done, "
        f"{r['paid_calls']} paid / {r['served']} served, {r['no_longer_its_own']} warnings, "
        f"{r['seconds']} s"
        for r in results
    )
    write_result("busy_runs", {"hog": args.hog, "runs": results}, summary)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
