"""`eval`'s money and cache figures: the calls the answer cache answered as the ledger has
them (with or without prices), and `eval --dry-run`'s estimate of the whole evaluation."""

from __future__ import annotations

import re
from pathlib import Path

from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval

LEVELS = {"m1": 2.0, "m2": 3.0, "m3": 4.0}


def eval_args(out: Path, models: list[str]) -> list[str]:
    args = ["eval", "--instances", str(EXAMPLES / "instances.jsonl"), "--judge",
            "judge=openai/judge", "--name", "e", "--out", str(out), "--quiet"]  # fmt: skip
    for m in models:
        args += ["--model", f"{m}=openai/{m}"]
    return args


def test_a_model_more_counts_the_answers_the_cache_gave(tmp_path: Path) -> None:
    """Unpriced models and judge (nothing estimated at dispatch): a 3rd model's eval says
    how many of its calls the answer cache answered, and they are exactly those that did
    not reach the provider."""
    with running_simulator(SimConfig(seed=3, generators=LEVELS, generation_tokens=40)) as sim:
        env = cli_env(f"sqlite:///{tmp_path / 'e.db'}", OPENAI_BASE_URL=sim.openai_base_url)
        flask_eval(*eval_args(tmp_path / "out", ["m1", "m2"]), env=env)
        before = sim.stats()["requests"]
        last = flask_eval(*eval_args(tmp_path / "out", ["m1", "m2", "m3"]), env=env)
        served = sim.stats()["requests"] - before
    found = re.search(r"(\d+) calls dispatched \((\d+) answered from the answer cache\)",
                      last.stderr)  # fmt: skip
    assert found is not None, last.stderr
    dispatched, cached = int(found[1]), int(found[2])
    assert cached > 0 and cached == dispatched - served
    assert cached == 2 * (dispatched // 3)  # two models of three: their calls all cached
