"""A Prometheus eval set reported per response source, beside GPT-4's own scores: a
judge's ranking of MT-Bench's or Vicuna Bench's 4 models can be read against GPT-4's."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from flask_eval.app import imports
from flask_eval.app.report import Extras, build_report
from flask_eval.report.render import to_json, to_table
from flask_eval.storage.store import Store
from tests.report.ledger import Outcome, Row, finish, judges, planned_run

VICUNA = (
    Path(__file__).resolve().parents[3]
    / "shared"
    / "prometheus-data"
    / "eval"
    / "benchmark"
    / "data"
    / "vicuna_eval.json"
)


def test_vicuna_bench_per_model_with_gpt4_beside_each_judge(tmp_path: Path) -> None:
    if not VICUNA.exists():
        pytest.skip("Prometheus eval data absent (../shared)")
    raw = json.loads(VICUNA.read_text(encoding="utf-8"))
    gpt4: dict[tuple[str, str], float] = {
        (r["response_source"], str(r["idx"])): sum(r["gpt4_score"]) / 3 for r in raw
    }
    store = Store(f"sqlite:///{tmp_path / 'v.db'}")
    run = planned_run(
        store,
        "vicuna",
        instances=None,
        responses=(),
        prometheus_set=str(VICUNA),
        judges=judges("copy", "flat"),
    )

    def score(row: Row) -> Outcome:  # "copy" agrees with GPT-4's first run; "flat" gives 3
        if row.judge == "flat":
            return "done", 3
        first = next(
            r for r in raw if (r["response_source"], str(r["idx"])) == (row.model, row.instance_id)
        )
        return "done", first["gpt4_score"][0]

    finish(store, run, score)
    refs = imports.load_references((f"gpt-4={VICUNA}",))
    report = build_report(store, run, replicates=0, progress=False, extras=Extras(refs=refs))
    store.close()
    assert report.models == ["chat_gpt", "llama-2-chat", "vicuna", "wizard"]
    means = {(r.name, r.model): r.mean for r in report.reference_means}
    expected: dict[str, list[float]] = defaultdict(list)
    for (source, _), mean in gpt4.items():
        expected[source].append(mean)
    for model, values in expected.items():
        assert means[("gpt-4", model)] == pytest.approx(sum(values) / len(values))
    text = to_table(report)
    lines = text.splitlines()
    at = next(k for k, line in enumerate(lines) if line.startswith("Leaderboard"))
    assert "copy" in lines[at + 1] and "gpt-4 (reference)" in lines[at + 1]
    assert "Ranking agreement with gpt-4" in text and "copy 1.00 (4 models)" in text
    doc = json.loads(to_json(report))
    assert {(r["name"], r["model"]) for r in doc["reference_means"]} == {
        ("gpt-4", m) for m in report.models
    }
