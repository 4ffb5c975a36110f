"""Ensembles: combinations checked against numpy and a naive loop, quorum semantics, and
ensembles reported like any judge by `flask-eval report --ensemble`."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner

from flask_eval.cli.report import register
from flask_eval.report.breakdown import Aggregation, flask_breakdown
from flask_eval.report.ensemble import EnsembleSpec, add_ensembles, combine
from flask_eval.report.scores import FAILED, NA, NONE, SCORED
from flask_eval.storage.store import Store
from tests.reference import from_records
from tests.report.test_bootstrap import ABILITY, _store_run, random_records

TOL = 1e-9


def random_columns(seed: int, cells: int = 2000, judges: int = 5) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    state = rng.choice([SCORED, NA, FAILED, NONE], size=(cells, judges), p=[0.7, 0.1, 0.1, 0.1])
    score = np.where(state == SCORED, rng.integers(1, 6, size=(cells, judges)), np.nan)
    return state.astype(np.int8), score.astype(float)


def naive_majority(values: list[float]) -> float:
    """The score more than half the judges gave, else the median of all scores."""
    value, count = Counter(values).most_common(1)[0]
    return value if 2 * count > len(values) else float(np.median(values))


@pytest.mark.parametrize("quorum", [1, 2, 3])
def test_combinations_equal_numpy_and_a_naive_loop(quorum: int) -> None:
    state, score = random_columns(quorum)
    for method in ("mean", "median", "majority"):
        st, sc = combine(state, score, method, quorum)
        for c in range(len(state)):
            values = [float(v) for v, s in zip(score[c], state[c], strict=True) if s == SCORED]
            if len(values) >= quorum:
                assert st[c] == SCORED
                expected = {
                    "mean": float(np.mean(values)),
                    "median": float(np.median(values)),
                    "majority": naive_majority(values),
                }[method]
                assert abs(sc[c] - expected) < TOL, (method, values)
            else:
                assert st[c] != SCORED and np.isnan(sc[c])


def test_quorum_semantics() -> None:
    s, n, f, o = SCORED, NA, FAILED, NONE
    state = np.array(
        [
            [s, s, f],  # 2 scores: scored
            [s, n, f],  # 1 score + 1 N/A reach q=2: N/A
            [s, f, f],  # only 1 successful: failed
            [s, o, f],  # one judge still open and could reach q=2: not finished
            [f, f, f],  # all failed: failed
            [o, o, o],  # nothing finished: no judgment
            [n, n, s],  # 2 N/A + 1 score: N/A under q=2
        ],
        dtype=np.int8,
    )
    score = np.where(state == s, 4.0, np.nan)
    score[0, 1] = 2.0
    got, value = combine(state, score, "mean", 2)
    assert got.tolist() == [s, n, f, o, f, o, n]
    assert value[0] == 3.0 and np.isnan(value[1:]).all()


def test_majority_is_a_strict_majority_else_the_median() -> None:
    state = np.full((3, 4), SCORED, dtype=np.int8)
    score = np.array([[1, 1, 5, 5], [2, 2, 3, 3], [1, 1, 4, 5]], dtype=float)
    _, value = combine(state, score, "majority", 1)
    # no score has more than 2 of 4 judges: the medians 3, 2.5 and (1 + 4) / 2
    assert value.tolist() == [3.0, 2.5, 2.5]


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([3, 5], 4.0),  # two judges disagree: no majority, the median (not the lower score)
        ([5, 3], 4.0),
        ([4, 4], 4.0),
        ([3, 3, 5], 3.0),  # 2 of 3 is a strict majority
        ([5, 3, 3], 3.0),
        ([2, 3, 5], 3.0),  # all different: the median
        ([5, 5, 5, 1], 5.0),  # 3 of 4
        ([4], 4.0),
    ],
)
def test_majority_of_two_and_three_judges(scores: list[int], expected: float) -> None:
    k = len(scores)
    state = np.full((1, k), SCORED, dtype=np.int8)
    _, value = combine(state, np.array([scores], dtype=float), "majority", 1)
    assert value.tolist() == [expected]
    # judges that did not score are not voters: one N/A and one failure change nothing
    state = np.concatenate([state, np.array([[NA, FAILED]], dtype=np.int8)], axis=1)
    score = np.concatenate([np.array([scores], dtype=float), [[np.nan, np.nan]]], axis=1)
    _, value = combine(state, score, "majority", 1)
    assert value.tolist() == [expected]


def test_specs_and_validation() -> None:
    assert EnsembleSpec.parse("mean:2").name == "ensemble/mean@q2"
    assert EnsembleSpec.parse("Majority").name == "ensemble/majority@q1"
    for bad in ("avg:2", "mean:0", "mean:x"):
        with pytest.raises(ValueError):
            EnsembleSpec.parse(bad)
    table = from_records(random_records(1, instances=10))
    with pytest.raises(ValueError, match="quorum 3 > 2"):
        add_ensembles(table, [EnsembleSpec("mean", 3)])
    with pytest.raises(ValueError, match="unknown ensemble judge"):
        add_ensembles(table, [EnsembleSpec("mean", 1)], members=["j1", "nope"])
    with pytest.raises(ValueError, match="twice"):
        add_ensembles(table, [EnsembleSpec("mean", 1), EnsembleSpec("mean", 1)])


def test_ensemble_rows_are_micro_averages_of_combined_scores() -> None:
    records = random_records(2, instances=80, judges=("j1", "j2", "j3"))
    table = add_ensembles(
        from_records(records), [EnsembleSpec("mean", 2), EnsembleSpec("median", 1)]
    )
    assert table.judges[-2:] == ("ensemble/mean@q2", "ensemble/median@q1")
    rows = Aggregation(table, flask_breakdown(ABILITY)).rows()
    by_cell: dict[tuple[str, str, str], list[float]] = {}
    for r in records:
        if r.status == "done" and r.score is not None:
            by_cell.setdefault((r.model, r.instance_id, r.skill), []).append(r.score)
    for model in ("m1", "m2", "m3"):
        combined = [np.mean(v) for (m, _, _), v in by_cell.items() if m == model and len(v) >= 2]
        row = next(
            r
            for r in rows
            if (r.model, r.judge, r.dimension) == (model, "ensemble/mean@q2", "overall")
        )
        assert row.n == len(combined)
        assert row.mean == pytest.approx(float(np.mean(combined)), abs=TOL)


def _cli() -> click.Group:
    group = click.Group()
    register(group)
    return group


def test_report_command_adds_ensemble_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'e.db'}"
    store = Store(url)
    _store_run(store, seed=5)
    store.close()
    monkeypatch.setenv("FLASK_EVAL_DATABASE_URL", url)
    args = ["report", "stats", "--format", "json", "--quiet", "--bootstrap", "200"]
    result = CliRunner().invoke(_cli(), [*args, "--ensemble", "mean:2", "--ensemble", "majority"])
    # the run leaves judgments pending: its report is partial, exit 1, said on stderr
    assert result.exit_code == 1 and "is in progress" in result.stderr, result.output
    payload = json.loads(result.stdout)
    assert payload["run"] == "stats" and payload["bootstrap"]["replicates"] == 200
    judges = {r["judge"] for r in payload["rows"]}
    assert {"ensemble/mean@q2", "ensemble/majority@q1", "openai/a"} <= judges
    row = payload["rows"][0]
    assert list(row)[:8] == ["model", "judge", "dimension", "key", "mean", "n", "n_na", "n_failed"]
    assert {"ci_low", "ci_high"} <= set(row)
    ens = [r for r in payload["rows"] if r["judge"] == "ensemble/mean@q2"]
    assert {r["dimension"] for r in ens} >= {"overall", "skill", "ability", "difficulty"}
    for r in payload["rows"]:
        if r["mean"] is not None and r["n"] > 1:
            assert r["ci_low"] <= r["mean"] + 1e-12 and r["mean"] - 1e-12 <= r["ci_high"]
    # reproducible with the same seed
    again = CliRunner().invoke(_cli(), [*args, "--ensemble", "mean:2", "--ensemble", "majority"])
    assert json.loads(again.stdout)["rows"] == payload["rows"]
    members = CliRunner().invoke(
        _cli(),
        [
            *args,
            "--ensemble",
            "mean:2",
            "--ensemble-judge",
            "openai/a",
            "--ensemble-judge",
            "openai/c",
        ],
    )
    assert members.exit_code == 1 and "is in progress" in members.stderr, members.output
    for bad in (["--ensemble", "avg"], ["--ensemble", "mean:9"]):
        failed = CliRunner().invoke(_cli(), [*args, *bad])
        assert failed.exit_code == 2 and "--ensemble" in failed.output
