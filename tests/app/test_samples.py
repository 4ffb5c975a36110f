"""`run --samples K` in-process: the simulator behind the real OpenAI SDK, the executor and
the SQLite ledger. Each judge is asked K times per item (sample k > 1 sent with seed k,
which the simulator mixes into its nudges), the report scores the judge by the mean of
its samples and shows its self-consistency, and the answer cache keys each sample apart:
a rerun pays nothing, and a K=3 run after a single-judgment run pays only samples 2-3."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from typing import Any

from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval

LIMIT = 4
INPUTS = [
    "--instances",
    str(EXAMPLES / "instances.jsonl"),
    "--responses",
    f"model_a={EXAMPLES / 'model_a.jsonl'}",
    "--responses",
    f"model_b={EXAMPLES / 'model_b.jsonl'}",
    "--judge",
    "openai/judge-x",
    "--limit",
    str(LIMIT),
    "--quiet",
]


def _export(env: dict[str, str], run: str) -> list[dict[str, Any]]:
    lines = flask_eval("export", run, env=env).stdout.splitlines()
    return [json.loads(line) for line in lines]


def test_samples_are_paid_once_each_and_merged_in_the_report(sqlite_url: str) -> None:
    env = cli_env(sqlite_url)
    with running_simulator(SimConfig(seed=5)) as sim:
        env["OPENAI_BASE_URL"] = sim.openai_base_url
        flask_eval("run", *INPUTS, "--run", "single", env=env)
        single = sim.stats()["requests"]
        assert single > 0
        # three samples of the same inputs: sample 1 is the single run's answer (same key)
        flask_eval("run", *INPUTS, "--samples", "3", "--run", "three", env=env)
        assert sim.stats()["requests"] == 3 * single
        # again: every sample comes from the answer cache
        flask_eval("run", *INPUTS, "--samples", "3", "--run", "three-again", env=env)
        assert sim.stats()["requests"] == 3 * single

    rows = _export(env, "three")
    assert {r["judge"] for r in rows} == {f"openai/judge-x#{k}" for k in (1, 2, 3)}
    assert all(r["status"] == "done" for r in rows)
    by_sample: dict[str, dict[tuple[str, str, str], float]] = defaultdict(dict)
    for r in rows:
        by_sample[r["judge"]][(r["model"], r["instance_id"], r["skill"])] = float(r["score"])
    first = {
        (r["model"], r["instance_id"], r["skill"]): float(r["score"])
        for r in _export(env, "single")
    }
    assert by_sample["openai/judge-x#1"] == first  # the cached answer, word for word
    assert by_sample["openai/judge-x#2"] != first  # the seed varies the answers

    report = json.loads(
        flask_eval("report", "three", "--format", "json", "--bootstrap", "0", env=env).stdout
    )
    overall = {r["model"]: r["mean"] for r in report["rows"] if r["dimension"] == "overall"}
    assert {r["judge"] for r in report["rows"]} == {"openai/judge-x"}
    for model, mean in overall.items():
        per_sample = [
            statistics.fmean(v for (m, _, _), v in scores.items() if m == model)
            for scores in by_sample.values()
        ]
        assert abs(mean - statistics.fmean(per_sample)) < 1e-9, (model, mean, per_sample)
    (consistency,) = report["self_consistency"]
    items = list(first)
    equal = sum(len({by_sample[s][i] for s in by_sample}) == 1 for i in items) / len(items)
    assert consistency["judge"] == "openai/judge-x" and consistency["items"] == len(items)
    assert consistency["all_equal"] == equal < 1
    assert [j["name"] for j in report["judges"]] == ["openai/judge-x"]
    text = flask_eval("report", "three", "--bootstrap", "0", env=env).stdout
    assert "Self-consistency" in text and "ICC(1)" in text
    assert "self_consistency" not in json.loads(
        flask_eval("report", "single", "--format", "json", "--bootstrap", "0", env=env).stdout
    )


def test_samples_out_of_range_are_refused_in_one_line(sqlite_url: str) -> None:
    env = cli_env(sqlite_url)
    for value in ("0", "21"):
        proc = flask_eval("run", *INPUTS, "--samples", value, env=env, check=False)
        assert proc.returncode == 2
        assert proc.stderr.strip().count("\n") == 0 and "--samples" in proc.stderr
