"""`eval --max-cost` bounds the whole evaluation, not each of its steps."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import select

from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage.models import RUN
from flask_eval.storage.store import Store
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval


def spent(env: dict[str, str]) -> dict[str, float]:
    """Step (generate, judge) -> what its run paid."""
    store = Store(env["FLASK_EVAL_DATABASE_URL"])
    try:
        with store.engine.connect() as conn:
            names = list(conn.execute(select(RUN.c.name)).scalars())
    finally:
        store.close()
    return {
        name.split("-")[1]: json.loads(flask_eval("status", name, "--json", env=env).stdout)["cost"]
        for name in names
    }


def test_max_cost_is_shared_by_the_steps(tmp_path: Path) -> None:
    models = tmp_path / "models.yaml"
    models.write_text(
        "".join(
            f"- name: {m}\n  spec: openai/{m}\n  price: {{input: 100, output: 100}}\n"
            for m in ("weak", "strong")
        )
    )
    judges = tmp_path / "judges.yaml"
    judges.write_text("- spec: openai/judge\n  price: {input: 100, output: 100}\n")
    args = [
        "eval",
        "--instances",
        str(EXAMPLES / "instances.jsonl"),
        "--models",
        str(models),
        "--judges",
        str(judges),
        "--quiet",
    ]
    with running_simulator(SimConfig(generators={"weak": 2.0, "strong": 4.0})) as sim:
        free = cli_env(f"sqlite:///{tmp_path / 'free.db'}", OPENAI_BASE_URL=sim.openai_base_url)
        flask_eval(*args, "--out", str(tmp_path / "free"), env=free)
        costs = spent(free)
        budget = costs["generate"] + costs["judge"] / 2  # the generation and half the judging
        env = cli_env(f"sqlite:///{tmp_path / 'bounded.db'}", OPENAI_BASE_URL=sim.openai_base_url)
        result = flask_eval(
            *args, "--out", str(tmp_path / "b"), "--max-cost", f"{budget:.6f}", env=env, check=False
        )
        bounded = spent(env)
    assert result.returncode == 1 and "pending" in result.stderr, result.stderr
    assert bounded["generate"] == costs["generate"]
    assert 0 < bounded["judge"] < costs["judge"]
    assert sum(bounded.values()) <= budget
    # the report of what was judged within the budget is written, and says it is partial
    judge = json.loads(flask_eval("status", judge_run(env), "--json", env=env).stdout)
    assert judge["pending"] > 0 and str(tmp_path / "b" / "report.txt") in result.stderr
    report = " ".join((tmp_path / "b" / "report.txt").read_text().split())
    assert f"IN PROGRESS: {judge['pending']:,} of {judge['total']:,} judgments pending" in report


def judge_run(env: dict[str, str]) -> str:
    """The name of the evaluation's judging run."""
    store = Store(env["FLASK_EVAL_DATABASE_URL"])
    try:
        with store.engine.connect() as conn:
            names = list(conn.execute(select(RUN.c.name)).scalars())
    finally:
        store.close()
    (name,) = [n for n in names if n.split("-")[1] == "judge"]
    return name
