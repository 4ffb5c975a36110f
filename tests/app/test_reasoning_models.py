"""OpenAI's reasoning models, end to end against a simulator that refuses what the real API
refuses them (``max_tokens``, a temperature): the judge asks with
``max_completion_tokens`` and no temperature, and a budget its thinking uses up is a
truncated answer whose thinking is paid for."""

from __future__ import annotations

import json
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
    "--limit",
    "4",
]


def test_current_openai_reasoning_models_judge_a_whole_run(sqlite_url: str) -> None:
    with running_simulator(SimConfig(seed=3)) as sim:
        env = cli_env(sqlite_url, OPENAI_BASE_URL=sim.openai_base_url)
        flask_eval(
            "run",
            *INPUTS,
            "--judge",
            "openai/gpt-5.4-mini",
            "--judge",
            "openai/gpt-5.5",
            "--run",
            "reasoning",
            "--quiet",
            env=env,
        )
        stats = sim.stats()
    st = json.loads(flask_eval("status", "reasoning", "--json", env=env).stdout)
    assert st["total"] > 0 and st["done"] == st["total"], st
    assert stats["requests"] == stats["served"] == st["calls"]  # not one refused
    # the report says how they were asked: the model's own budget and temperature
    report = flask_eval("report", "reasoning", env=env).stdout
    assert (
        "openai/gpt-5.5: openai/gpt-5.5, max_tokens 8192, temperature provider default"
    ) in report


def test_a_budget_the_thinking_uses_up_is_truncated_and_its_thinking_is_paid(
    sqlite_url: str, tmp_path: Path
) -> None:
    judges = tmp_path / "judges.yaml"
    judges.write_text("- spec: openai/gpt-5.4-mini\n  name: mini\n  max_tokens: 40\n")
    with running_simulator(SimConfig(seed=3)) as sim:
        env = cli_env(sqlite_url, OPENAI_BASE_URL=sim.openai_base_url)
        flask_eval(
            "run",
            *INPUTS,
            "--judges",
            str(judges),
            "--run",
            "thin",
            "--quiet",
            env=env,
            check=False,
        )
        stats = sim.stats()
    st = json.loads(flask_eval("status", "thin", "--json", env=env).stdout)
    assert st["done"] == 0 and st["failed"] == st["total"] > 0, st
    assert set(st["failed_by_reason"]) == {"truncated"}, st
    # every call spent its whole budget thinking, and the ledger counts (and prices) it
    assert stats["completion_tokens"] == 40 * stats["served"]
    assert st["completion_tokens"] == stats["completion_tokens"] and st["cost"] > 0


def test_the_estimate_says_a_reasoning_models_thinking_is_not_counted(sqlite_url: str) -> None:
    judges = ["--judge", "openai/gpt-5.4-mini", "--judge", "anthropic/claude-sonnet-4-5"]
    out = flask_eval("run", *INPUTS, *judges, "--dry-run", env=cli_env(sqlite_url)).stdout
    assert (
        "openai/gpt-5.4-mini: a reasoning model also thinks before it answers, billed as "
        "completion tokens (answer and thinking up to 8,192 a call)"
    ) in out
    assert "claude-sonnet-4-5: a reasoning model" not in out
