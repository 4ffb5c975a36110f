"""`--max-cost` that affords part of a run keeps the evaluation balanced: every model
and judge gets the same instances, and the last line says how to go on with a budget."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval

INPUTS = [
    "--instances",
    str(EXAMPLES / "instances.jsonl"),
    "--responses",
    f"model_a={EXAMPLES / 'model_a.jsonl'}",
    "--responses",
    f"model_b={EXAMPLES / 'model_b.jsonl'}",
]


def judged(env: dict[str, str]) -> dict[tuple[str, str], set[str]]:
    """(model, judge) -> the instances with a done judgment."""
    out = flask_eval("export", "capped", "--format", "jsonl", env=env).stdout
    cells: dict[tuple[str, str], set[str]] = defaultdict(set)
    for line in out.splitlines():
        row = json.loads(line)
        if row["status"] == "done":
            cells[(row["model"], row["judge"])].add(str(row["instance_id"]))
    return cells


def test_a_budget_for_half_the_run_judges_the_same_instances_of_every_model(
    tmp_path: Path,
) -> None:
    with running_simulator(SimConfig(seed=2)) as sim:
        judges = tmp_path / "judges.yaml"
        judges.write_text(
            "".join(
                f"- spec: openai/sim-{n}@{sim.openai_base_url}\n  name: {n}\n"
                "  price: {input: 2.0, output: 8.0}\n"
                for n in ("j1", "j2")
            )
        )
        env = cli_env(f"sqlite:///{tmp_path / 'c.db'}")
        dry = flask_eval("run", *INPUTS, "--judges", str(judges), "--dry-run", env=env).stdout
        total = float(next(x for x in dry.splitlines() if x.startswith("total")).split()[7])
        capped = flask_eval(
            "run",
            *INPUTS,
            "--judges",
            str(judges),
            "--run",
            "capped",
            "--max-cost",
            f"{total / 2:.6f}",
            "--quiet",
            env=env,
            check=False,
        )
    assert capped.returncode == 1
    cells = judged(env)
    a = cells[("model_a", "j1")]
    assert set(cells) == {(m, j) for m in ("model_a", "model_b") for j in ("j1", "j2")}
    assert 8 <= len(a) <= 19  # about half of model_a's 27 instances
    both = {i for i in a if i in cells[("model_b", "j1")] or i in cells[("model_b", "j2")]}
    for (model, _judge), instances in cells.items():
        # the same instances for every model and judge, but the last one the budget cut
        # (model_b lacks two of model_a's instances)
        assert len(instances ^ (a if model == "model_a" else both)) <= 1, (model, instances)
    last = capped.stderr.strip().splitlines()[-1]
    assert "flask-eval resume capped --max-cost" in last, last
