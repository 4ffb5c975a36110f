"""Judge agreement: every statistic against scipy / krippendorff / numpy, a published
worked example, reference raters from CSV and JSON Lines, and the `agreement` command."""

from __future__ import annotations

import json
from pathlib import Path

import click
import krippendorff
import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

from flask_eval.cli.report import register
from flask_eval.core.errors import InputError
from flask_eval.report import references
from flask_eval.report.agreement import FIELDS, agreement_rows, pair_statistics
from tests.reference import Record, from_records
from tests.report.test_bootstrap import _store_run, random_records

TOL = 1e-9


def reference_statistics(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    return {
        "pearson": float(stats.pearsonr(a, b).statistic),
        "spearman": float(stats.spearmanr(a, b).statistic),
        "kendall_tau_b": float(stats.kendalltau(a, b, variant="b").statistic),
        "krippendorff_alpha": float(
            krippendorff.alpha(reliability_data=np.stack([a, b]), level_of_measurement="ordinal")
        ),
        "exact": float(np.mean(a == b)),
        "within1": float(np.mean(np.abs(a - b) <= 1)),
    }


def assert_matches(got: dict[str, float | None], a: np.ndarray, b: np.ndarray) -> None:
    ref = reference_statistics(a, b)
    assert got["n"] == len(a)
    for name, value in ref.items():
        assert got[name] is not None, name
        assert abs(got[name] - value) < TOL, (name, got[name], value)  # type: ignore[operator]


@pytest.mark.parametrize("seed", range(12))
def test_scores_1_to_5_match_scipy_and_krippendorff(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 3000))
    a = rng.integers(1, 6, n).astype(float)
    noise = rng.integers(-2, 3, n) * (rng.random(n) < 0.6)
    b = np.clip(a + noise, 1, 5).astype(float)
    assert_matches(pair_statistics(a, b), a, b)


@pytest.mark.parametrize("seed", range(6))
def test_fractional_and_many_valued_scores_match(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(20, 400))
    halves = rng.integers(2, 11, n) / 2.0  # ensemble means: 1.0, 1.5, ... 5.0
    other = np.round(np.clip(halves + rng.normal(0, 0.8, n), 1, 5) * 2) / 2
    assert_matches(pair_statistics(halves, other), halves, other)
    # continuous: more values than a contingency table takes (krippendorff's own code is
    # cubic in the number of distinct values, so keep it small)
    m = min(n, 80)
    cont_a = rng.normal(3, 1, m)
    cont_b = cont_a + rng.normal(0, 0.7, m)
    assert_matches(pair_statistics(cont_a, cont_b), cont_a, cont_b)


def test_krippendorff_published_example() -> None:
    """Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", example A:
    two observers, binary data, no missing values: alpha = 0.095 (= 1 - 76/84)."""
    a = np.array([0, 1, 0, 0, 0, 0, 0, 0, 1, 0], dtype=float)
    b = np.array([1, 1, 1, 0, 0, 1, 0, 0, 0, 0], dtype=float)
    got = pair_statistics(a, b)
    assert got["krippendorff_alpha"] == pytest.approx(1 - 76 / 84, abs=1e-12)
    assert round(got["krippendorff_alpha"] or 0, 3) == 0.095


def test_undefined_statistics_are_none() -> None:
    same = pair_statistics(np.array([3.0, 3.0, 3.0]), np.array([3.0, 3.0, 3.0]))
    assert same["pearson"] is None and same["krippendorff_alpha"] is None
    assert same["exact"] == 1.0 and same["within1"] == 1.0
    one = pair_statistics(np.array([2.0]), np.array([4.0]))
    assert one["n"] == 1 and one["pearson"] is None and one["exact"] == 0.0
    assert one["within1"] == 0.0


def _paired(records: list[Record], a: str, b: str, skill: str | None) -> tuple[np.ndarray, ...]:
    scores: dict[tuple[str, str, str], dict[str, float]] = {}
    for r in records:
        if r.status == "done" and r.score is not None and (skill is None or r.skill == skill):
            scores.setdefault((r.model, r.instance_id, r.skill), {})[r.judge] = r.score
    pairs = [(v[a], v[b]) for v in scores.values() if a in v and b in v]
    return np.array([p[0] for p in pairs], float), np.array([p[1] for p in pairs], float)


def test_agreement_rows_match_scipy_per_skill_and_overall() -> None:
    records = random_records(21, instances=120, judges=("j1", "j2", "j3"))
    table = from_records(records)
    rows = agreement_rows(table)
    pairs = {(r.judge_a, r.judge_b) for r in rows}
    assert pairs == {("j1", "j2"), ("j1", "j3"), ("j2", "j3")}
    assert next(r.skill for r in rows if (r.judge_a, r.judge_b) == ("j1", "j2")) is None
    for row in rows:
        a, b = _paired(records, row.judge_a, row.judge_b, row.skill)
        assert row.n == len(a)
        if len(a) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
            continue
        assert_matches(row.as_dict(), a, b)
    assert set(rows[0].as_dict()) == set(FIELDS)


