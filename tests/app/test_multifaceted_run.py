"""`run --multifaceted` against the in-thread simulator: every rubric of every instance
judged, and the report's overall and per-source rows equal Janus's score (per instance the
mean over its rubrics, then the mean over instances) recomputed from the export."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from tests.helpers import cli_env, flask_eval
from tests.producer.test_multifaceted import record, write_lines


def test_a_run_reports_janus_scores_overall_and_per_source(tmp_path: Path, sqlite_url: str) -> None:
    sources = ["mt-bench", "koala", "koala", "self-instruct", "mt-bench", "koala"]
    rows = [
        record(src, response=f"answer {k}", response_model_name="janus-7b")
        for k, src in enumerate(sources)
    ]
    path = write_lines(tmp_path, rows)
    env = cli_env(sqlite_url)
    with running_simulator(SimConfig(seed=4)) as sim:
        flask_eval(
            "run",
            "--multifaceted",
            path,
            "--judge",
            f"openai/sim-gpt@{sim.openai_base_url}",
            "--run",
            "mf",
            "--quiet",
            env=env,
        )
    st = json.loads(flask_eval("status", "mf", "--json", env=env).stdout)
    assert st["done"] == st["total"] == len(rows) * 4
    judged = [json.loads(line) for line in flask_eval("export", "mf", env=env).stdout.splitlines()]
    per_instance: dict[str, list[float]] = defaultdict(list)
    for r in judged:
        per_instance[r["instance_id"]].append(float(r["score"]))
    assert {len(v) for v in per_instance.values()} == {4}
    means = {iid: statistics.fmean(v) for iid, v in per_instance.items()}
    report = json.loads(flask_eval("report", "mf", "--format", "json", env=env).stdout)
    cells = {(r["dimension"], r["key"]): r for r in report["rows"]}
    overall = cells[("overall", "all")]
    assert abs(overall["mean"] - statistics.fmean(means.values())) < 1e-9
    assert overall["ci_low"] <= overall["mean"] <= overall["ci_high"]
    for source in set(sources):
        ids = [str(k) for k, s in enumerate(sources) if s == source]
        row = cells[("task", source)]
        assert abs(row["mean"] - statistics.fmean(means[i] for i in ids)) < 1e-9
        assert row["n"] == 4 * len(ids)
    assert {k for d, k in cells if d == "skill"} == {
        "style",
        "background_knowledge",
        "informativeness",
        "harmlessness",
    }
    text = flask_eval("report", "mf", env=env).stdout
    assert "koala" in text and "self-instruct" in text
