"""Benchmark: a batch-mode run of N judgments (2,000 by default) through OpenAI's Batch
API on the simulator, in-process: done == total, every call submitted once, and the wall
time. Issue 21, acceptance 1 (the OpenAI part)::

    python -m bench.batch_run --judgments 2000
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
from pathlib import Path

from flask_eval.producer.synthetic import write_inputs
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator

SKILLS_PER_INSTANCE = 3  # write_inputs: 3 skills per instance, 2 models


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--judgments", type=int, default=2000)
    args = parser.parse_args()
    instances = max(1, -(-args.judgments // (SKILLS_PER_INSTANCE * 2)))  # rounded up
    with tempfile.TemporaryDirectory() as tmp, running_simulator(SimConfig(seed=1)) as sim:
        inputs, responses = write_inputs(Path(tmp) / "in", instances)
        judges = Path(tmp) / "judges.yaml"
        judges.write_text(f"- spec: openai/sim-gpt@{sim.openai_base_url}\n  name: j\n"
                          "  batch: true\n  batch_max_size: 500\n")  # fmt: skip
        env = {**os.environ, "FLASK_EVAL_DATABASE_URL": f"sqlite:///{tmp}/b.db",
               "OPENAI_API_KEY": "sk-bench", "FLASK_EVAL_BATCH_POLL_SECONDS": "0.2"}  # fmt: skip
        cmd = [sys.executable, "-m", "flask_eval", "run", "--instances", str(inputs),
               "--judges", str(judges), "--run", "b", "--quiet"]  # fmt: skip
        for r in responses:
            cmd += ["--responses", r]
        started = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        took = time.perf_counter() - started
        status = json.loads(subprocess.run(
            [sys.executable, "-m", "flask_eval", "status", "b", "--json"], env=env,
            check=True, capture_output=True, text=True).stdout)  # fmt: skip
        with urllib.request.urlopen(f"{sim.base_url}/batches/submitted") as resp:
            seen = json.loads(resp.read())["openai"]
    once = set(seen["submitted"].values()) == {1}
    print(f"judgments {status['total']}: done {status['done']}, failed {status['failed']}; "
          f"{seen['batches']} batches, {len(seen['submitted'])} calls, each submitted once: "
          f"{once}; {took:.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
