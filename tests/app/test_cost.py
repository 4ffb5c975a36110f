"""Judges files, cost per call, --dry-run, --max-cost and the judgment cache, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from flask_eval.cli import main
from flask_eval.core.errors import InputError
from flask_eval.producer.judges_file import load_judges_file
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.workers.judge import spec_of
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
CALLS = (27 + 25) * 2  # instance mode: one call per (model, instance), 2 judges


def judges_file(tmp_path: Path, openai_url: str, anthropic_url: str) -> Path:
    path = tmp_path / "judges.yaml"
    path.write_text(
        f"""- spec: openai/sim-gpt@{openai_url}
  name: gpt
  rpm: 6000
  price: {{input: 2.5, output: 10}}
- spec: anthropic/sim-claude@{anthropic_url}
  name: claude
  max_in_flight: 4
  price: {{input: 3, output: 15}}
"""
    )
    return path


def test_judges_file_names_prices_and_recorded_cost(sqlite_url: str, tmp_path: Path) -> None:
    env = cli_env(sqlite_url)
    with running_simulator(SimConfig(seed=1)) as sim:
        path = judges_file(tmp_path, sim.openai_base_url, sim.anthropic_base_url)
        flask_eval("run", *INPUTS, "--judges", str(path), "--run", "priced", "--quiet", env=env)
        stats = sim.stats()
    st = json.loads(flask_eval("status", "priced", "--json", env=env).stdout)
    assert st["done"] == st["total"] and st["calls"] == CALLS
    assert (
        st["prompt_tokens"] == stats["prompt_tokens"]
        and st["completion_tokens"] == stats["completion_tokens"]
    )
    report = json.loads(flask_eval("report", "priced", "--format", "json", env=env).stdout)["rows"]
    assert {r["judge"] for r in report} == {"gpt", "claude"}
    # cost = tokens x price, summed over calls (both judges see the same prompts, so
    # bound it between the cheaper and the dearer price)
    low = (stats["prompt_tokens"] * 2.5 + stats["completion_tokens"] * 10) / 1e6
    high = (stats["prompt_tokens"] * 3 + stats["completion_tokens"] * 15) / 1e6
    assert low < st["cost"] < high


def test_dry_run_spends_nothing_and_estimates_per_judge(
    sqlite_url: str, tmp_path: Path, redis_url: str
) -> None:
    import redis

    env = cli_env(sqlite_url, redis_url)
    with running_simulator(SimConfig(seed=1)) as sim:
        path = judges_file(tmp_path, sim.openai_base_url, sim.anthropic_base_url)
        out = flask_eval("run", *INPUTS, "--judges", str(path), "--dry-run", env=env).stdout
        assert sim.stats()["requests"] == 0
    assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()
    assert redis.Redis.from_url(redis_url).dbsize() == 0
    lines = {line.split()[0]: line.split() for line in out.splitlines() if line.split()}
    assert lines["gpt"][1:3] == [str((27 + 25) * 3), str(CALLS // 2)]  # jobs, calls
    assert float(lines["claude"][-1]) > float(lines["gpt"][-1]) > 0
    assert lines["total"][2] == str(CALLS)


@pytest.mark.e2e
def test_max_cost_stops_enqueueing_and_says_so(sqlite_url: str, tmp_path: Path) -> None:
    env = cli_env(sqlite_url)
    with running_simulator(SimConfig(seed=1)) as sim:
        path = judges_file(tmp_path, sim.openai_base_url, sim.anthropic_base_url)
        dry = flask_eval("run", *INPUTS, "--judges", str(path), "--dry-run", env=env).stdout
        total = float(
            next(line for line in dry.splitlines() if line.startswith("total")).split()[-1]
        )
        budget = f"{total / 2:.6f}"
        proc = flask_eval(
            "run",
            *INPUTS,
            "--judges",
            str(path),
            "--run",
            "capped",
            "--max-cost",
            budget,
            "--quiet",
            env=env,
            check=False,
        )
        paid = sim.stats()["requests"]
        assert proc.returncode == 1  # judgments stay pending: not a success
        assert "stopped dispatching" in proc.stderr and "held back by --max-cost" in proc.stderr
        assert 0 < paid < CALLS
        st = json.loads(flask_eval("status", "capped", "--json", env=env).stdout)
        assert st["pending"] > 0 and st["cost"] <= float(budget) * 1.5
        # the budget belongs to the run: a later run and a resume without one honour it
        # (they may send what the metered cost left room for, never past the budget)
        again = ("run", *INPUTS, "--judges", str(path), "--run", "capped", "--quiet")
        assert flask_eval(*again, env=env, check=False).returncode == 1
        assert flask_eval("resume", "capped", "--quiet", env=env, check=False).returncode == 1
        st = json.loads(flask_eval("status", "capped", "--json", env=env).stdout)
        assert st["pending"] > 0 and st["cost"] <= float(budget) * 1.5
        assert sim.stats()["requests"] < CALLS
        # a higher budget continues where it stopped
        flask_eval("resume", "capped", "--max-cost", str(total * 2), "--quiet", env=env)
        assert sim.stats()["requests"] == CALLS
    assert json.loads(flask_eval("status", "capped", "--json", env=env).stdout)["pending"] == 0


@pytest.mark.e2e
def test_cache_serves_a_second_run_and_a_rerun_makes_no_call(sqlite_url: str) -> None:
    env = cli_env(sqlite_url)
    with running_simulator(SimConfig(seed=1)) as sim:
        judges = [
            "--judge",
            f"openai/sim-gpt@{sim.openai_base_url}",
            "--judge",
            f"anthropic/sim-claude@{sim.anthropic_base_url}",
        ]
        flask_eval("run", *INPUTS, *judges, "--run", "first", "--quiet", env=env)
        paid = sim.stats()["requests"]
        assert paid == CALLS
        flask_eval("run", *INPUTS, *judges, "--run", "first", "--quiet", env=env)  # re-run
        flask_eval(
            "run", *INPUTS, *judges, "--run", "second", "--quiet", env=env
        )  # new run, same prompts
        assert sim.stats()["requests"] == paid
    first = json.loads(flask_eval("report", "first", "--format", "json", env=env).stdout)["rows"]
    second = json.loads(flask_eval("report", "second", "--format", "json", env=env).stdout)["rows"]
    assert first == second


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("- spec: openai/x\n  rpm: -5\n", 2, "`rpm` must be a positive number"),
        ("- spec: openai/x\n- spec: cohere/y\n", 2, "unknown judge provider"),
        ("- spec: openai/x\n  colour: red\n", 2, "unknown key 'colour'"),
        ("- name: only-a-name\n", 1, "missing `spec`"),
        ("- spec: openai/x\n  name: a\n- spec: openai/y\n  name: a\n", 3, "used twice"),
        ("- spec: openai/x\n  price: {input: -1}\n", 2, "price.input"),
        ("- spec: openai/x\n  max_in_flight: 0\n", 2, "max_in_flight"),
        ("spec: openai/x\n", 1, "expected a non-empty YAML list"),
        ("- spec: [unclosed\n", 2, "invalid YAML"),
    ],
)
def test_bad_judges_files_name_file_and_line(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    path = tmp_path / "judges.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_judges_file(str(path), spec_of)
    assert str(err.value).startswith(f"{path}:{line}: ")
    assert message in str(err.value)


def test_bad_judges_file_through_the_cli_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "judges.yaml"
    path.write_text("- spec: openai/x\n  tpm: lots\n")
    db = tmp_path / "x.db"
    result = CliRunner().invoke(
        main,
        ["run", *INPUTS, "--judges", str(path)],
        env={"FLASK_EVAL_DATABASE_URL": f"sqlite:///{db}"},
    )
    assert result.exit_code == 2 and f"{path}:2: `tpm` must be a positive number" in result.stderr
    assert not db.exists()
