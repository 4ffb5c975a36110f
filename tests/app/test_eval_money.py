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
    args = [
        "eval",
        "--instances",
        str(EXAMPLES / "instances.jsonl"),
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
    found = re.search(
        r"(\d+) calls dispatched \((\d+) answered from the answer cache\)", last.stderr
    )
    assert found is not None, last.stderr
    dispatched, cached = int(found[1]), int(found[2])
    assert cached > 0 and cached == dispatched - served
    assert cached == 2 * (dispatched // 3)  # two models of three: their calls all cached


def test_eval_dry_run_estimates_every_step_and_writes_nothing(tmp_path: Path) -> None:
    """Priced models and judge: the generation, the annotation and the judging (on
    stand-in responses) are estimated; no database, no output directory, nothing sent
    (no simulator runs: a call would fail)."""
    models = tmp_path / "models.yaml"
    models.write_text(
        "".join(
            f"- name: {m}\n  spec: openai/{m}\n  max_tokens: 800\n  price: "
            "{input: 1, output: 4}\n"
            for m in ("m1", "m2")
        )
    )
    env = cli_env(f"sqlite:///{tmp_path / 'e.db'}", OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    out = tmp_path / "out"
    dry = flask_eval(
        "eval",
        "--instances",
        str(EXAMPLES / "instances.jsonl"),
        "--models",
        str(models),
        "--judge",
        "openai/gpt-5.4-mini",
        "--out",
        str(out),
        "--dry-run",
        env=env,
    ).stdout
    assert not (tmp_path / "e.db").exists() and not out.exists()
    sections = [x.split(" ")[0].rstrip(":") for x in dry.splitlines() if x.endswith(":")]
    assert sections == ["generate", "annotate", "judge"]
    judge_rows = [
        x.split()
        for x in dry.split("judge (on stand-in")[1].splitlines()
        if x.startswith("openai/gpt-5.4-mini")
    ]
    assert int(judge_rows[0][2]) == 2 * 27  # one call per model and instance
    assert float(judge_rows[0][7]) > 0
    assert "m1: up to " in dry and "(800)" in dry  # the generation's bound at max_tokens
    total = float(re.search(r"every step, live: ~(\d+\.\d+) USD", dry)[1])  # type: ignore[index]
    assert total > float(judge_rows[0][7])
