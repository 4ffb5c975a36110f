"""Prediction-powered inference of a mean: equal to `ppi_py` (estimate and standard error,
tuned and plain), cluster-robust variances equal to statsmodels' sandwich and to the iid
formula with one cell per instance, weights, small data, and the interval's coverage."""

from __future__ import annotations

import numpy as np
import ppi_py
import pytest
import statsmodels.api as sm
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from flask_eval.report.ppi import IN_SAMPLE, MeanEstimate, Tuning, ppi_mean

TOL = 1e-9
Z95 = float(stats.norm.ppf(0.975))


def _data(
    rng: np.random.Generator, n: int, big_n: int, bias: float = 0.4
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """People's labels and a biased, noisy judge correlated with them."""
    y = rng.normal(3.0, 1.0, n)
    f = 0.7 * y + bias + rng.normal(0, 0.8, n)
    fu = 0.7 * rng.normal(3.0, 1.0, big_n) + bias + rng.normal(0, 0.8, big_n)
    return y, f, fu


def _ppi_py(y: np.ndarray, f: np.ndarray, fu: np.ndarray, lam: float | None) -> tuple[float, float]:
    """ppi_py's point estimate and standard error (its normal interval's half-width / z;
    ``lam=None``: its tuned lambda)."""
    point = float(np.ravel(ppi_py.ppi_mean_pointestimate(y, f, fu, lam=lam))[0])
    low, high = ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05, lam=lam)
    return point, float(np.ravel(high - low)[0]) / 2 / Z95


def _cluster_cov(z: np.ndarray, x: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """statsmodels' cluster-robust covariance of OLS coefficients (no small-sample factor)."""
    fit = sm.OLS(z, x).fit(cov_type="cluster", cov_kwds={"groups": groups, "use_correction": False})
    return np.asarray(fit.cov_params())


@pytest.mark.parametrize("lam", [IN_SAMPLE, 1.0])
@pytest.mark.parametrize("seed", range(6))
def test_equals_ppi_py(lam: float | Tuning, seed: int) -> None:
    rng = np.random.default_rng(seed)
    y, f, fu = _data(rng, int(rng.integers(5, 120)), int(rng.integers(10, 2000)))
    got = ppi_mean(y, f, fu, lam=lam)
    point, se = _ppi_py(y, f, fu, None if lam == IN_SAMPLE else float(lam))
    assert abs(got.estimate - point) < TOL
    assert abs(got.se - se) < TOL
    if lam == IN_SAMPLE:
        assert 0 <= got.lam <= 1
        assert got.lam not in (0.0, 1.0)  # tuned, not clipped, on these data
    q = stats.t.ppf(0.975, len(y) - 1)
    assert got.low == pytest.approx(got.estimate - q * got.se, abs=TOL)
    assert got.high == pytest.approx(got.estimate + q * got.se, abs=TOL)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 5), st.integers(1, 5)), min_size=3, max_size=40),
    st.lists(st.integers(1, 5), min_size=2, max_size=80),
    st.sampled_from([IN_SAMPLE, 1.0]),
)
def test_equals_ppi_py_on_likert_scores(
    labelled: list[tuple[int, int]], unlabelled: list[int], lam: float | Tuning
) -> None:
    y = np.array([a for a, _ in labelled], dtype=float)
    f = np.array([b for _, b in labelled], dtype=float)
    fu = np.array(unlabelled, dtype=float)
    if np.var(np.concatenate([f, fu])) == 0:  # ppi_py divides by the judge's variance
        return
    got = ppi_mean(y, f, fu, lam=lam)
    point, se = _ppi_py(y, f, fu, None if lam == IN_SAMPLE else float(lam))
    assert abs(got.estimate - point) < TOL
    assert abs(got.se - se) < TOL
    assert got.low <= got.estimate <= got.high


def test_weighted_estimate_is_ppi_py_weighted_and_hajek() -> None:
    rng = np.random.default_rng(7)
    y, f, fu = _data(rng, 50, 400)
    w = rng.uniform(0.5, 4.0, 50)
    got = ppi_mean(y, f, fu, lam=1.0, weights=w)
    want = float(np.ravel(ppi_py.ppi_mean_pointestimate(y, f, fu, lam=1, w=w))[0])
    assert abs(got.estimate - want) < TOL
    assert abs(got.classical - np.sum(w * y) / np.sum(w)) < TOL


def test_one_cell_per_instance_is_the_iid_formula() -> None:
    rng = np.random.default_rng(11)
    y, f, fu = _data(rng, 40, 300)
    iid = ppi_mean(y, f, fu)
    labels = rng.permutation(10_000)[:340] * 3 - 500  # any distinct instance ids
    grouped = ppi_mean(y, f, fu, groups_labelled=labels[:40], groups_unlabelled=labels[40:])
    for a, b in zip(_figures(iid), _figures(grouped), strict=True):
        assert a == pytest.approx(b, abs=TOL)


