"""What a user sees of a batch run: `run` says each batch's change of state while it
waits, `status` counts batches and calls by state (text and JSON), and a batch price is
half the live one in `status`'s cost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval

INPUTS = ["--instances", str(EXAMPLES / "instances.jsonl"),
          "--responses", f"model_a={EXAMPLES / 'model_a.jsonl'}",
          "--responses", f"model_b={EXAMPLES / 'model_b.jsonl'}"]  # fmt: skip
CALLS = 27 + 25  # instance mode: one call per (model, instance)


def test_run_says_each_batch_state_and_status_counts_batches_and_calls(tmp_path: Path) -> None:
    with running_simulator(SimConfig(seed=3)) as sim:
        judges = tmp_path / "judges.yaml"
        judges.write_text(
            f"- spec: openai/sim-gpt@{sim.openai_base_url}\n  name: j\n"
            "  price: {input: 2.0, output: 8.0, batch: 0.5}\n  batch: true\n"
            "  batch_max_size: 30\n"
        )
        env = cli_env(f"sqlite:///{tmp_path / 'b.db'}", FLASK_EVAL_BATCH_POLL_SECONDS="0.1")
        ran = flask_eval("run", *INPUTS, "--judges", str(judges), "--run", "b", env=env)
    said = [line for line in ran.stderr.splitlines() if line.startswith("batch ")]
    # two batches of at most 30 calls: each seen at least once, and seen collected
    assert len({line.split()[1] for line in said}) == 2, ran.stderr
    assert sum("(openai, " in line and ": collected" in line for line in said) == 2, said
    text = flask_eval("status", "b", env=env).stdout
    assert "judge j through its provider's batch API: batches 2 collected" in text
    assert f"calls {CALLS} collected" in text
    data = json.loads(flask_eval("status", "b", "--json", env=env).stdout)
    assert data["batches"] == {"j": {"batches": {"collected": 2}, "calls": {"collected": CALLS}}}
    assert data["done"] == data["total"] == CALLS * 3
    assert data["batch_calls"] == data["calls"] == CALLS
    # the run's estimate (what --max-cost reserves) at the batch price: half the live one
    estimated = float(ran.stderr.split("estimated $", 1)[1].split(")", 1)[0])
    live = tmp_path / "live.yaml"
    live.write_text(judges.read_text().replace("  batch: true\n  batch_max_size: 30\n", ""))
    fresh = cli_env(f"sqlite:///{tmp_path / 'fresh.db'}")  # no answer cache to make it free
    dry = flask_eval("run", *INPUTS, "--judges", str(live), "--dry-run", env=fresh)
    live_usd = float(next(x for x in dry.stdout.splitlines() if x.startswith("total")).split()[-3])
    assert estimated == pytest.approx(live_usd / 2, abs=1e-4)  # as printed: 4 decimals


def test_a_live_run_shows_no_batch_lines(tmp_path: Path) -> None:
    with running_simulator(SimConfig(seed=3)) as sim:
        env = cli_env(f"sqlite:///{tmp_path / 'l.db'}")
        ran = flask_eval("run", *INPUTS, "--judge", f"openai/sim-gpt@{sim.openai_base_url}",
                         "--run", "l", env=env)  # fmt: skip
    assert not [line for line in ran.stderr.splitlines() if line.startswith("batch ")]
    data = json.loads(flask_eval("status", "l", "--json", env=env).stdout)
    assert data["batches"] == {} and data["batch_calls"] == 0
    assert "batch API: batches" not in flask_eval("status", "l", env=env).stdout
