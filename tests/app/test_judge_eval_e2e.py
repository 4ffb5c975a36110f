"""`flask-eval judge-eval` end to end against the judge simulator: each set judged by a run
of the embedded store at prometheus-eval's settings, the table read from its ledger."""

from __future__ import annotations

import json
from pathlib import Path

from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage.store import Store
from tests.helpers import cli_env, flask_eval
from tests.report.test_meta_eval import prompt


def sets(tmp_path: Path) -> list[str]:
    absolute = tmp_path / "mt_bench_eval.json"
    absolute.write_text(
        json.dumps(
            [
                {
                    "idx": n,
                    "response_source": "m1",
                    "category": "writing",
                    "instruction": prompt(f"Question {n}?", "word " * (5 * n)),
                    "gpt4_score": [1 + n % 5, 1 + (n + 1) % 5, 1 + n % 5],
                }
                for n in range(1, 9)
            ]
        )
    )
    pairs = tmp_path / "mt_bench_human_judgement_eval.json"
    pairs.write_text(
        json.dumps(
            [
                {
                    "chosen_instruction": prompt(f"Q{n}", "a long careful answer " * 3),
                    "rejected_instruction": prompt(f"Q{n}", "no"),
                    "tie": int(n == 3),
                }
                for n in range(1, 5)
            ]
        )
    )
    return ["--file", f"mt-bench={absolute}", "--file", f"mt-bench-human={pairs}"]


def test_judge_eval_runs_each_set_through_the_ledger(tmp_path: Path, sqlite_url: str) -> None:
    env = cli_env(sqlite_url)
    out = tmp_path / "table.json"
    with running_simulator(SimConfig(seed=2)) as sim:
        flask_eval(
            "judge-eval",
            f"openai/prometheus-7b@{sim.openai_base_url}",
            "--sets",
            "mt-bench,mt-bench-human",
            *sets(tmp_path),
            "--limit",
            "6",
            "--replicates",
            "100",
            "--format",
            "json",
            "--out",
            str(out),
            env=env,
        )
    output = json.loads(out.read_text())
    table = output["table"]
    absolute, pairwise = table["rows"]
    # each set's run has its judge card: how the judge worked, and the swap on pairs
    cards = {c["set"]: c for c in output["cards"]}
    assert set(cards) == {"mt-bench", "mt-bench-human"}
    ops = [card["judges"][0]["ops"] for card in cards.values()]
    assert all(o["judgments"] > 0 and o["unparseable"] == 0 for o in ops)
    swaps = [
        e for card in cards.values() for e in card["judges"][0]["effects"] if e["probe"] == "swap"
    ]
    assert len(swaps) == 1 and swaps[0]["items"] == 4
    assert not [e for e in cards["mt-bench"]["judges"][0]["effects"] if e["probe"] == "swap"]
    assert absolute["set"] == "mt-bench" and absolute["judge"] == "prometheus-7b"
    assert absolute["metrics"]["pearson"]["n"] == 6  # --limit 6 of 8 records
    assert pairwise["metrics"]["both"]["n"] == 4
    assert pairwise["metrics"]["both_no_tie"]["n"] == 3
    assert table["intervals"]["absolute"].startswith("95% percentile bootstrap")
    store = Store(sqlite_url)
    try:
        runs = {r.config.samples: r for r in map(store.run_by_id, (1, 2))}
        judges = [j for r in runs.values() for j in r.config.judges]
    finally:
        store.close()
    # absolute: 3 repetitions at temperature 1.0, 1024 tokens, Prometheus' protocol
    assert sorted(runs) == [1, 3]
    assert {(j.temperature, j.max_tokens, j.protocol) for j in judges} == {
        (1.0, 1024, "prometheus")
    }


def test_bad_input_writes_no_store(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    env = cli_env(f"sqlite:///{db}")
    bad = tmp_path / "hhh.json"
    bad.write_text('[{"chosen_instruction": "x"}]')
    proc = flask_eval(
        "judge-eval", "openai/m", "--file", f"hhh={bad}", "--sets", "hhh", env=env, check=False
    )
    assert proc.returncode == 2 and str(bad) in proc.stderr and "record 1" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not db.exists()
