"""People beside judges, the math: alpha among raters against the `krippendorff` package,
each judge against the people's mean against scipy, the batched bootstrap statistics
against the one-table ones, pairwise majority agreement, and the interval's coverage."""

from __future__ import annotations

import warnings

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from bench.people_coverage import correlated_rows, coverage
from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND, VERDICT_TIE
from flask_eval.report.agreement import from_contingency
from flask_eval.report.people import PeopleSettings, people_report
from flask_eval.report.people_data import RaterAgreement, ScoreRow
from flask_eval.report.people_stats import (
    INTERVAL,
    NOMINAL,
    ORDINAL,
    alpha_replicates,
    kendall_tau_b,
    pearson,
    spearman,
    within,
)

TOL = 1e-9


def kalpha(data: np.ndarray, metric: str) -> float:
    """The `krippendorff` package's alpha of a (raters, units) matrix, NaN for missing."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # its 0 / 0 where alpha is undefined
        return float(krippendorff.alpha(reliability_data=data, level_of_measurement=metric))  # type: ignore[arg-type]


NO_BOOTSTRAP = PeopleSettings(replicates=0)


def generated(seed: int, raters: int = 4, items: int = 40, missing: float = 0.3) -> np.ndarray:
    """A (raters, items) matrix of 1..5 scores with NaN for missing, raters agreeing
    somewhat (a latent item quality plus noise)."""
    rng = np.random.default_rng(seed)
    quality = rng.integers(1, 6, size=items)
    noise = rng.integers(-1, 2, size=(raters, items))
    data = np.clip(quality + noise, 1, 5).astype(float)
    data[rng.random((raters, items)) < missing] = np.nan
    out: np.ndarray = data
    return out


def _rows(data: np.ndarray, criterion: str = "harmlessness") -> list[ScoreRow]:
    """ScoreRows of a (raters, items) matrix: item u is (model m_u, instance i_u); NaN is
    a rater who did not rate it; rater 0 says N/A on item 0."""
    out = []
    for r, scores in enumerate(data):
        for u, score in enumerate(scores):
            if np.isnan(score):
                continue
            out.append(
                ScoreRow(f"human/r{r}", f"m{u % 3}", "", f"i{u // 3}", criterion, float(score))
            )
    return out


def _alpha(report_alpha: list[RaterAgreement], criterion: str, metric: str) -> float | None:
    (row,) = [a for a in report_alpha if a.criterion == criterion and a.metric == metric]
    return row.alpha


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("metric", [ORDINAL, INTERVAL])
def test_alpha_equals_the_krippendorff_package(seed: int, metric: str) -> None:
    data = generated(seed, raters=2 + seed % 4, items=30 + 7 * seed)
    got = people_report(_rows(data), NO_BOOTSTRAP)
    assert got is not None
    want = kalpha(data, metric)
    alpha = _alpha(got.agreement, "all", metric)
    assert alpha is not None and abs(alpha - want) < TOL
    # one criterion: its row would be the overall one
    assert {a.criterion for a in got.agreement} == {"all"}
    pairable = int(np.sum(np.sum(~np.isnan(data), axis=0) >= 2))
    assert got.items_multi == pairable
    (row,) = [a for a in got.agreement if a.criterion == "all" and a.metric == metric]
    assert row.items == pairable and row.raters == data.shape[0]


def test_alpha_per_criterion_pools_its_items_only() -> None:
    first, second = generated(10), generated(11)
    rows = _rows(first, "correctness") + _rows(second, "harmlessness")
    got = people_report(rows, NO_BOOTSTRAP)
    assert got is not None
    for data, criterion in ((first, "correctness"), (second, "harmlessness")):
        want = kalpha(data, ORDINAL)
        assert abs(_alpha(got.agreement, criterion, ORDINAL) - want) < TOL  # type: ignore[operator]
    both = np.concatenate([first, second], axis=1)
    want = kalpha(both, INTERVAL)
    assert abs(_alpha(got.agreement, "all", INTERVAL) - want) < TOL  # type: ignore[operator]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.lists(st.one_of(st.none(), st.integers(1, 5)), min_size=3, max_size=3),
        min_size=2,
        max_size=25,
    ),
    st.sampled_from([NOMINAL, ORDINAL, INTERVAL]),
)
def test_alpha_property(units: list[list[int | None]], metric: str) -> None:
    data = np.array([[np.nan if v is None else v for v in u] for u in units], dtype=float).T
    values = np.unique(data[~np.isnan(data)])
    if len(values) < 2:  # krippendorff refuses one value; alpha is undefined
        return
    counts = np.stack([(data == v).sum(axis=0) for v in values], axis=1).astype(float)
    got = alpha_replicates(counts, values, metric)[0]
    if (counts.sum(axis=1) >= 2).sum() == 0:
        assert np.isnan(got)
        return
    want = kalpha(data, metric)
    if np.isnan(want):
        assert np.isnan(got)
    else:
        assert abs(got - want) < TOL


def _pairs(seed: int, n: int = 60) -> tuple[np.ndarray, list[ScoreRow]]:
    """Judge 'j' (two samples) and three raters with missing ratings and N/A."""
    rng = np.random.default_rng(seed)
    quality = rng.integers(1, 6, size=n)
    rows = []
    for u in range(n):
        item = (f"m{u % 4}", "", f"i{u // 4}", ["correctness", "conciseness"][u % 2])
        for k in (1, 2):
            score = float(np.clip(quality[u] + rng.integers(-1, 2), 1, 5))
            rows.append(ScoreRow(f"j#{k}", *item, None if u == 5 else score))
        for r in range(3):
            if rng.random() < 0.3:
                continue
            score = float(np.clip(quality[u] + rng.integers(-2, 2), 1, 5))
            rows.append(ScoreRow(f"human/r{r}", *item, None if (u + r) % 13 == 0 else score))
    return quality, rows


def _both(rows: list[ScoreRow]) -> tuple[np.ndarray, np.ndarray, list[tuple[str, ...]]]:
    """The judge's mean over samples and the people's mean, per item both scored."""
    judge: dict[tuple[str, ...], list[float]] = {}
    people: dict[tuple[str, ...], list[float]] = {}
    for r in rows:
        if r.score is None:
            continue
        key = (r.model, r.model_b, r.instance, r.criterion)
        (people if r.judge.startswith("human/") else judge).setdefault(key, []).append(r.score)
    keys = sorted(set(judge) & set(people))
    return (
        np.array([np.mean(judge[k]) for k in keys]),
        np.array([np.mean(people[k]) for k in keys]),
        keys,
    )


@pytest.mark.parametrize("seed", range(5))
def test_judge_versus_people_equals_scipy(seed: int) -> None:
    _, rows = _pairs(seed)
    settings_ = PeopleSettings(replicates=0, judge_of=lambda n: n.split("#")[0])
    got = people_report(rows, settings_)
    assert got is not None
    a, b, keys = _both(rows)
    checks = {"all": np.ones(len(keys), bool)}
    checks["correctness"] = np.array([k[3] == "correctness" for k in keys])
    checks["m1"] = np.array([k[0] == "m1" for k in keys])
    for key, sel in checks.items():
        (row,) = [v for v in got.versus if v.judge == "j" and v.key == key]
        assert row.n == sel.sum()
        assert abs(row.pearson - stats.pearsonr(a[sel], b[sel]).statistic) < TOL
        assert abs(row.spearman - stats.spearmanr(a[sel], b[sel]).statistic) < TOL  # type: ignore[operator]
        tau = stats.kendalltau(a[sel], b[sel]).statistic
        assert abs(row.kendall_tau_b - tau) < TOL  # type: ignore[operator]
        assert row.within1 == pytest.approx(np.mean(np.abs(a[sel] - b[sel]) <= 1), abs=TOL)


def test_means_and_intervals() -> None:
    _, rows = _pairs(3)
    got = people_report(
        rows,
        PeopleSettings(replicates=200, ability_of={"correctness": "logical"}),
    )
    assert got is not None
    people: dict[tuple[str, ...], list[float]] = {}
    for r in rows:
        if r.judge.startswith("human/") and r.score is not None:
            people.setdefault((r.model, r.model_b, r.instance, r.criterion), []).append(r.score)
    overall = np.mean([np.mean(v) for v in people.values()])
    (row,) = [m for m in got.means if m.dimension == "overall"]
    assert row.mean == pytest.approx(overall, abs=TOL)
    assert row.ci is not None and row.ci[0] < overall < row.ci[1]
    logical = [m for m in got.means if m.dimension == "ability"]
    assert [m.key for m in logical] == ["logical"]
    for v in got.versus:
        if v.pearson_ci is not None:
            assert -1 <= v.pearson_ci[0] <= v.pearson_ci[1] <= 1
    gaps = [abs(d.gap) for d in got.disagreements if d.judge == "j#1"]
    assert gaps and gaps == sorted(gaps, reverse=True) and min(gaps) > 1
    for d in got.disagreements:
        assert d.gap == pytest.approx(d.judge_value - d.people_value)


def test_same_ratings_in_any_order_give_the_same_section() -> None:
    _, rows = _pairs(4)
    one = people_report(rows, PeopleSettings(replicates=100))
    two = people_report(list(reversed(rows)), PeopleSettings(replicates=100))
    assert one is not None and two is not None
    assert one.as_dict() == two.as_dict()


def test_no_people_no_section() -> None:
    rows = [ScoreRow("j", "m", "", "1", "c", 3.0), ScoreRow("human/a", "m", "", "1", "c", None)]
    assert people_report(rows) is None


def random_tables(seed: int, k: int, b: int = 30) -> np.ndarray:
    rng = np.random.default_rng(seed)
    tables = rng.integers(0, 4, size=(b, k, k)).astype(float)
    tables[0] = 0
    tables[1] = 0
    tables[1, 2, 0] = 5  # one pair value: undefined
    return tables


@pytest.mark.parametrize("seed", range(4))
def test_batched_statistics_equal_the_one_table_ones(seed: int) -> None:
    k = 3 + seed
    values = np.sort(np.random.default_rng(seed).choice(np.arange(1, 5.5, 0.5), k, False))
    tables = random_tables(seed, k)
    got = np.stack(
        [
            pearson(values, values, tables),
            spearman(tables),
            kendall_tau_b(tables),
            within(values, tables),
        ]
    )
    for b, table in enumerate(tables.astype(np.int64)):
        want = from_contingency(values, table)
        names = ("pearson", "spearman", "kendall_tau_b", "within1")
        for row, name in enumerate(names):
            w = want.get(name)
            if w is None:
                assert np.isnan(got[row, b])
            else:
                assert abs(got[row, b] - w) < TOL


def _verdict_rows() -> list[ScoreRow]:
    a, b, t = VERDICT_FIRST, VERDICT_SECOND, VERDICT_TIE
    people = {  # item: the raters' verdicts; the judge's
        "1": ((a, a, b), a),
        "2": ((b, b), b),
        "3": ((t, t, a), a),
        "4": ((a, b), a),  # an even split: left out
        "5": ((b,), a),
        "6": ((t,), t),
    }
    rows = []
    for iid, (verdicts, judge) in people.items():
        for r, v in enumerate(verdicts):
            rows.append(ScoreRow(f"human/r{r}", "x", "y", iid, "preference", float(v)))
        rows.append(ScoreRow("j", "x", "y", iid, "preference", float(judge)))
    return rows


def test_pairwise_agreement_with_the_majority() -> None:
    got = people_report(_verdict_rows(), NO_BOOTSTRAP, pairwise=True)
    assert got is not None and got.kind == "pairwise"
    (overall,) = [v for v in got.verdicts if v.dimension == "overall"]
    # items 1, 2, 3, 5, 6 have a majority; the judge agrees on 1, 2, 6
    assert overall.n == 5 and overall.agreement == pytest.approx(3 / 5)
    # without ties: items 1, 2, 5 (3 and 6 have a tie on a side)
    assert overall.n_decisive == 3 and overall.agreement_decisive == pytest.approx(2 / 3)
    assert [d.item.instance for d in got.disagreements] == ["5", "3"]
    assert [d.gap for d in got.disagreements] == [2.0, 1.0]
    assert any("even split" in n for n in got.notes)
    data = np.full((3, 6), np.nan)
    for r in _verdict_rows():
        if r.judge.startswith("human/"):
            data[int(r.judge[-1]), int(r.instance) - 1] = r.score  # type: ignore[assignment]
    want = kalpha(data, NOMINAL)
    assert abs(_alpha(got.agreement, "all", NOMINAL) - want) < TOL  # type: ignore[operator]


def test_bootstrap_interval_covers_the_population_correlation() -> None:
    """Coverage of the 95% percentile interval of Pearson's r, judge against people,
    over simulated data sets with a known population correlation (a loose bound: the
    script bench/people_coverage.py prints the figure over more data sets)."""
    _, shares = coverage(datasets=60, replicates=300, seed=1)
    assert min(shares.values()) >= 0.88, shares


def test_simulated_rows_are_people_and_a_judge() -> None:
    rows = correlated_rows(np.random.default_rng(0), instances=10)
    assert {r.judge for r in rows} >= {"judge", "human/a", "human/b"}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 5),
            st.lists(st.one_of(st.none(), st.integers(1, 5)), min_size=1, max_size=3),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_versus_property(items: list[tuple[int, list[int | None]]]) -> None:
    """Any ratings (N/A included): each coefficient is scipy's on the items both scored,
    None where scipy's is undefined (NaN)."""
    rows = []
    for u, (judged, rated) in enumerate(items):
        key = ("m", "", f"i{u}", "c")
        rows.append(ScoreRow("j", *key, float(judged)))
        rows += [
            ScoreRow(f"human/r{r}", *key, None if v is None else float(v))
            for r, v in enumerate(rated)
        ]
    got = people_report(rows, NO_BOOTSTRAP)
    both = [(j, np.mean([v for v in r if v is not None])) for j, r in items if any(r)]
    if not both:
        assert got is None
        return
    assert got is not None
    (row,) = [v for v in got.versus if v.key == "all"]
    a, b = np.array(both, dtype=float).T
    assert row.n == len(a)
    for mine, fn in (
        (row.pearson, stats.pearsonr),
        (row.spearman, stats.spearmanr),
        (row.kendall_tau_b, stats.kendalltau),
    ):
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")  # scipy's: a constant input
            want = float(fn(a, b).statistic) if len(a) >= 2 else float("nan")
        if np.isnan(want):
            assert mine is None
        else:
            assert mine is not None and abs(mine - want) < TOL