def test_references_load_from_csv_and_jsonl_and_compare_like_a_judge(tmp_path: Path) -> None:
    records = random_records(22, instances=60, judges=("j1",))
    table = from_records(records)
    rng = np.random.default_rng(0)
    done = [r for r in records if r.status == "done" and r.score is not None]
    human = {
        (r.model, r.instance_id, r.skill): int(np.clip((r.score or 0) + rng.integers(-1, 2), 1, 5))
        for r in done
    }
    csv_path = tmp_path / "human.csv"
    lines = ["model,instance_id,skill,score"]
    lines += [f'{m},{i},"{s}",{v}' for (m, i, s), v in human.items()]
    lines.append("m1,999,Factuality,3")  # no such judgment: left out, counted
    lines.append(
        f"m1,{done[0].instance_id},Metacognition,N/A"
        if done[0].skill != "Metacognition"
        else "m2,998,Metacognition,N/A"
    )
    csv_path.write_text("\n".join(lines) + "\n")
    jsonl_path = tmp_path / "expert.jsonl"
    jsonl_path.write_text(
        "".join(
            json.dumps({"model": m, "instance_id": i, "skill": s, "score": v}) + "\n"
            for (m, i, s), v in list(human.items())[:50]
        )
    )
    refs = [references.load("human", str(csv_path)), references.load("expert", str(jsonl_path))]
    rated, unmatched = references.attach(table, refs)
    assert rated.judges == ("j1", "human", "expert")
    assert unmatched[0] >= 1 and unmatched[1] == 0
    rows = agreement_rows(rated)
    overall = next(r for r in rows if (r.judge_a, r.judge_b, r.skill) == ("j1", "human", None))
    keys = list(human)
    judge = {(r.model, r.instance_id, r.skill): r.score for r in done}
    a = np.array([judge[k] for k in keys], float)
    b = np.array([human[k] for k in keys], float)
    assert_matches(overall.as_dict(), a, b)
    expert = next(r for r in rows if (r.judge_a, r.judge_b, r.skill) == ("human", "expert", None))
    assert expert.n == 50 and expert.exact == 1.0


@pytest.mark.parametrize(
    ("content", "suffix", "message"),
    [
        ("model,instance_id,skill\nm,1,Factuality\n", ".csv", r"\.csv:1: missing column"),
        ("model,instance_id,skill,score\nm,1,Factuality,high\n", ".csv", r"\.csv:2: score"),
        ("model,instance_id,skill,score\nm,1,F,3\nm,1,F,4\n", ".csv", r"\.csv:3: duplicate"),
        ('{"model": "m", "instance_id": 1, "skill": "F"}\n', ".jsonl", r"\.jsonl:1: missing"),
        ('{"model": "m"\n', ".jsonl", r"\.jsonl:1: invalid JSON"),
        ("", ".jsonl", "no reference scores"),
    ],
)
def test_bad_reference_files_name_file_and_line(
    tmp_path: Path, content: str, suffix: str, message: str
) -> None:
    path = tmp_path / f"ref{suffix}"
    path.write_text(content)
    with pytest.raises(InputError, match=message):
        references.load("human", str(path))
    with pytest.raises(InputError, match="NAME=PATH"):
        references.parse_arg("no-equals-sign")


def _cli() -> click.Group:
    group = click.Group()
    register(group)
    return group


def test_agreement_command_json_and_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from flask_eval.storage.store import Store

    url = f"sqlite:///{tmp_path / 'a.db'}"
    store = Store(url)
    _, records = _store_run(store, seed=3)
    store.close()
    monkeypatch.setenv("FLASK_EVAL_DATABASE_URL", url)
    ref = tmp_path / "human.jsonl"
    done = [r for r in records if r.judge == "openai/a" and r.score is not None][:30]
    ref.write_text(
        "".join(
            json.dumps(
                {"model": r.model, "instance_id": r.instance_id, "skill": r.skill, "score": r.score}
            )
            + "\n"
            for r in done
        )
    )
    result = CliRunner().invoke(
        _cli(), ["agreement", "stats", "--format", "json", "--reference", f"human={ref}"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert list(payload) == ["rows"]
    assert all(list(r) == list(FIELDS) for r in payload["rows"])
    judges = {(r["judge_a"], r["judge_b"]) for r in payload["rows"]}
    assert ("openai/a", "anthropic/b") in judges and ("openai/c", "human") in judges
    table = CliRunner().invoke(_cli(), ["agreement", "stats"])
    assert table.exit_code == 0 and "openai/a" in table.stdout and "kendall" not in table.stdout
    assert table.stdout.splitlines()[0].split()[:4] == ["judge", "A", "judge", "B"]
    missing = CliRunner().invoke(_cli(), ["agreement", "nope"])
    assert missing.exit_code == 2 and "no run named 'nope'" in missing.output