def _figures(e: MeanEstimate) -> list[float]:
    return [e.estimate, e.se, e.low, e.high, e.classical, e.classical_low, e.lam, e.ess]


def _clustered(
    rng: np.random.Generator, instances: int, cells: int, labelled: int
) -> tuple[np.ndarray, ...]:
    """Instances with a shared effect on their cells' labels and scores; the people labelled
    every cell of the first ``labelled`` instances."""
    effect = np.repeat(rng.normal(0, 1, instances), cells)
    y = 3 + effect + rng.normal(0, 0.6, instances * cells)
    f = 0.8 * y + 0.5 + 0.5 * np.repeat(rng.normal(0, 1, instances), cells)
    f = f + rng.normal(0, 0.5, instances * cells)
    g = np.repeat(np.arange(instances), cells)
    cut = labelled * cells
    return y[:cut], f[:cut], f[cut:], g[:cut], g[cut:]


def test_cluster_variances_equal_statsmodels_sandwich() -> None:
    rng = np.random.default_rng(3)
    y, f, fu, gl, gu = _clustered(rng, 120, 3, 30)
    got = ppi_mean(y, f, fu, lam=IN_SAMPLE, groups_labelled=gl, groups_unlabelled=gu)
    ones = np.ones((len(y), 1))
    assert got.classical_se**2 == pytest.approx(_cluster_cov(y, ones, gl)[0, 0], rel=1e-9)
    rectifier = _cluster_cov(y - got.lam * f, ones, gl)[0, 0]
    judge = _cluster_cov(fu, np.ones((len(fu), 1)), gu)[0, 0]
    assert got.se**2 == pytest.approx(rectifier + got.lam**2 * judge, rel=1e-9)
    assert got.df == 29  # labelled instances - 1
    iid = ppi_mean(y, f, fu)
    assert got.se > iid.se  # the instances' correlation is not ignored


def test_instances_on_both_sides_carry_their_covariance() -> None:
    """Some cells of an instance labelled, others not: the variance of the estimate is the
    sandwich of the two means jointly (a stacked regression with one mean per side)."""
    rng = np.random.default_rng(5)
    y_all, f_all, _, g_all, _ = _clustered(rng, 80, 4, 80)
    mask = rng.uniform(size=len(y_all)) < 0.3
    y, f, gl = y_all[mask], f_all[mask], g_all[mask]
    fu, gu = f_all[~mask], g_all[~mask]
    got = ppi_mean(y, f, fu, lam=0.6, groups_labelled=gl, groups_unlabelled=gu)
    z = np.concatenate([y - 0.6 * f, fu])
    x = np.zeros((len(z), 2))
    x[: len(y), 0] = 1
    x[len(y) :, 1] = 1
    cov = _cluster_cov(z, x, np.concatenate([gl, gu]))
    assert got.se**2 == pytest.approx(cov[0, 0] + 0.36 * cov[1, 1] + 1.2 * cov[0, 1], rel=1e-9)


def test_weighted_cluster_variance_equals_statsmodels_wls() -> None:
    rng = np.random.default_rng(9)
    y, f, fu, gl, gu = _clustered(rng, 100, 2, 40)
    w = np.repeat(rng.uniform(1, 5, 40), 2)
    got = ppi_mean(y, f, fu, groups_labelled=gl, groups_unlabelled=gu, weights=w)
    fit = sm.WLS(y, np.ones((len(y), 1)), weights=w).fit(
        cov_type="cluster", cov_kwds={"groups": gl, "use_correction": False}
    )
    assert got.classical == pytest.approx(float(fit.params[0]), abs=TOL)
    assert got.classical_se == pytest.approx(float(fit.bse[0]), rel=1e-9)


def test_uniform_weights_change_nothing() -> None:
    rng = np.random.default_rng(13)
    y, f, fu, gl, gu = _clustered(rng, 60, 3, 20)
    for groups in ((None, None), (gl, gu)):
        plain = ppi_mean(y, f, fu, groups_labelled=groups[0], groups_unlabelled=groups[1])
        weighted = ppi_mean(
            y,
            f,
            fu,
            groups_labelled=groups[0],
            groups_unlabelled=groups[1],
            weights=np.full(60, 3.7),
        )
        for a, b in zip(_figures(plain), _figures(weighted), strict=True):
            assert a == pytest.approx(b, abs=TOL)


def test_without_the_judge_it_is_the_people_mean() -> None:
    rng = np.random.default_rng(17)
    y, f, fu = _data(rng, 30, 200)
    zero = ppi_mean(y, f, fu, lam=0.0)
    assert zero.estimate == pytest.approx(float(y.mean()), abs=TOL)
    assert (zero.low, zero.high) == pytest.approx((zero.classical_low, zero.classical_high))
    assert zero.ess == pytest.approx(30)
    all_labelled = ppi_mean(y, f, np.array([]), lam=1.0)
    assert all_labelled.lam == 0 and all_labelled.estimate == pytest.approx(float(y.mean()))
    constant = ppi_mean(y, np.full(30, 4.0), np.full(200, 4.0))
    assert constant.lam == 0 and constant.estimate == pytest.approx(float(y.mean()))


