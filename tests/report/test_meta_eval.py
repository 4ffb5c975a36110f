"""judge-eval's metrics (report/meta_eval.py), set loaders and recorded judges."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

from flask_eval.app.judge_eval import JudgeEvalConfig, chosen_sets, judge_eval, judge_name
from flask_eval.cli import main
from flask_eval.core.errors import InputError
from flask_eval.core.settings import load as load_settings
from flask_eval.producer.judge_eval_sets import SETS, load_set, prometheus_data_dir
from flask_eval.report import meta_eval
from flask_eval.report.pairwise_labels import Tally
from flask_eval.report.probe_types import Card
from flask_eval.storage.snapshots import fingerprint
from flask_eval.storage.store import Store

DATA = prometheus_data_dir()
AUTOJ_FILES = (
    "eval/benchmark/data/autoj_pairwise.json",
    "eval/benchmark/autoj_utils/pairwise_example_output.jsonl",
    "eval/benchmark/autoj_utils/pairwise_exchange_example_output.jsonl",
)


def prompt(instruction: str, response: str) -> str:
    rubric = "\n".join(f"Score {n}: level {n}." for n in range(1, 6))
    return (
        "###Task Description:\nGrade the response.\n\n"
        f"###The instruction to evaluate:\n{instruction}\n\n"
        f"###Response to evaluate:\n{response}\n\n"
        f"###Score Rubrics:\n[Is it helpful?]\n{rubric}\n\n###Feedback: "
    )


def no_store() -> None:
    raise AssertionError("recorded:gpt-4 opens no store")


def test_correlations_equal_scipy_and_intervals_hold_them() -> None:
    rng = np.random.default_rng(3)
    gold = rng.integers(1, 6, 80).astype(float)
    judge = np.clip(gold + rng.normal(0, 1.2, 80), 1, 5)
    got = meta_eval.correlation_metrics(judge, gold, replicates=150, seed=1)
    assert got["pearson"].value == pytest.approx(stats.pearsonr(judge, gold)[0], abs=1e-12)
    assert got["spearman"].value == pytest.approx(stats.spearmanr(judge, gold)[0], abs=1e-12)
    assert got["kendall"].value == pytest.approx(stats.kendalltau(judge, gold)[0], abs=1e-12)
    for e in got.values():
        assert e.low is not None and e.high is not None and e.value is not None
        assert e.low < e.value < e.high and e.n == 80
    again = meta_eval.correlation_metrics(judge, gold, replicates=150, seed=1)
    assert again == got  # seeded
    wider = meta_eval.correlation_metrics(judge[:20], gold[:20], replicates=150, seed=1)
    p, w = got["pearson"], wider["pearson"]
    assert (w.high or 0) - (w.low or 0) > (p.high or 0) - (p.low or 0)


def test_a_constant_judge_has_no_correlation() -> None:
    got = meta_eval.correlation_metrics([3.0] * 10, list(range(10)), replicates=50)
    assert all(e.value is None and e.low is None for e in got.values())


def test_wilson_matches_statsmodels_formula() -> None:
    low, high = meta_eval.wilson(45, 60) or (0.0, 0.0)
    z = stats.norm.ppf(0.975)
    p, n = 0.75, 60
    centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z / (1 + z**2 / n) * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    assert (low, high) == pytest.approx((centre - half, centre + half), abs=1e-12)
    assert meta_eval.wilson(0, 0) is None
    assert meta_eval._tally_estimate(Tally(10, 10), 0.95).high == pytest.approx(1.0)


def test_other_absolute_layouts_and_tie_pairs_load(tmp_path: Path) -> None:
    flask = tmp_path / "flask_eval.json"
    records = [
        {
            "instruction": prompt(f"q{n}", f"r{n}") + '",',
            "gpt4_score": [n, n, 5],
            "human_score": [n],
        }
        for n in range(1, 5)
    ]
    flask.write_text(json.dumps(records))
    got = load_set(SETS["flask"], str(flask), tmp_path)
    assert got.records[2].gpt4 == (2.0, 2.0, 5.0) and got.records[2].human == (2.0,)
    assert sorted(got.keys.values()) == [1, 2, 3, 4]
    ood = tmp_path / "ood.json"
    ood.write_text(
        "\n".join(json.dumps({"instruction": prompt("q", "r"), "gpt4_score": 4}) for _ in range(2))
    )
    assert load_set(SETS["feedback-collection-ood"], str(ood), tmp_path).records[1].gpt4 == (4.0,)
    human = tmp_path / "mt_bench_human_judgement_eval.json"
    human.write_text(
        json.dumps(
            [
                {
                    "chosen_instruction": prompt("q", "good"),
                    "rejected_instruction": prompt("q", "bad"),
                    "tie": t,
                }
                for t in (0, 1)
            ]
        )
    )
    pairs = load_set(SETS["mt-bench-human"], str(human), tmp_path)
    assert [x.label for x in pairs.labels] == [0, 2]


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        ([{"instruction": "no markers", "gpt4_score": [3]}], "record 2: field 'instruction'"),
        ([{"instruction": prompt("q", "r"), "gpt4_score": [7]}], "record 2: field 'gpt4_score'"),
    ],
)
def test_bad_records_name_file_and_record(
    tmp_path: Path, records: list[object], expected: str
) -> None:
    bad = tmp_path / "flask_eval.json"
    bad.write_text(json.dumps([{"instruction": prompt("q", "r"), "gpt4_score": [3]}, *records]))
    with pytest.raises(InputError) as err:
        load_set(SETS["flask"], str(bad), tmp_path)
    assert str(bad) in str(err.value) and expected in str(err.value)


def test_cli_bad_input_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "f.json"
    bad.write_text('[{"instruction": 3, "gpt4_score": 4}]')
    runner = CliRunner()
    for args in (
        ["recorded:gpt-4", "--file", f"flask={bad}", "--sets", "flask"],
        ["recorded:nobody", "--data", str(tmp_path)],
        ["recorded:gpt-4", "--sets", "nope", "--data", str(tmp_path)],
        ["recorded:gpt-4", "--file", "flask", "--data", str(tmp_path)],
    ):
        result = runner.invoke(main, ["judge-eval", *args])
        assert result.exit_code == 2, result.output
        assert len(result.stderr.strip().splitlines()) == 1
    assert not list(Path.cwd().glob("flask-eval-judge-eval-*"))


def test_judge_names() -> None:
    assert judge_name("openai/prometheus-7b@http://x:1/v1") == (
        "prometheus-7b",
        "openai/prometheus-7b@http://x:1/v1",
    )
    assert judge_name("p2=openai/m") == ("p2", "openai/m")


def test_sets_default_to_the_files_found(tmp_path: Path) -> None:
    (tmp_path / "eval/benchmark/data").mkdir(parents=True)
    (tmp_path / SETS["hhh"].file).write_text("[]")
    got = chosen_sets(JudgeEvalConfig("x/y", data_dir=tmp_path))
    assert [s.name for s, _ in got] == ["hhh"]
    with pytest.raises(InputError, match="set vicuna: no file"):
        chosen_sets(JudgeEvalConfig("x/y", sets=("vicuna",), data_dir=tmp_path))


@pytest.mark.e2e  # 2,784 calls to the in-process simulator: seconds
@pytest.mark.skipif(
    not all((DATA / f).is_file() for f in AUTOJ_FILES), reason="Auto-J data not available"
)
def test_recorded_auto_j_13b_gives_the_published_figures(tmp_path: Path, sqlite_url: str) -> None:
    # a judge replaying Auto-J-13B's recorded answers through a run: the figures come
    # from the run's ledger
    cards: list[tuple[str, Card]] = []
    rows = judge_eval(
        JudgeEvalConfig("recorded:auto-j-13b", sets=("autoj",), data_dir=DATA),
        load_settings(),
        lambda: Store(sqlite_url),
        tmp_path,
        cards=cards,
    )
    m = rows[0].metrics
    assert round(100 * (m["both"].value or 0), 2) == 54.96  # both orders, ties included
    assert round(100 * (m["listed"].value or 0), 2) == 59.99  # the listed order alone
    assert m["both"].n == 1392 and m["both_no_tie"].n == 1019
    data = meta_eval.table_data(rows)
    assert data["rows"][0]["metrics"]["both"]["value"] == m["both"].value
    assert "54.96" in meta_eval.render_text(rows)
    assert [name for name, _ in cards] == ["autoj"]
    store = Store(sqlite_url)
    try:
        run = store.find_run()
        assert run is not None
        assert fingerprint(store, run.id).counts == {"done": 2784}  # both orders of 1,392
    finally:
        store.close()


@pytest.mark.skipif(
    not (DATA / SETS["mt-bench"].file).is_file(), reason="MT-Bench data not available"
)
def test_recorded_gpt4_one_run_against_its_mean(tmp_path: Path) -> None:
    rows = judge_eval(
        JudgeEvalConfig(
            "recorded:gpt-4", sets=("mt-bench",), data_dir=DATA, samples=1, replicates=50
        ),
        load_settings(),
        no_store,  # type: ignore[arg-type]
        tmp_path,
    )
    records = json.loads((DATA / SETS["mt-bench"].file).read_text())
    first = [r["gpt4_score"][0] for r in records]
    mean = [sum(r["gpt4_score"]) / 3 for r in records]
    assert rows[0].metrics["pearson"].value == pytest.approx(stats.pearsonr(first, mean)[0])
