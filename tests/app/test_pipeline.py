"""The whole pipeline in-process (the embedded default): CLI, simulator, SQLite."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from flask_eval.app import pipeline, wait_loop
from flask_eval.app.waiting import FirstStep, StoppedWaiting
from flask_eval.core import settings as settings_mod
from flask_eval.core.spec import run_spec
from flask_eval.producer.dispatch import MemoryTransport
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval

DIMENSIONS = {"overall", "skill", "ability", "domain", "difficulty", "skill_difficulty"}


def run_args(base_openai: str, base_anthropic: str, run: str = "t1") -> list[str]:
    return [
        "run",
        "--instances",
        str(EXAMPLES / "instances.jsonl"),
        "--responses",
        f"model_a={EXAMPLES / 'model_a.jsonl'}",
        "--responses",
        f"model_b={EXAMPLES / 'model_b.jsonl'}",
        "--judge",
        f"openai/sim-gpt@{base_openai}",
        "--judge",
        f"anthropic/sim-claude@{base_anthropic}",
        "--run",
        run,
        "--quiet",
    ]


@pytest.mark.e2e
def test_in_process_run_report_export_and_rerun_pays_nothing(sqlite_url: str) -> None:
    env = cli_env(sqlite_url)
    with running_simulator(SimConfig(garbage_rate=0.1, seed=3)) as sim:
        proc = flask_eval(
            *run_args(sim.openai_base_url, sim.anthropic_base_url), env=env, check=False
        )
        first = sim.stats()["requests"]
        st = json.loads(flask_eval("status", "--json", env=env).stdout)
        assert st["run"] == "t1" and st["pending"] == 0
        assert st["done"] + st["failed"] == st["total"] > 0
        # exit 0 only when every judgment is done, else 1 with a one-line summary
        assert proc.returncode == (1 if st["failed"] else 0), proc.stderr
        assert "Where to look next" in proc.stdout
        # 27 instances x model_a + 25 x model_b, 2 judges; garbage answers get a reminder
        assert first >= (27 + 25) * 2
        flask_eval(*run_args(sim.openai_base_url, sim.anthropic_base_url), env=env, check=False)
        assert sim.stats()["requests"] == first  # resumed: nothing left to pay for

    report = json.loads(flask_eval("report", "--format", "json", env=env).stdout)
    assert report["run"] == "t1"
    pairs = {(r["model"], r["judge"]) for r in report["rows"]}
    assert len(pairs) == 4
    for pair in pairs:
        dims = {r["dimension"] for r in report["rows"] if (r["model"], r["judge"]) == pair}
        assert dims == DIMENSIONS
    difficulties = {r["key"] for r in report["rows"] if r["dimension"] == "difficulty"}
    assert difficulties == {"1", "2", "3", "4", "5"}
    overall = [r for r in report["rows"] if r["dimension"] == "overall"]
    assert sum(r["n"] + r["n_na"] + r["n_failed"] for r in overall) == st["total"]

    lines = flask_eval("export", "--format", "jsonl", env=env).stdout.splitlines()
    assert len(lines) == st["total"]
    row = json.loads(lines[0])
    assert set(row) >= {
        "run",
        "model",
        "judge",
        "instance_id",
        "skill",
        "status",
        "score",
        "reason",
        "raw",
    }
    csv_out = flask_eval("report", "t1", "--format", "csv", env=env).stdout.splitlines()
    assert csv_out[0] == "model,judge,dimension,key,mean,n,n_na,n_failed,ci_low,ci_high"
    assert len(csv_out) == len(report["rows"]) + 1


def test_skill_mode_makes_one_call_per_skill(sqlite_url: str) -> None:
    env = cli_env(sqlite_url)
    with running_simulator(SimConfig(seed=1)) as sim:
        flask_eval(
            *run_args(sim.openai_base_url, sim.anthropic_base_url, "per-skill"),
            "--mode",
            "skill",
            env=env,
        )
        st = json.loads(flask_eval("status", "--json", env=env).stdout)
        assert st["done"] == st["total"]
        assert sim.stats()["requests"] == st["total"]


@pytest.mark.e2e
def test_demo_runs_and_prints_breakdowns(tmp_path: Path) -> None:
    env = cli_env(f"sqlite:///{tmp_path / 'demo.db'}")
    out = flask_eval("demo", env=env).stdout
    # what the numbers are, and the terms, said once
    assert "Scores run from 1 (poor) to 5 (excellent)" in out and "simulated judges" in out
    assert out.count("a judgment is one score") == 1 and "a call is" in out
    # the same table layout as `run` and `report`: overall per model and judge, intervals
    assert "Leaderboard: overall mean" in out and "95% CI" in out
    assert "model_a" in out and "model_b" in out and "flask-eval report demo" in out


# -- waiting for workers, in-process: a transport that names a queue, no broker ----------


class QueuedTransport(MemoryTransport):
    """Records batches like MemoryTransport, but as if a broker queue took them."""

    queue = "q"

    def consumers(self) -> list[str]:
        return []


def _open_run(tmp_path: Path) -> tuple[Store, RunInfo, QueuedTransport]:
    plan = pipeline.prepare(
        run_spec(
            instances=str(EXAMPLES / "instances.jsonl"),
            responses=[f"model_a={EXAMPLES / 'model_a.jsonl'}"],
            judges=["memory/j"],
            run_name="w",
        )
    )
    store = Store(f"sqlite:///{tmp_path / 'w.db'}")
    sent = QueuedTransport()
    started = pipeline.start(plan, store, sent, settings_mod.load())
    return store, started.run, sent


@pytest.mark.timeout(90)
def test_an_in_process_run_is_seen_done_when_it_is_not_at_the_next_look(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between two looks at the ledger, `run` waits on the judging thread: the run ends
    when its last judgment is written, however long the pause between looks (600 s here:
    without this, the test runs into its 90 s timeout)."""
    from tests import helpers

    monkeypatch.setattr(helpers, "POLL_SECONDS", 600.0)
    env = cli_env(sqlite_url)
    with running_simulator(SimConfig(seed=5)) as sim:
        flask_eval(*run_args(sim.openai_base_url, sim.anthropic_base_url, run="soon"), env=env)
    st = json.loads(flask_eval("status", "soon", "--json", env=env).stdout)
    assert st["done"] == st["total"] > 0


