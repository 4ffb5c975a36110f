"""Benchmark (a2): one worker process at 256 in flight against heavy-tailed judges.

`python -m bench.latency [--sigmas 0.5 1.0] [--short 5120] [--long 20480 51200]`

The simulator draws each answer's latency from a log-normal with a median of 2,000 ms and
spread sigma (its mean is ``median * exp(sigma**2 / 2)``: 2.27 s at 0.5, 3.30 s at 1.0).
For each sigma two runs, each `flask-eval run` (blocking, as a user runs it) against an
already started worker:

- **short** (>= 5,000 calls): the time-weighted mean number of calls in flight at the
  simulator from its first request to the last request it received, i.e. while open calls
  remained. A worker that keeps every lane busy holds 256 there.
- **long** (>= 20,000 calls, so the last wave, which no client can fill, is small): calls/s
  from the first request to the last answer, and from the `run` command's start to its
  exit, each over the ideal ``256 / mean latency``; and the start-up time before the first
  request (the producer's imports, validation and enqueueing).

The last answer comes after the last request by the tail of the latency, whatever the
client does: the expected overshoot ``y`` solves ``rate * E[(L - y)+] = 1``. At sigma 0.5
(rate 113/s) that is ~7 s, small against the 181 s of 20,480 calls; at sigma 1.0 (rate
78/s) it is ~45 s (single answers of 60-110 s occur), which alone caps 20,480 calls (264 s)
at ~0.85 of the ideal. So the long run of each sigma has its own size (``--long`` takes one
per sigma): 20,480 calls at sigma 0.5 and 51,200 at sigma 1.0 (~660 s, overshoot ~7%).

Writes bench/results/latency.json and prints one line per sigma.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from bench.harness import Workers, env_for, fresh_postgres, run_cli, write_result
from bench.scale import OPENAI, synthetic
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import SimProcess, spawn_simulator
from flask_eval.storage.models import CALL
from flask_eval.storage.store import Store

MEDIAN_MS = 2000.0
IN_FLIGHT = 256


def one_run(sim: SimProcess, tmp: Path, calls: int) -> dict[str, Any]:
    """`flask-eval run` of ``calls`` judge calls against one running worker process."""
    instances, responses = synthetic(tmp, calls)
    with fresh_postgres() as db:
        env = env_for(db)
        args = ["run", "--instances", str(instances), "--run", "a2", "--quiet"]
        for r in responses:
            args += ["--responses", r]
        args += ["--judge", OPENAI[0].format(openai=sim.openai_base_url)]
        workers = Workers(env, 1, IN_FLIGHT)
        sim.reset_stats()
        started = time.time()
        _, producer_cpu = run_cli(args, env)
        exited = time.time()
        stats = sim.stats()
        worker_cpu = workers.stop()
        store = Store(db)
        with store.engine.connect() as conn:
            n, latency_ms = conn.execute(
                select(func.count(), func.avg(CALL.c.latency_ms)).where(CALL.c.raw != "")
            ).one()
        store.close()
    return {
        "calls": int(n),
        "requests": stats["requests"],
        "mean_in_flight_sending": round(stats["mean_in_flight_sending"], 2),
        "sending_seconds": round(stats["sending_seconds"], 2),
        "max_in_flight": stats["max_in_flight"],
        "startup_seconds": round(stats["first_request_at"] - started, 3),
        "first_request_to_last_answer_seconds": round(
            stats["last_answer_at"] - stats["first_request_at"], 2
        ),
        "run_seconds": round(exited - started, 2),
        "mean_latency_ms_seen_by_workers": round(float(latency_ms or 0), 1),
        "producer_cpu_seconds": round(producer_cpu.total, 2),
        "worker_cpu_seconds": round(worker_cpu.total, 2),
    }


def measure(sigma: float, short: int, long: int, tmp: Path) -> dict[str, Any]:
    mean_s = MEDIAN_MS / 1000 * math.exp(sigma**2 / 2)
    ideal = IN_FLIGHT / mean_s
    config = SimConfig(latency_ms=MEDIAN_MS, latency_dist="lognormal", sigma=sigma)
    with spawn_simulator(config) as sim:
        s = one_run(sim, tmp / f"short-{sigma}", short)
        lg = one_run(sim, tmp / f"long-{sigma}", long)
    busy = lg["first_request_to_last_answer_seconds"]
    return {
        "sigma": sigma,
        "median_ms": MEDIAN_MS,
        "mean_latency_s": round(mean_s, 4),
        "ideal_calls_per_second": round(ideal, 2),
        "short": s,
        "long": lg,
        "in_flight_ratio": round(s["mean_in_flight_sending"] / IN_FLIGHT, 3),
        "busy_ratio": round(lg["calls"] / busy / ideal, 3),
        "run_ratio": round(lg["calls"] / lg["run_seconds"] / ideal, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sigmas", type=float, nargs="+", default=[0.5, 1.0])
    ap.add_argument("--short", type=int, default=5120, help="calls of the in-flight run")
    ap.add_argument(
        "--long",
        type=int,
        nargs="+",
        default=[20480, 51200],
        help="calls of the throughput run, one per sigma (or one for all)",
    )
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as d:
        longs = args.long * len(args.sigmas) if len(args.long) == 1 else args.long
        if len(longs) != len(args.sigmas):
            ap.error("--long takes one size, or one per sigma")
        for sigma, long_calls in zip(args.sigmas, longs, strict=True):
            r = measure(sigma, args.short, long_calls, Path(d))
            results.append(r)
            print(
                f"sigma {sigma}: in flight while sending {r['short']['mean_in_flight_sending']}"
                f" of {IN_FLIGHT} ({r['in_flight_ratio']}); {r['long']['calls']} calls: "
                f"first request to last answer {r['busy_ratio']} of ideal "
                f"{r['ideal_calls_per_second']}/s, run start to exit {r['run_ratio']}; "
                f"start-up {r['long']['startup_seconds']} s",
                flush=True,
            )
    write_result(
        "latency",
        {"runs": results},
        "; ".join(
            f"sigma {r['sigma']}: {r['in_flight_ratio']} in flight, busy {r['busy_ratio']}, "
            f"run {r['run_ratio']}"
            for r in results
        ),
    )


if __name__ == "__main__":
    main()
