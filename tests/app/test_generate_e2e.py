"""`flask-eval generate` end to end in-process: simulated models under test behind the
real OpenAI SDK, the executor and the SQLite ledger; the responses judged by `run` rank
the models as the simulator was configured; a cut-off response is kept and marked; a
second generation pays for nothing."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval

LEVELS = {"weak": 1.5, "middling": 3.0, "strong": 4.5}


def models_file(tmp_path: Path, short: str | None = None) -> Path:
    """The three simulated models; ``short`` gets a 20-token limit."""
    lines = []
    for name in LEVELS:
        lines += [f"- name: {name}", f"  spec: openai/{name}", "  price: {input: 1, output: 2}"]
        if name == short:
            lines.append("  max_tokens: 20")
    path = tmp_path / "models.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_generated_responses_are_judged_in_the_configured_order(
    tmp_path: Path, sqlite_url: str
) -> None:
    instances = str(EXAMPLES / "instances.jsonl")
    with running_simulator(SimConfig(generators=LEVELS, generation_tokens=80)) as sim:
        env = cli_env(sqlite_url, OPENAI_BASE_URL=sim.openai_base_url)
        out = tmp_path / "responses"
        models = str(models_file(tmp_path))
        first = flask_eval(
            "generate",
            "--instances",
            instances,
            "--models",
            models,
            "--out",
            str(out),
            "--run",
            "gen",
            "--quiet",
            env=env,
        )
        asked = sim.stats()["requests"]
        n_instances = len(read_jsonl(EXAMPLES / "instances.jsonl"))
        assert asked == 3 * n_instances
        for name in LEVELS:
            records = read_jsonl(out / f"{name}.jsonl")
            assert (
                len(records) == n_instances and f"{name}: {n_instances} responses" in first.stdout
            )
            assert all(r["text"] and r["finish"] == "stop" and not r["cut_off"] for r in records)
            assert all(
                r["usage"]["completion_tokens"] > 0 and r["usage"]["cost"] > 0 for r in records
            )
            assert records[0]["sampling"]["spec"] == f"openai/{name}"
        # the same generation again: every response comes from the answer cache
        again = str(tmp_path / "again")
        flask_eval(
            "generate",
            "--instances",
            instances,
            "--models",
            models,
            "--out",
            again,
            "--run",
            "gen2",
            "--quiet",
            env=env,
        )
        assert sim.stats()["requests"] == asked
        assert read_jsonl(tmp_path / "again" / "weak.jsonl") == read_jsonl(out / "weak.jsonl")
        # judged with a simulated judge: the means rank the models as configured
        responses = [f"{name}={out / name}.jsonl" for name in LEVELS]
        args = ["--responses", *responses[:1]]
        for r in responses[1:]:
            args += ["--responses", r]
        flask_eval(
            "run",
            "--instances",
            instances,
            *args,
            "--judge",
            "openai/judge",
            "--run",
            "judged",
            "--quiet",
            env=env,
        )
        rows = json.loads(
            flask_eval("report", "judged", "--format", "json", "--bootstrap", "0", env=env).stdout
        )["rows"]
    overall = {r["model"]: r["mean"] for r in rows if r["dimension"] == "overall"}
    assert overall["weak"] < overall["middling"] < overall["strong"], overall


def test_a_response_cut_off_by_its_limit_is_kept_and_marked(
    tmp_path: Path, sqlite_url: str
) -> None:
    instances = str(EXAMPLES / "instances.jsonl")
    with running_simulator(SimConfig(generators=LEVELS, generation_tokens=80)) as sim:
        env = cli_env(sqlite_url, OPENAI_BASE_URL=sim.openai_base_url)
        out = tmp_path / "responses"
        result = flask_eval(
            "generate",
            "--instances",
            instances,
            "--models",
            str(models_file(tmp_path, short="weak")),
            "--out",
            str(out),
            "--limit",
            "5",
            "--quiet",
            env=env,
        )
    short = read_jsonl(out / "weak.jsonl")
    assert len(short) == 5 and all(r["cut_off"] and r["finish"] == "length" for r in short)
    assert all(r["text"] and r["usage"]["completion_tokens"] == 20 for r in short)
    assert "weak: 5 responses (5 cut off by the token limit)" in result.stdout
    whole = read_jsonl(out / "strong.jsonl")
    assert not any(r["cut_off"] for r in whole)


def test_a_generation_run_has_no_report(tmp_path: Path, sqlite_url: str) -> None:
    with running_simulator(SimConfig(generators=LEVELS)) as sim:
        env = cli_env(sqlite_url, OPENAI_BASE_URL=sim.openai_base_url)
        flask_eval(
            "generate",
            "--instances",
            str(EXAMPLES / "instances.jsonl"),
            "--model",
            "weak=openai/weak",
            "--out",
            str(tmp_path / "o"),
            "--run",
            "g",
            "--limit",
            "2",
            "--quiet",
            env=env,
        )
        result = flask_eval("report", "g", env=env, check=False)
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "run g is a generation run: it has no scores to report; `generate --run` writes "
            "what it produced"
        )
    )


def test_batch_generation_goes_through_the_providers_batch_api(
    tmp_path: Path, sqlite_url: str
) -> None:
    """A model under test with `batch: true`: its calls are parked, submitted in one of the
    simulator's OpenAI batches, collected, and its responses equal a live generation's,
    at the batch price."""
    instances = str(EXAMPLES / "instances.jsonl")
    with running_simulator(SimConfig(generators=LEVELS, generation_tokens=40)) as sim:
        env = cli_env(
            sqlite_url, OPENAI_BASE_URL=sim.openai_base_url, FLASK_EVAL_BATCH_POLL_SECONDS="0.2"
        )
        # the live generation in a store of its own: no answer cache between the two
        other = cli_env(f"sqlite:///{tmp_path / 'live.db'}", OPENAI_BASE_URL=sim.openai_base_url)
        live, batch = tmp_path / "live.yaml", tmp_path / "batch.yaml"
        entry = (
            "- name: strong\n  spec: openai/strong\n  price: {input: 1, output: 2, batch: 0.5}\n"
        )
        live.write_text(entry)
        batch.write_text(entry + "  temperature: 0.0\n  batch: true\n  batch_max_wait: 0.2\n")
        flask_eval(
            "generate",
            "--instances",
            instances,
            "--models",
            str(batch),
            "--out",
            str(tmp_path / "b"),
            "--run",
            "b",
            "--quiet",
            env=env,
        )
        with urllib.request.urlopen(f"{sim.base_url}/batches/submitted", timeout=10) as resp:
            submitted = json.loads(resp.read())["openai"]["submitted"]
        flask_eval(
            "generate",
            "--instances",
            instances,
            "--models",
            str(live),
            "--out",
            str(tmp_path / "l"),
            "--run",
            "l",
            "--quiet",
            env=other,
        )
    n = len(read_jsonl(EXAMPLES / "instances.jsonl"))
    assert len(submitted) == n and set(submitted.values()) == {1}
    batched = read_jsonl(tmp_path / "b" / "strong.jsonl")
    plain = read_jsonl(tmp_path / "l" / "strong.jsonl")
    assert [r["text"] for r in batched] == [r["text"] for r in plain]
    for b, p in zip(batched, plain, strict=True):
        assert b["usage"]["cost"] == pytest.approx(p["usage"]["cost"] / 2)


@pytest.mark.parametrize(
    ("files", "args", "message"),
    [
        ({}, ["--model", "nosuch/model"], "provider 'nosuch' in 'nosuch/model'"),
        (
            {"models.yaml": "- name: a\n  spec: openai/x\n- name: A\n  spec: openai/y\n"},
            ["--models", "{models.yaml}"],
            "models.yaml:3: model name 'A' is used twice (first on line 1)",
        ),
    ],
)
def test_bad_models_are_one_line_exit_2_and_nothing_written(
    tmp_path: Path, files: dict[str, str], args: list[str], message: str
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    db = tmp_path / "never.db"
    env = cli_env(f"sqlite:///{db}")
    filled = [str(tmp_path / a[1:-1]) if a.startswith("{") else a for a in args]
    result = flask_eval(
        "generate",
        "--instances",
        str(EXAMPLES / "instances.jsonl"),
        *filled,
        "--out",
        str(tmp_path / "out"),
        env=env,
        check=False,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and message in lines[0], result.stderr
    assert not db.exists() and not (tmp_path / "out").exists()


def test_biggen_responses_are_written_in_biggens_own_format_and_judged_on_its_rubrics(
    tmp_path: Path, sqlite_url: str
) -> None:
    """Generated answers to BiGGen Bench instances (their system prompts sent) land as
    BiGGen's responses file too, which `run --biggen` judges on each instance's rubric."""
    from tests.app.test_protocols_e2e import BIGGEN, need

    source = need(BIGGEN)
    with running_simulator(SimConfig(generators=LEVELS, generation_tokens=40)) as sim:
        env = cli_env(sqlite_url, OPENAI_BASE_URL=sim.openai_base_url)
        out = tmp_path / "o"
        flask_eval(
            "generate",
            "--biggen",
            str(source),
            "--model",
            "strong=openai/strong",
            "--limit",
            "6",
            "--out",
            str(out),
            "--quiet",
            env=env,
        )
        written = json.loads((out / "strong.biggen.json").read_text())
        assert len(written) == 6
        assert all(r["response_model_name"] == "strong" and r["response"] for r in written.values())
        flask_eval(
            "run",
            "--biggen",
            str(out / "strong.biggen.json"),
            "--judge",
            "openai/j",
            "--run",
            "bg",
            "--quiet",
            env=env,
        )
        st = json.loads(flask_eval("status", "bg", "--json", env=env).stdout)
    assert st["done"] == st["total"] == 6