def test_waiting_stops_on_its_timeout_and_says_how_to_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wait_loop, "POLL_SECONDS", 0.01)
    store, run, sent = _open_run(tmp_path)
    told: list[str] = []
    with pytest.raises(StoppedWaiting) as stopped:
        pipeline.wait(store, run, sent, progress=False, timeout=0.2, say=told.append)
    lines = stopped.value.lines()
    assert lines[0] == "stopped waiting for run w (--timeout 0.2 s): 81 of 81 judgments still open"
    assert lines[1] == (
        "  no worker is alive on queue q: they stay queued until one starts (`flask-eval "
        "worker`); nothing is lost"
    )
    assert [line.split()[:2] for line in lines[2:]] == [
        ["wait", "again:"],
        ["progress:", "flask-eval"],
        ["cancel:", "flask-eval"],
    ]
    assert "flask-eval wait w" in lines[2] and "flask-eval runs delete w" in lines[4]
    assert stopped.value.exit_code == 1
    store.beat("worker-1", "q", datetime.now(UTC))
    with pytest.raises(StoppedWaiting) as again:
        pipeline.wait(store, run, sent, progress=False, timeout=0.1, say=told.append)
    assert again.value.lines()[1].startswith("  1 worker(s) keep judging them: nothing judged")


def test_ctrl_c_while_workers_judge_stops_waiting_not_judging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, run, sent = _open_run(tmp_path)

    def interrupt(_seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", interrupt)
    with pytest.raises(StoppedWaiting) as stopped:
        pipeline.wait(store, run, sent, progress=False)
    assert stopped.value.why == "Ctrl-C" and stopped.value.open == 81
    sent.queue = None  # in-process: the interrupt is the executor's business (not ours)
    with pytest.raises(KeyboardInterrupt):
        pipeline.wait(store, run, sent, progress=False)


def test_before_the_first_judgment_the_bar_says_what_it_waits_for(tmp_path: Path) -> None:
    store, _, sent = _open_run(tmp_path)
    first = FirstStep(store, sent, within=30.0)
    assert first.text() == "waiting for a worker to take queue q"
    store.beat("worker-1", "q", datetime.now(UTC))
    first._looked = float("-inf")  # look again now, not in LOOK_EVERY seconds
    assert first.text() == "waiting for the first answers (1 worker(s) on queue q)"
    sent.queue = None
    assert first.text() == "waiting for the judges' first answers"
