"""Issue 3's benchmarks: `python -m bench.scale efficiency|scaleout|budget|overhead|workload|cost`.

Each writes bench/results/<name>.json and prints one summary line. Figures and the
machine they ran on go into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

import bench.scaleout
from bench.harness import REPO, Cpu, Workers, env_for, fresh_postgres, run_cli, write_result
from flask_eval.producer.synthetic import write_inputs
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import SimProcess, spawn_simulator
from flask_eval.storage.models import CALL
from flask_eval.storage.store import Store

FLASK = REPO.parent / "shared" / "flask-data"


@dataclass
class Measured:
    calls: int
    wall: float  # enqueue done -> last judgment written
    span: float  # seconds from the first answer recorded to the last
    producer_cpu: Cpu
    worker_cpu: Cpu
    stats: dict[str, Any]

    @property
    def steady_rate(self) -> float:
        """Calls/s between the first and the last answer recorded."""
        return (self.calls - 1) / self.span if self.span > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "wall_seconds": round(self.wall, 2),
            "calls_per_second_wall": round(self.calls / self.wall, 2),
            "calls_per_second_steady": round(self.steady_rate, 2),
            "producer_cpu_seconds": round(self.producer_cpu.total, 2),
            "worker_cpu_seconds": round(self.worker_cpu.total, 2),
            "simulator": self.stats,
        }


def measure(
    db: str,
    sim: SimProcess,
    inputs: tuple[Path, list[str]],
    *,
    processes: int,
    in_flight: int,
    judges: list[str],
    extra_args: tuple[str, ...] = (),
    env_extra: dict[str, str] | None = None,
) -> Measured:
    env = env_for(db, **(env_extra or {}))
    instances, responses = inputs
    args = [
        "run",
        "--instances",
        str(instances),
        "--run",
        "bench",
        "--no-wait",
        "--quiet",
        *extra_args,
    ]
    for r in responses:
        args += ["--responses", r]
    for j in judges:
        args += ["--judge", j.format(openai=sim.openai_base_url, anthropic=sim.anthropic_base_url)]
    sim.reset_stats()
    workers = Workers(env, processes, in_flight)
    t0 = time.perf_counter()
    _, producer_cpu = run_cli(args, env)
    store = Store(db)
    run = store.find_run("bench")
    assert run is not None
    while store.count_open(run.id):
        time.sleep(0.25)
    wall = time.perf_counter() - t0
    worker_cpu = workers.stop()
    with store.engine.connect() as conn:
        n, first, last = conn.execute(
            select(func.count(), func.min(CALL.c.created_at), func.max(CALL.c.created_at)).where(
                CALL.c.run_id == run.id
            )
        ).one()
    store.close()
    span = (last - first).total_seconds() if n > 1 else wall
    return Measured(int(n), wall, span, producer_cpu, worker_cpu, sim.stats())


def synthetic(folder: Path, calls: int, models: int = 2) -> tuple[Path, list[str]]:
    """Inputs giving ``calls`` judge calls per judge in instance mode."""
    return write_inputs(folder, calls // models, models=tuple(f"m{i}" for i in range(models)))


OPENAI = ["openai/sim-gpt@{openai}"]
BOTH = ["openai/sim-gpt@{openai}", "anthropic/sim-claude@{anthropic}"]


def efficiency(tmp: Path) -> None:
    """(a) one worker process, 256 in flight, 2,000 ms latency, >= 5,000 calls.

    The rate is every call over the time from the first request sent (the first answer
    less the 2 s latency) to the last answer: it leaves out the producer's start-up but
    not the first wave's latency. (First answer to last answer alone would count the
    first wave's 256 calls but not their 2 s, overstating the rate by a wave.)
    """
    latency = 2.0
    with spawn_simulator(SimConfig(latency_ms=latency * 1000)) as sim, fresh_postgres() as db:
        m = measure(db, sim, synthetic(tmp, 5120), processes=1, in_flight=256, judges=OPENAI)
    ideal = 256 / latency
    rate = m.calls / (m.span + latency)
    ratio = rate / ideal
    write_result(
        "efficiency",
        {
            **m.as_dict(),
            "ideal_calls_per_second": ideal,
            "calls_per_second_from_first_send": round(rate, 2),
            "ratio": round(ratio, 3),
            "ratio_wall": round(m.calls / m.wall / ideal, 3),
        },
        f"{rate:.1f} calls/s from the first request to the last answer "
        f"({m.calls / m.wall:.1f} over the wall) of ideal {ideal:.0f}: "
        f"{ratio:.3f}; max in flight at the simulator {m.stats.get('max_in_flight')}",
    )


def scaleout(tmp: Path) -> None:
    """(b) 1, 2, 4 and 8 worker processes at 64 in flight each, 2,000 ms latency, with
    the CPU of every party per call (issue 24): bench/scaleout.py."""
    bench.scaleout.run(tmp)


def scaleout_lognormal(tmp: Path) -> None:
    """(b2) as (b), with log-normal latency (median 2,000 ms, sigma 0.5: mean 2.27 s) and
    3,072 calls per process, so that the tail of the last wave, which grows with the
    number of calls, weighs little against the run (~110 s per process)."""
    config = SimConfig(latency_ms=2000, latency_dist="lognormal", sigma=0.5)
    _scaleout(tmp, "scaleout_lognormal", config, 3072, 64 / (2.0 * math.exp(0.5**2 / 2)))


def _scaleout(tmp: Path, name: str, config: SimConfig, per_process: int, ideal: float) -> None:
    rates: dict[int, dict[str, Any]] = {}
    with spawn_simulator(config) as sim:
        for p in (1, 2, 4):
            with fresh_postgres() as db:
                m = measure(
                    db,
                    sim,
                    synthetic(tmp / f"p{p}", per_process * p),
                    processes=p,
                    in_flight=64,
                    judges=OPENAI,
                )
            rates[p] = m.as_dict()
    base = rates[1]["calls_per_second_steady"]
    ratios = {p: round(r["calls_per_second_steady"] / base, 3) for p, r in rates.items()}
    write_result(
        name,
        {"runs": rates, "ratios": ratios, "ideal_per_process": round(ideal, 2)},
        f"throughput ratios vs 1 process: {ratios} (calls/s: "
        f"{ {p: r['calls_per_second_steady'] for p, r in rates.items()} })",
    )


def budget(tmp: Path) -> None:
    """(c) a 600 rpm simulator, 4 worker processes, >= 90 s: achieved rate / limit, 429s."""
    limit = 600
    calls = 1000  # 100 s at the limit
    with (
        tempfile.TemporaryDirectory() as d,
        spawn_simulator(SimConfig(latency_ms=200, rpm=limit)) as sim,
    ):
        judges = Path(d) / "judges.yaml"
        judges.write_text(f"- spec: openai/sim-gpt@{sim.openai_base_url}\n  rpm: {limit}\n")
        with fresh_postgres() as db:
            m = measure(
                db,
                sim,
                synthetic(tmp, calls),
                processes=4,
                in_flight=64,
                judges=[],
                extra_args=("--judges", str(judges)),
            )
    achieved = m.steady_rate * 60
    write_result(
        "budget",
        {
            **m.as_dict(),
            "limit_rpm": limit,
            "achieved_rpm": round(achieved, 1),
            "ratio": round(achieved / limit, 3),
            "rate_limited_seen_by_simulator": m.stats["rate_limited"],
        },
        f"{achieved:.0f} rpm achieved of {limit} ({achieved / limit:.3f}) over {m.wall:.0f} s; "
        f"429s sent by the simulator: {m.stats['rate_limited']}",
    )


#: the bare loops of (d) (bench/bare_sdk.py): (name, --loop, --call)
BARE_LOOPS = (
    ("senders", "senders", "create"),  # today's floor: 64 senders, the typed create
    ("gather", "gather", "create"),  # as a plain user writes it: gather + semaphore
    ("senders_post", "senders", "post"),  # the same HTTP path as our judge: our machinery
)


def overhead(tmp: Path) -> None:
    """(d) 0 ms latency: CPU per call of producer + workers vs bare SDK loops.

    Ours counts everything: both processes from start to exit, imports and worker
    boot included (about 2.5 s of fixed CPU, reported apart as ``fixed_cpu_seconds``).
    The bare loops count only their calls (``BARE_LOOPS``). OVERHEAD_CALLS sets the size
    (default 24,000: a run at scale, where the fixed cost is small per call).

    The speed of this machine drifts by up to 30% within minutes, so one pair of runs
    proves little: OVERHEAD_ROUNDS (default 3) runs of ours alternate with runs of every
    bare loop (bare loops, ours, bare loops, ours, ..., bare loops). Each of ours is
    divided by the mean of each loop's two runs around it; every round is reported, and
    the median per loop is the result.
    """
    calls = int(os.environ.get("OVERHEAD_CALLS", "24000"))
    rounds = max(1, int(os.environ.get("OVERHEAD_ROUNDS", "3")))
    inputs = synthetic(tmp, calls)
    with spawn_simulator(SimConfig(latency_ms=0)) as sim:

        def bare_ms(loop: str, call: str) -> float:
            b = _bare_loop(sim, inputs, 64, "--loop", loop, "--call", call)
            return float(b["cpu_seconds"]) / int(b["calls"]) * 1000

        def bare_round() -> None:
            for name, loop, call in BARE_LOOPS:
                bare[name].append(bare_ms(loop, call))

        bare: dict[str, list[float]] = {name: [] for name, _, _ in BARE_LOOPS}
        bare_round()
        runs: list[dict[str, Any]] = []
        for _ in range(rounds):
            with fresh_postgres() as db:
                if not runs:
                    fixed = _fixed_cpu(db, sim, tmp)
                m = measure(db, sim, inputs, processes=1, in_flight=64, judges=OPENAI)
            bare_round()
            ours = (m.producer_cpu.total + m.worker_cpu.total) / m.calls * 1000
            floors = {name: (b[-2] + b[-1]) / 2 for name, b in bare.items()}
            runs.append(
                {
                    **m.as_dict(),
                    "cpu_ms_per_call": round(ours, 3),
                    "bare_cpu_ms_per_call": {n: round(f, 3) for n, f in floors.items()},
                    "ratio": {n: round(ours / f, 3) for n, f in floors.items()},
                }
            )
    medians = {n: statistics.median(r["ratio"][n] for r in runs) for n in bare}
    ranges = {n: [min(r["ratio"][n] for r in runs), max(r["ratio"][n] for r in runs)] for n in bare}
    write_result(
        "overhead",
        {
            "calls": calls,
            "rounds": runs,
            "bare_runs_cpu_ms_per_call": {n: [round(x, 3) for x in b] for n, b in bare.items()},
            "fixed_cpu_seconds": round(fixed, 2),
            "ratio": {n: round(v, 3) for n, v in medians.items()},
            "ratio_range": ranges,
        },
        f"over {rounds} rounds of {calls} calls; ours "
        + ", ".join(f"{r['cpu_ms_per_call']:.2f}" for r in runs)
        + " ms per call; median ratio (range) vs "
        + "; ".join(
            f"{n} {medians[n]:.2f}x ({ranges[n][0]:.2f}-{ranges[n][1]:.2f}, bare "
            + ", ".join(f"{x:.2f}" for x in bare[n])
            + " ms)"
            for n in bare
        )
        + f"; start-up {fixed:.1f} s",
    )


def _bare_loop(
    sim: SimProcess, inputs: tuple[Path, list[str]], in_flight: int, *args: str
) -> dict[str, Any]:
    """One run of bench/bare_sdk.py on ``inputs`` against ``sim``: its JSON summary."""
    cmd = [sys.executable, "-m", "bench.bare_sdk", "--base-url", sim.openai_base_url]
    cmd += ["--instances", str(inputs[0]), "--in-flight", str(in_flight), *args]
    for r in inputs[1]:
        cmd += ["--responses", r]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout))


def _fixed_cpu(db: str, sim: SimProcess, tmp: Path) -> float:
    """CPU of a worker that boots and stops idle, plus a producer enqueueing one call."""
    env = env_for(db)
    idle = Workers(env, 1, 64).stop()
    one = synthetic(tmp / "one", 2, models=1)
    args = ["run", "--instances", str(one[0]), "--run", "fixed", "--dry-run", "--quiet"]
    args += ["--responses", one[1][0], "--judge", OPENAI[0].format(openai=sim.openai_base_url)]
    _, producer = run_cli(args, env)
    return idle.total + producer.total


def workload(tmp: Path) -> None:
    """(e) all 15 models' responses x the FLASK set x 2 judges, 200 ms latency, 2 worker
    processes x 256 in flight; against a bare SDK loop of the same calls in one process
    at the same 512 in flight (a gather behind a semaphore, the SDKs' typed calls), run
    before and after ours on the same simulator: ours in calls/s from the `run`
    command's start to the last judgment written, the bare loop's between its first call
    and its last answer (its imports and prompt rendering not counted)."""
    outputs = sorted((FLASK / "model_output" / "outputs").glob("*.jsonl"))
    if not outputs:
        print("workload: skipped, ../shared/flask-data is absent")
        return
    inputs = (
        FLASK / "evaluation_set" / "flask_evaluation.jsonl",
        [f"{p.stem}={p}" for p in outputs],
    )
    with spawn_simulator(SimConfig(latency_ms=200)) as sim:

        def bare_rate() -> float:
            extra = ("--anthropic-base-url", sim.anthropic_base_url, "--loop", "gather")
            b = _bare_loop(sim, inputs, 512, *extra)
            return int(b["calls"]) / float(b["wall_seconds"])

        bare = [bare_rate()]
        with fresh_postgres() as db:
            sim_cpu0 = _proc_cpu(sim)
            m = measure(db, sim, inputs, processes=2, in_flight=256, judges=BOTH)
            sim_cpu = _proc_cpu(sim) - sim_cpu0
        bare.append(bare_rate())
    ours = m.calls / m.wall
    ratio = ours / statistics.mean(bare)
    write_result(
        "workload",
        {
            **m.as_dict(),
            "models": len(outputs),
            "simulator_cpu_seconds": round(sim_cpu, 2),
            "bare_calls_per_second": [round(b, 1) for b in bare],
            "ratio": round(ratio, 3),
        },
        f"{m.calls} calls in {m.wall:.0f} s ({ours:.0f} calls/s over the whole run) vs the "
        f"bare SDK loop {bare[0]:.0f} and {bare[1]:.0f} calls/s: {ratio:.2f}x; CPU: producer "
        f"{m.producer_cpu.total:.0f} s, workers {m.worker_cpu.total:.0f} s, "
        f"simulator {sim_cpu:.0f} s over {m.wall:.0f} s x 2 cores",
    )


def _proc_cpu(sim: SimProcess) -> float:
    fields = Path(f"/proc/{sim.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime + stime, in clock ticks


def cost(tmp: Path) -> None:
    """(f) prompt tokens per judged skill: one call per skill vs one call per instance."""
    src = FLASK / "evaluation_set" / "flask_evaluation.jsonl"
    if src.exists():
        instances = tmp / "instances.jsonl"
        instances.write_text("".join(src.read_text().splitlines(keepends=True)[:1000]))
        gpt4 = tmp / "gpt4.jsonl"
        gpt4.write_text(
            "".join(
                (FLASK / "model_output/outputs/gpt4.jsonl")
                .read_text()
                .splitlines(keepends=True)[:1000]
            )
        )
        inputs = (instances, [f"gpt4={gpt4}"])
    else:
        inputs = write_inputs(tmp / "synthetic", 1000, models=("m1",))
    per: dict[str, Any] = {}
    with spawn_simulator(SimConfig()) as sim:
        for mode in ("skill", "instance"):
            sim.reset_stats()
            db = f"sqlite:///{tmp / f'{mode}.db'}"
            env = env_for(db, broker=False)
            args = [
                "run",
                "--instances",
                str(inputs[0]),
                "--responses",
                inputs[1][0],
                "--mode",
                mode,
                "--judge",
                f"openai/sim@{sim.openai_base_url}",
                "--quiet",
                "--in-flight",
                "128",
            ]
            run_cli(args, env)
            status = json.loads(run_cli(["status", "--json"], env)[0].stdout)
            stats = sim.stats()
            run_cli(args, env)  # a re-run of the finished run
            per[mode] = {
                "judged_skills": status["done"],
                "requests": stats["requests"],
                "prompt_tokens": stats["prompt_tokens"],
                "prompt_tokens_per_skill": stats["prompt_tokens"] / status["done"],
                "rerun_requests": sim.stats()["requests"] - stats["requests"],
            }
    ratio = per["instance"]["prompt_tokens_per_skill"] / per["skill"]["prompt_tokens_per_skill"]
    write_result(
        "cost",
        {"modes": per, "ratio_instance_over_skill": round(ratio, 3)},
        f"prompt tokens per judged skill: per-skill {per['skill']['prompt_tokens_per_skill']:.0f}, "
        f"per-instance {per['instance']['prompt_tokens_per_skill']:.0f} ({ratio:.3f}x); "
        f"re-run requests: {per['skill']['rerun_requests']} and "
        f"{per['instance']['rerun_requests']}",
    )


BENCHMARKS = {
    f.__name__: f
    for f in (efficiency, scaleout, scaleout_lognormal, budget, overhead, workload, cost)
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("names", nargs="*", choices=[*BENCHMARKS, []], help="default: all")
    for name in ap.parse_args().names or list(BENCHMARKS):
        with tempfile.TemporaryDirectory() as d:
            BENCHMARKS[name](Path(d))


if __name__ == "__main__":
    main()
