"""A healthy judge under the adaptive in-flight limit (issue 20): the in-process executor
against a simulator process, wall time and this process's CPU per call.

`python -m bench.adaptive [--latency-ms 0] [--instances 300] [--in-flight 64] [--rounds 3]`

Each round runs the same ledger twice, interleaved, with the limit adaptive and fixed at
its ceiling (``ExecutorConfig.adaptive``); messages of 64 calls, as a worker gets them.
To compare with a checkout from before the limit existed (which has no ``adaptive``),
run this file with that checkout first on ``PYTHONPATH``: it then measures what it has.
Prints one line per run; docs/design/concurrency.md quotes the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import tempfile
from dataclasses import fields
from pathlib import Path
from time import monotonic

from flask_eval.core.types import Instance, JudgeConfig, Response, ResponseSet
from flask_eval.producer.plan import open_calls
from flask_eval.rubrics import codec
from flask_eval.rubrics.skills import load_default
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import SimProcess, spawn_simulator
from flask_eval.storage.store import Store
from flask_eval.workers.runner import Executor, ExecutorConfig

#: calls per message, as `FLASK_EVAL_CALLS_PER_MESSAGE` defaults
PER_MESSAGE = 64


def _ledger(store: Store, n: int, spec: str) -> tuple[int, list[list[int]]]:
    """A run of ``n`` instances x 2 models x 3 skills, one call per skill, one judge."""
    skills = load_default()
    names = skills.names
    instances = [
        Instance(
            str(i),
            f"question {i}",
            f"answer {i}",
            (names[i % 12], names[(i + 3) % 12], names[(i + 7) % 12]),
        )
        for i in range(n)
    ]
    sets = [
        ResponseSet(
            m, f"{m}.jsonl", tuple(Response(m, i.id, f"{m} says {i.id}") for i in instances)
        )
        for m in ("alpha", "beta")
    ]
    config = {
        "judges": [JudgeConfig("sim", spec).to_data()],
        "skills": codec.to_data(skills),
        "mode": "skill",
    }
    run, _ = store.create_run(
        name="b",
        fingerprint="b" * 64,
        mode="skill",
        config=config,
        instances=instances,
        response_sets=sets,
        judges=["sim"],
    )
    return run.id, [c.ids for c in open_calls(store, store.run_by_id(run.id))]


def once(sim: SimProcess, adaptive: bool, n: int, in_flight: int) -> tuple[float, float, int]:
    """(wall seconds, CPU ms per call, calls) of one in-process run."""
    with tempfile.TemporaryDirectory() as folder:
        store = Store(f"sqlite:///{Path(folder) / 'b.db'}")
        run_id, calls = _ledger(store, n, f"openai/sim@{sim.openai_base_url}")
        has = {f.name for f in fields(ExecutorConfig)}
        extra = {"adaptive": adaptive} if "adaptive" in has else {}
        executor = Executor(store, ExecutorConfig(in_flight=in_flight, halt_after=0, **extra))

        async def go() -> None:
            try:
                await asyncio.gather(
                    *(
                        executor.run_batch(run_id, calls[i : i + PER_MESSAGE])
                        for i in range(0, len(calls), PER_MESSAGE)
                    )
                )
            finally:
                await executor.aclose()

        before, started = resource.getrusage(resource.RUSAGE_SELF), monotonic()
        asyncio.run(go())
        wall, after = monotonic() - started, resource.getrusage(resource.RUSAGE_SELF)
        store.close()
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu * 1000 / len(calls), len(calls)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--latency-ms", type=float, default=0.0, help="log-normal median (0: none)")
    ap.add_argument("--instances", type=int, default=300)
    ap.add_argument("--in-flight", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    dist = "lognormal" if args.latency_ms else "fixed"
    with spawn_simulator(SimConfig(latency_ms=args.latency_ms, latency_dist=dist)) as sim:
        once(sim, True, 10, args.in_flight)  # imports and connections
        for r in range(args.rounds):
            for adaptive in (True, False) if r % 2 == 0 else (False, True):
                wall, cpu, calls = once(sim, adaptive, args.instances, args.in_flight)
                print(
                    f"adaptive={adaptive} calls={calls} wall={wall:.2f}s cpu_per_call={cpu:.2f}ms",
                    flush=True,
                )


if __name__ == "__main__":
    main()
