"""`flask-eval eval` end to end: 300 of FLASK's instances stripped of their metadata, 3
simulated models under test, one simulated judge (and annotator), real Redis and Celery
worker processes, one of them killed with -9 in the middle of the generation.

The report ranks the models as the simulator was configured and equals an uninterrupted
in-process evaluation's; a rerun makes no call; a 4th model makes only its own calls."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select

from flask_eval.core.errors import Status
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage.models import JUDGMENT, RUN
from flask_eval.storage.store import Store
from tests.conftest import REPO
from tests.helpers import cli_env, flask_eval, kill_group, wait_until, workers

INSTANCES = 300
LEVELS = {"m1": 1.5, "m2": 3.0, "m3": 4.5, "m4": 2.5}


def strip_metadata(flask_data: Path, out: Path) -> Path:
    """The first ``INSTANCES`` instances with only their id, instruction and reference."""
    lines = (flask_data / "evaluation_set" / "flask_evaluation.jsonl").read_text().splitlines()
    with out.open("w") as handle:
        for line in lines[:INSTANCES]:
            r = json.loads(line)
            handle.write(json.dumps({k: r[k] for k in ("idx", "instruction", "answer")}) + "\n")
    return out


def done_in(database_url: str, prefix: str) -> int:
    store = Store(database_url)
    try:
        with store.engine.connect() as conn:
            stmt = (
                select(func.count())
                .select_from(JUDGMENT.join(RUN, RUN.c.id == JUDGMENT.c.run_id))
                .where(RUN.c.name.like(f"{prefix}%"), JUDGMENT.c.status == Status.DONE.value)
            )
            return int(conn.execute(stmt).scalar_one())
    finally:
        store.close()


def eval_args(instances: Path, out: Path, models: list[str]) -> list[str]:
    args = [
        "eval",
        "--instances",
        str(instances),
        "--judge",
        "judge=openai/judge",
        "--name",
        "e",
        "--out",
        str(out),
        "--quiet",
    ]
    for m in models:
        args += ["--model", f"{m}=openai/{m}"]
    return args


@pytest.mark.e2e
@pytest.mark.integration
def test_eval_from_instructions_to_report_through_a_kill_9(
    tmp_path: Path, sqlite_url: str, redis_url: str, flask_data: Path
) -> None:
    instances = strip_metadata(flask_data, tmp_path / "bare.jsonl")
    three = ["m1", "m2", "m3"]
    config = SimConfig(seed=5, latency_ms=40, generators=LEVELS, generation_tokens=60)
    with running_simulator(config) as sim:
        fast = {
            "FLASK_EVAL_LEASE_SECONDS": "3",
            "FLASK_EVAL_VISIBILITY_TIMEOUT": "8",
            "OPENAI_BASE_URL": sim.openai_base_url,
        }
        env = cli_env(sqlite_url, redis_url, **fast)
        out = tmp_path / "out"
        producer = subprocess.Popen(
            [sys.executable, "-m", "flask_eval", *eval_args(instances, out, three)],
            env=env,
            cwd=REPO,
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            with workers(env, processes=2, in_flight=16, log=tmp_path / "w1.log") as proc:
                wait_until(
                    lambda: done_in(sqlite_url, "e-generate-"),
                    lambda n: n >= 200,
                    timeout=180,
                    what="the generation to be under way",
                )
                kill_group(proc, signal.SIGKILL)
                proc.wait()
            with workers(env, processes=1, in_flight=32, log=tmp_path / "w2.log"):
                _stdout, stderr = producer.communicate(timeout=600)
        finally:
            if producer.poll() is None:
                kill_group(producer, signal.SIGKILL)
        assert producer.returncode == 0, stderr[-3000:]
        # the same evaluation, uninterrupted, in-process, in another store: the same scores
        # (the cost lines differ: the simulator's prompt cache has seen the prompts)
        calm = cli_env(f"sqlite:///{tmp_path / 'calm.db'}", OPENAI_BASE_URL=sim.openai_base_url)
        flask_eval(*eval_args(instances, tmp_path / "calm", three), env=calm)
        judged = _judge_run(sqlite_url)
        assert _judge_run(str(calm["FLASK_EVAL_DATABASE_URL"])) == judged
        rows = report_rows(env, judged)
        assert rows == report_rows(calm, judged)
        scores = (out / "report.txt").read_text().split("Cost (paid calls")[0]
        assert (tmp_path / "calm" / "report.txt").read_text().split("Cost (paid calls")[0] == scores
        # a rerun: every step's run is found done, no call is made
        asked = sim.stats()["requests"]
        flask_eval(*eval_args(instances, tmp_path / "calm", three), env=calm)
        assert sim.stats()["requests"] == asked
        # a 4th model: only its responses and their judgments are asked for
        flask_eval(*eval_args(instances, tmp_path / "four", [*three, "m4"]), env=calm)
        assert sim.stats()["requests"] - asked == 2 * INSTANCES
    labelled = [json.loads(x) for x in (out / "instances.jsonl").read_text().splitlines()]
    assert len(labelled) == INSTANCES and all(len(x["skill"]) == 3 for x in labelled)
    overall = {r["model"]: r["mean"] for r in rows if r["dimension"] == "overall"}
    assert overall["m1"] < overall["m2"] < overall["m3"], overall


def report_rows(env: dict[str, str], run: str) -> list[dict[str, object]]:
    result = flask_eval("report", run, "--format", "json", "--bootstrap", "0", env=env)
    rows: list[dict[str, object]] = json.loads(result.stdout)["rows"]
    return rows


def _judge_run(database_url: str) -> str:
    store = Store(database_url)
    try:
        with store.engine.connect() as conn:
            names = list(
                conn.execute(select(RUN.c.name).where(RUN.c.name.like("e-judge-%"))).scalars()
            )
    finally:
        store.close()
    assert len(names) == 1, names
    return names[0]
