"""Benchmark: a batch-mode run of N judgments (2,000 by default) through each provider's
batch API on the simulator (OpenAI's Batch API, Anthropic's Message Batches, Gemini's
batch mode), without a broker (the in-process transport), with one lost creation answer
injected (the simulator accepts the first batch and drops its HTTP answer: the lane must
find it by its tag, not submit it again). For each provider it prints done/total, the
batches and calls the simulator saw, whether each call was submitted exactly once,
whether the report equals a live run's with the same simulator seed, and the wall time of
the batch run (a ``flask-eval run`` process, start-up included). Issue 21, acceptance 1::

    python -m bench.batch_run --judgments 2000 --provider all
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from flask_eval.producer.synthetic import write_inputs
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import SimHandle, running_simulator
from flask_eval.workers.providers.anthropic_batch import parse_wire_id

SKILLS_PER_INSTANCE = 3  # write_inputs: 3 skills per instance, 2 models
PROVIDERS = ("openai", "anthropic", "gemini")
SEED = 1
KEYS = {
    "OPENAI_API_KEY": "sk-bench",
    "ANTHROPIC_API_KEY": "sk-ant-bench",
    "GEMINI_API_KEY": "bench",
}
#: variables of the caller's environment that would send a judge elsewhere
UNSET = (
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_API_KEY",
    "FLASK_EVAL_BROKER_URL",
)


def spec(provider: str, sim: SimHandle) -> str:
    if provider == "openai":
        return f"openai/sim-gpt@{sim.openai_base_url}"
    return f"{provider}/sim-{provider}@{sim.base_url}"


def flask_eval(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "flask_eval", *args], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(
            f"flask-eval {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}"
        )
    return done.stdout


def run(provider: str, tmp: Path, inputs: list[str], batch: bool) -> dict[str, Any]:
    """One run on a fresh simulator (seed ``SEED``): its status, report, wall time and, for
    a batch run, what the simulator saw of its batches."""
    name = "batch" if batch else "live"
    with running_simulator(SimConfig(seed=SEED)) as sim:
        judges = tmp / f"{provider}-{name}.yaml"
        text = f"- spec: {spec(provider, sim)}\n  name: j\n"
        if batch:
            text += "  batch: true\n  batch_max_size: 500\n"
            settings = urllib.request.Request(
                f"{sim.base_url}/batches/settings", data=b'{"lose_responses": 1}'
            )
            urllib.request.urlopen(settings, timeout=10).close()
        judges.write_text(text)
        env = {k: v for k, v in os.environ.items() if k not in UNSET}
        env.update(
            KEYS,
            FLASK_EVAL_DATABASE_URL=f"sqlite:///{tmp}/{provider}-{name}.db",
            FLASK_EVAL_BATCH_POLL_SECONDS="0.2",
        )
        started = time.perf_counter()
        flask_eval("run", *inputs, "--judges", str(judges), "--run", "b", "--quiet", env=env)
        took = time.perf_counter() - started
        seen = None
        if batch:
            with urllib.request.urlopen(f"{sim.base_url}/batches/submitted", timeout=10) as r:
                seen = json.loads(r.read())[provider]
    status = json.loads(flask_eval("status", "b", "--json", env=env))
    rows = json.loads(flask_eval("report", "b", "--format", "json", env=env))["rows"]
    return {"status": status, "rows": rows, "took": took, "seen": seen}


def calls_of(provider: str, submitted: dict[str, int]) -> Counter[str]:
    """How many times each of our calls was submitted (Anthropic's custom_ids carry the
    batch's tag: our call id is their tail)."""
    calls: Counter[str] = Counter()
    for sent, n in submitted.items():
        ours = parse_wire_id(sent) if provider == "anthropic" else None
        calls[ours[2] if ours else sent] += n
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--judgments", type=int, default=2000)
    parser.add_argument("--provider", choices=(*PROVIDERS, "all"), default="all")
    args = parser.parse_args()
    providers = PROVIDERS if args.provider == "all" else (args.provider,)
    instances = max(1, -(-args.judgments // (SKILLS_PER_INSTANCE * 2)))  # rounded up
    with tempfile.TemporaryDirectory() as tmp:
        instances_path, responses = write_inputs(Path(tmp) / "in", instances)
        inputs = ["--instances", str(instances_path)]
        for r in responses:
            inputs += ["--responses", r]
        for provider in providers:
            batch = run(provider, Path(tmp), inputs, batch=True)
            live = run(provider, Path(tmp), inputs, batch=False)
            st, seen = batch["status"], batch["seen"]
            calls = calls_of(provider, seen["submitted"])
            once = bool(calls) and set(calls.values()) == {1}
            print(
                f"{provider}: done {st['done']}/{st['total']} (failed {st['failed']}); "
                f"{seen['batches']} batches ({seen['lost']} creation answer lost), "
                f"{len(calls)} calls, each submitted exactly once: {once}; report "
                f"({len(live['rows'])} rows) equals the live run's: "
                f"{bool(live['rows']) and batch['rows'] == live['rows']}; batch run "
                f"{batch['took']:.1f} s (live {live['took']:.1f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
