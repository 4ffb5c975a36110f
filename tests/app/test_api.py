"""The Python API (flask_eval.api): each step of an evaluation as one function returning
plain records, over the command line's use cases and store (a step the command line made
is not paid again)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flask_eval import api
from flask_eval.core.errors import InputError
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from tests.conftest import EXAMPLES
from tests.helpers import _as_a_fresh_process, cli_env, flask_eval

LEVELS = {"weak": 1.5, "strong": 4.5}


def test_each_step_returns_records_and_shares_the_command_lines_runs(
    tmp_path: Path, sqlite_url: str
) -> None:
    instances = str(EXAMPLES / "instances.jsonl")
    n = len((EXAMPLES / "instances.jsonl").read_text().splitlines())
    with running_simulator(SimConfig(generators=LEVELS, generation_tokens=40)) as sim:
        env = cli_env(sqlite_url, OPENAI_BASE_URL=sim.openai_base_url)
        with _as_a_fresh_process(env):
            responses = api.generate(instances, models=["weak=openai/weak", "strong=openai/strong"])
            asked = sim.stats()["requests"]
            labels = api.annotate(instances, annotators=["openai/a"], relabel=True, limit=4)
            out = tmp_path / "r"
            out.mkdir()
            for model in LEVELS:
                texts = [r for r in responses if r["model"] == model]
                (out / f"{model}.jsonl").write_text(
                    "".join(
                        json.dumps({"question_id": r["instance_id"], "text": r["text"]}) + "\n"
                        for r in texts
                    )
                )
            rows = api.judge(
                instances,
                {m: str(out / f"{m}.jsonl") for m in LEVELS},
                judges=["openai/judge"],
                run_name="api-judged",
            )
            with pytest.raises(InputError, match="no model given"):
                api.generate(instances)
        # the same generation from the command line: answered by the API's answers
        flask_eval(
            "generate",
            "--instances",
            instances,
            "--model",
            "weak=openai/weak",
            "--model",
            "strong=openai/strong",
            "--out",
            str(tmp_path / "cli"),
            "--quiet",
            env=env,
        )
        assert sim.stats()["requests"] == asked + 4 + n * 2  # annotate + judge calls only
    assert len(responses) == 2 * n and {r["model"] for r in responses} == set(LEVELS)
    assert all(r["text"] and not r["cut_off"] and r["completion_tokens"] > 0 for r in responses)
    assert len(labels) == 4 and all(len(x["skills"]) == 3 and x["difficulty"] for x in labels)
    overall = {r["model"]: r["mean"] for r in rows if r["dimension"] == "overall"}
    assert overall["weak"] < overall["strong"]


#: options of a command the API leaves out, and why: it prints nothing (``--quiet``),
#: returns records instead of writing files (``--out``; ``--compare`` prints a table) and
#: always waits for its work (``--no-wait``); `run --spec` is the API's ``spec``
CLI_ONLY = {"quiet", "out_dir", "out_path", "compare_path", "no_wait", "spec_file", "print_spec"}
#: the API's names for options whose flag says "not"
RENAMED = {"no_reference": "reference", "no_swap": "swap"}


@pytest.mark.parametrize(
    ("command", "function"),
    [("run", "judge"), ("generate", "generate"), ("annotate", "annotate"), ("eval", "evaluate")],
)
def test_the_api_offers_what_the_command_line_offers(command: str, function: str) -> None:
    import dataclasses
    import inspect

    import click

    from flask_eval.cli import main
    from flask_eval.core.spec import FLAT

    cli = main.get_command(click.Context(main), command)
    assert cli is not None
    offered = set(inspect.signature(getattr(api, function)).parameters)
    if function == "judge":  # the run's spec, or its flat names
        offered |= set(FLAT) | {"retry_failed", "in_flight"}
    else:
        offered |= {f.name for f in dataclasses.fields(api.OPTIONS[function])}
    missing = (
        {RENAMED.get(p.name, p.name) for p in cli.params if p.name and p.name not in CLI_ONLY}
        - offered
        - ({"out_dir"} if function == "evaluate" else set())
    )
    assert not missing, f"api.{function} lacks {sorted(missing)} of `flask-eval {command}`"


def test_judge_takes_limit_sample_and_dry_run(tmp_path: Path, sqlite_url: str) -> None:
    """``limit`` and ``sample`` select instances as on the command line; ``dry_run``
    estimates the calls and writes nothing."""
    instances = str(EXAMPLES / "instances.jsonl")
    responses = {"model_a": str(EXAMPLES / "model_a.jsonl")}
    with running_simulator(SimConfig()) as sim:
        env = cli_env(sqlite_url, OPENAI_BASE_URL=sim.openai_base_url)
        with _as_a_fresh_process(env):
            estimate = api.judge(instances, responses, judges=["openai/j"], limit=3, dry_run=True)
            assert sim.stats()["requests"] == 0
            limited = api.judge(
                instances, responses, judges=["openai/j"], limit=3, run_name="api-limit"
            )
            sampled = api.judge(
                instances, responses, judges=["openai/j"], sample=2, seed=5, run_name="api-sample"
            )
            assert sim.stats()["requests"] == 3 + 2
            with pytest.raises(InputError, match="exclusive"):
                api.judge(instances, responses, judges=["openai/j"], limit=2, sample=2)
    assert [(e["judge"], e["calls"]) for e in estimate] == [("openai/j", 3)]
    assert all(r["model"] == "model_a" for r in limited + sampled)
    for run, n in (("api-limit", 3), ("api-sample", 2)):
        exported = flask_eval("export", run, env=env).stdout.splitlines()
        ids = {json.loads(x)["instance_id"] for x in exported}
        assert len(ids) == n and (run != "api-limit" or ids == {"1", "2", "3"})


def test_evaluate_dry_run_estimates_each_step_and_writes_nothing(tmp_path: Path) -> None:
    """``evaluate(dry_run=True)`` gives each step's estimates (as ``eval --dry-run``
    prints them) and creates no database, no output folder, sends nothing."""
    models = tmp_path / "models.yaml"
    models.write_text("- name: m1\n  spec: openai/m1\n  price: {input: 1, output: 4}\n")
    db = tmp_path / "e.db"
    env = cli_env(f"sqlite:///{db}", OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    with _as_a_fresh_process(env):
        got = api.evaluate(
            str(EXAMPLES / "instances.jsonl"),
            models_files=[str(models)],
            judges=["openai/j"],
            out_dir=str(tmp_path / "out"),
            dry_run=True,
        )
    steps = list(got["estimates"])
    assert (
        steps[0] == "generate"
        and steps[-1] == "judge"
        and set(steps) <= {"generate", "annotate", "judge"}
    )
    (generate,) = got["estimates"]["generate"]
    assert generate["judge"] == "m1" and generate["calls"] == 27 and generate["cost"] > 0
    (judge,) = got["estimates"]["judge"]
    assert judge["calls"] == 27  # one per (model, instance) in instance mode
    assert not db.exists() and not (tmp_path / "out").exists()
