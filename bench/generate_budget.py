"""Benchmark: generation under a model's rate limit, shared by all workers (issue 22,
acceptance 3). A simulated model under test limited to RPM requests in any 60 s window
(the simulator answers 429 above it), declared with the same `rpm` in the models file;
two worker processes on Redis generate N responses; the simulator counts its 429s, and
the run's calls are metered (tokens, cost) as judge calls are::

    python -m bench.generate_budget --responses 90 --rpm 60
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from pathlib import Path

from bench.harness import Workers, env_for, run_cli, write_result
from flask_eval.producer.synthetic import write_inputs
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import spawn_simulator


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--responses", type=int, default=90)
    parser.add_argument("--rpm", type=int, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        instances, _ = write_inputs(folder / "in", args.responses, models=("unused",))
        db = folder / "gen.db"
        config = SimConfig(latency_ms=50, rpm=args.rpm, seed=1, generators={"m1": 3.0})
        with spawn_simulator(config) as sim:
            models = folder / "models.yaml"
            price = "{input: 0.5, output: 1.5}"
            models.write_text(
                f"- name: m1\n  spec: openai/m1@{sim.openai_base_url}\n"
                f"  rpm: {args.rpm}\n  price: {price}\n"
            )
            env = env_for(f"sqlite:///{db}")
            workers = Workers(env, processes=2, in_flight=32, log=folder / "w.log")
            try:
                started = time.monotonic()
                run_cli(
                    [
                        "generate",
                        "--instances",
                        str(instances),
                        "--models",
                        str(models),
                        "--out",
                        str(folder / "out"),
                        "--run",
                        "g",
                        "--quiet",
                    ],
                    env,
                )
                elapsed = time.monotonic() - started
            finally:
                workers.stop()
            stats = sim.stats()
        with sqlite3.connect(db) as conn:
            calls, ptok, ctok, cost = conn.execute(
                "SELECT COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(cost) FROM call"
            ).fetchone()
        lines = (folder / "out" / "m1.jsonl").read_text().splitlines()
        written = [json.loads(x) for x in lines]
    result = {
        "responses": len(written),
        "rpm": args.rpm,
        "simulator_requests": stats["requests"],
        "rate_limited": stats["rate_limited"],
        "elapsed_s": round(elapsed, 1),
        "achieved_rpm": round(stats["requests"] / elapsed * 60, 1),
        "paid_calls": calls,
        "prompt_tokens": ptok,
        "completion_tokens": ctok,
        "cost_usd": round(cost, 6),
    }
    summary = (
        f"{len(written)} responses at rpm {args.rpm} by 2 workers in {elapsed:.0f} s "
        f"({result['achieved_rpm']} rpm achieved): {stats['rate_limited']} x 429; "
        f"{calls} paid calls, {ptok} + {ctok} tokens, ${cost:.6f}"
    )
    write_result("generate_budget", result, summary)


if __name__ == "__main__":
    main()