def test_small_data_give_nan_not_an_exception() -> None:
    empty = ppi_mean(np.array([]), np.array([]), np.array([2.0, 3.0]))
    assert empty.labelled == 0 and empty.unlabelled == 2 and empty.raw == 2.5
    assert np.isnan([empty.estimate, empty.se, empty.low, empty.classical, empty.ess]).all()
    one = ppi_mean(np.array([4.0]), np.array([3.0]), np.array([2.0, 3.0]), lam=1.0)
    assert one.estimate == pytest.approx(3.5)
    assert np.isnan([one.se, one.low, one.high, one.classical_low, one.ess]).all()
    one_instance = ppi_mean(
        np.array([4.0, 5.0]),
        np.array([3.0, 4.0]),
        np.array([2.0]),
        groups_labelled=np.array([7, 7]),
    )
    assert np.isnan([one_instance.se, one_instance.low]).all()
    nothing = ppi_mean(np.array([]), np.array([]), np.array([]))
    assert np.isnan([nothing.raw, nothing.estimate]).all()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"f_labelled": np.ones(3)},
        {"weights": np.array([1.0, -1.0, 1.0, 1.0])},
        {"weights": np.ones(3)},
        {"weights": np.zeros(4)},
        {"groups_labelled": np.arange(3)},
        {"groups_unlabelled": np.arange(3)},
        {"confidence": 1.0},
        {"lam": "tuned"},
        {"lam": float("nan")},
    ],
)
def test_bad_inputs_raise_value_error(kwargs: dict[str, object]) -> None:
    args: dict[str, object] = {
        "y_labelled": np.ones(4),
        "f_labelled": np.ones(4),
        "f_unlabelled": np.ones(5),
    }
    args.update(kwargs)
    with pytest.raises(ValueError):
        ppi_mean(**args)  # type: ignore[arg-type]


def test_interval_covers_the_people_mean_where_the_judge_alone_does_not() -> None:
    """400 seeded draws of 60 labels and 600 biased judge scores: the PPI++ interval covers
    the people's mean at 95% within binomial error; the judge's own interval hardly ever."""
    rng = np.random.default_rng(2026)
    reps, covered, judge_covered, narrower = 400, 0, 0, 0
    for _ in range(reps):
        y, f, fu = _data(rng, 60, 600, bias=0.4)
        e = ppi_mean(y, f, fu)
        covered += e.low <= 3.0 <= e.high
        f_all = np.concatenate([f, fu])
        half = stats.t.ppf(0.975, len(f_all) - 1) * f_all.std(ddof=1) / np.sqrt(len(f_all))
        judge_covered += abs(e.raw - 3.0) <= half
        narrower += e.high - e.low < e.classical_high - e.classical_low
    error = 3 * np.sqrt(0.95 * 0.05 / reps)
    assert abs(covered / reps - 0.95) <= error
    assert judge_covered / reps < 0.05
    assert narrower / reps > 0.9  # the judge's scores buy precision


def test_cluster_interval_covers_where_the_iid_one_does_not() -> None:
    """Three correlated cells per instance, 30 of 200 instances labelled: the cluster-robust
    interval keeps its coverage, the one that takes cells as independent falls short."""
    rng = np.random.default_rng(4)
    reps, covered, iid_covered = 300, 0, 0
    for _ in range(reps):
        y, f, fu, gl, gu = _clustered(rng, 200, 3, 30)
        e = ppi_mean(y, f, fu, groups_labelled=gl, groups_unlabelled=gu)
        covered += e.low <= 3.0 <= e.high
        iid = ppi_mean(y, f, fu)
        iid_covered += iid.low <= 3.0 <= iid.high
    error = 3 * np.sqrt(0.95 * 0.05 / reps)
    assert abs(covered / reps - 0.95) <= error
    assert iid_covered / reps < 0.95 - error


def test_weighted_labels_against_the_judge_mean_over_every_cell() -> None:
    """Labels drawn with probabilities that follow the judge's score: set against the
    judge's mean over every cell (labelled ones passed on both sides, with their
    instances), the weighted estimate covers the people's mean."""
    rng = np.random.default_rng(21)
    reps, covered, cells = 300, 0, 600
    for _ in range(reps):
        y = rng.normal(3.0, 1.0, cells)
        f = 0.8 * y + 0.5 + rng.normal(0, 0.5, cells)
        p = np.clip(0.03 + 0.05 * (f - f.min()) / np.ptp(f), 0, 1)  # high scores drawn more
        lab = rng.uniform(size=cells) < p
        every = np.arange(cells)
        e = ppi_mean(
            y[lab],
            f[lab],
            f,
            groups_labelled=every[lab],
            groups_unlabelled=every,
            weights=1 / p[lab],
        )
        covered += e.low <= 3.0 <= e.high
    error = 3 * np.sqrt(0.95 * 0.05 / reps)
    assert abs(covered / reps - 0.95) <= error
