"""Paired comparisons: equal to scipy's paired t-test and interval, statsmodels' power and
multiple-testing adjustments, on random data; the degenerate cases; and an A/A simulation
in which Holm keeps the family's false alarms at the level."""

from __future__ import annotations

import itertools
from collections import defaultdict
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower, ttest_power

from flask_eval.report.paired import BH, HOLM, adjust, paired_test, unit_means

TOL = 1e-9
SM_METHOD = {HOLM: "holm", BH: "fdr_bh"}


def _statsmodels_adjusted(p: np.ndarray, method: str) -> np.ndarray:
    """statsmodels' adjusted p-values (its Holm runs a full garbage collection per call,
    tenths of a second in a test process: skipped, it changes no figure)."""
    with mock.patch("gc.collect", return_value=0):
        return np.asarray(multipletests(p, method=SM_METHOD[method])[1])


def _statsmodels_effect_size(n: int, alpha: float, power: float) -> float:
    """statsmodels' standardised effect for a two-sided one-sample t-test, its root
    finder's tolerance tightened from 1e-5 to 1e-13."""
    solver = TTestPower()
    solver.start_bqexp = defaultdict(dict, solver.start_bqexp)
    solver.start_bqexp["effect_size"] = {"xtol": 1e-13}
    return float(solver.solve_power(nobs=n, alpha=alpha, power=power, alternative="two-sided"))


def _power_by_quadrature(effect_size: float, n: int, alpha: float) -> float:
    """The two-sided one-sample t-test's power, integrated over the chi-square of the
    variance (independent of scipy's noncentral t)."""
    df, nc = n - 1, effect_size * np.sqrt(n)
    crit = float(stats.t.isf(alpha / 2, df))

    def reject(x: float) -> float:
        s = crit * np.sqrt(x / df)
        tails = stats.norm.sf(s - nc) + stats.norm.cdf(-s - nc)
        return float(stats.chi2.pdf(x, df) * tails)

    return float(integrate.quad(reject, 0, np.inf, limit=200)[0])


def test_unit_means_per_sorted_unit() -> None:
    rng = np.random.default_rng(0)
    units = rng.choice(np.array([-3, 4, 9, 12, 40]), size=200)
    values = rng.normal(size=200)
    got_units, got_means = unit_means(values, units)
    want = sorted(set(units.tolist()))
    assert got_units.tolist() == want
    for unit, mean in zip(want, got_means.tolist(), strict=True):
        assert mean == pytest.approx(float(values[units == unit].mean()), abs=TOL)
    with pytest.raises(ValueError):
        unit_means(values, units[:-1])


@pytest.mark.parametrize("seed", range(8))
def test_equals_scipy_paired_t(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 300))
    base = rng.normal(3, 1, n)
    new = base + rng.normal(float(rng.normal(0, 0.2)), 0.5, n)
    confidence = float(rng.choice([0.8, 0.9, 0.95, 0.99]))
    min_effect = float(rng.uniform(0, 0.3))
    got = paired_test(base, new, confidence=confidence, min_effect=min_effect)
    ref = stats.ttest_rel(new, base)
    ci = ref.confidence_interval(confidence)
    d = new - base
    assert got.n == n
    assert (got.base, got.new) == pytest.approx((base.mean(), new.mean()), abs=TOL)
    assert got.effect == pytest.approx(float(d.mean()), abs=TOL)
    assert got.se == pytest.approx(float(stats.sem(d)), abs=TOL)
    assert (got.low, got.high) == pytest.approx((ci.low, ci.high), abs=TOL)
    assert got.p_value == pytest.approx(float(ref.pvalue), abs=TOL)
    one_sided = stats.ttest_1samp(d, -min_effect, alternative="less").pvalue
    assert got.p_regression == pytest.approx(float(one_sided), abs=TOL)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 5), st.integers(1, 5)),
        min_size=2,
        max_size=60,
    )
)
def test_equals_scipy_on_likert_pairs(pairs: list[tuple[int, int]]) -> None:
    base = np.array([a for a, _ in pairs], dtype=float)
    new = np.array([b for _, b in pairs], dtype=float)
    got = paired_test(base, new)
    d = new - base
    if d.std() == 0:  # scipy says NaN; the effect is known exactly
        assert got.p_value == (1.0 if d[0] == 0 else 0.0)
        assert got.mde == 0 and got.se == 0
        return
    ref = stats.ttest_rel(new, base)
    assert got.p_value == pytest.approx(float(ref.pvalue), abs=TOL)
    ci = ref.confidence_interval(0.95)
    assert (got.low, got.high) == pytest.approx((ci.low, ci.high), abs=TOL)
    assert 0 <= got.p_regression <= 1 and got.mde > 0


@pytest.mark.parametrize(
    ("n", "alpha", "power"),
    [
        (3, 0.05, 0.8),
        (5, 0.1, 0.5),
        (12, 0.05, 0.9),
        (40, 0.01, 0.8),
        (200, 0.05, 0.8),
        (2000, 0.05, 0.95),
    ],
)
def test_mde_equals_statsmodels_power(n: int, alpha: float, power: float) -> None:
    rng = np.random.default_rng(n)
    base = rng.normal(size=n)
    new = base + rng.normal(0.1, 0.7, n)
    got = paired_test(base, new, alpha=alpha, power=power)
    sd = float(np.std(new - base, ddof=1))
    assert got.mde == pytest.approx(_statsmodels_effect_size(n, alpha, power) * sd, abs=1e-6)
    # with statsmodels' default tolerance (1e-5 on the effect size) it agrees that far
    loose = TTestPower().solve_power(nobs=n, alpha=alpha, power=power, alternative="two-sided")
    assert got.mde / sd == pytest.approx(float(loose), abs=1e-4)
    assert float(ttest_power(got.mde / sd, n, alpha)) == pytest.approx(power, abs=1e-9)


@pytest.mark.parametrize(("n", "alpha", "power"), [(2, 0.05, 0.8), (2, 0.01, 0.9), (3, 0.01, 0.9)])
def test_mde_where_statsmodels_power_is_nan(n: int, alpha: float, power: float) -> None:
    """Two or three units at a strict level: scipy's noncentral t underflows to NaN in the
    far tail and statsmodels' solver stops short; the MDE still has the power asked for."""
    base = np.zeros(n)
    new = np.arange(1.0, n + 1)
    got = paired_test(base, new, alpha=alpha, power=power)
    sd = float(np.std(new, ddof=1))
    assert _power_by_quadrature(got.mde / sd, n, alpha) == pytest.approx(power, abs=1e-7)


def test_degenerate_cases() -> None:
    none = paired_test(np.array([]), np.array([]))
    assert none.n == 0 and np.isnan([none.effect, none.p_value, none.mde]).all()
    one = paired_test(np.array([2.0]), np.array([3.0]))
    assert one.n == 1 and one.effect == 1.0
    assert np.isnan([one.low, one.high, one.se, one.p_value, one.p_regression, one.mde]).all()
    same = paired_test(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.0]))
    assert (same.p_value, same.p_regression, same.mde, same.se) == (1.0, 1.0, 0.0, 0.0)
    assert (same.low, same.high) == (0.0, 0.0)
    drop = paired_test(np.array([3.0, 4.0]), np.array([2.0, 3.0]), min_effect=0.5)
    assert (drop.effect, drop.p_value, drop.p_regression, drop.mde) == (-1.0, 0.0, 0.0, 0.0)
    small_drop = paired_test(np.array([3.0, 4.0]), np.array([2.75, 3.75]), min_effect=0.5)
    assert (small_drop.p_value, small_drop.p_regression) == (0.0, 1.0)
    with pytest.raises(ValueError):
        paired_test(np.ones(3), np.ones(4))
    with pytest.raises(ValueError):
        paired_test(np.ones(3), np.ones(3), confidence=0.0)


def test_regression_p_value_is_one_sided() -> None:
    rng = np.random.default_rng(5)
    base = rng.normal(3, 1, 80)
    worse = paired_test(base, base - 0.3 + rng.normal(0, 0.2, 80), min_effect=0.1)
    better = paired_test(base, base + 0.3 + rng.normal(0, 0.2, 80), min_effect=0.1)
    assert worse.p_regression < 0.001 < 0.999 < better.p_regression


@pytest.mark.parametrize("method", [HOLM, BH])
@pytest.mark.parametrize("seed", range(6))
def test_adjust_equals_statsmodels(method: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 40))
    p = rng.uniform(size=m) ** 3
    p[rng.uniform(size=m) < 0.2] = p[0]  # ties
    got = adjust(p.tolist(), method)
    want = _statsmodels_adjusted(p, method)
    assert np.allclose(got, want, rtol=0, atol=TOL)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.floats(0, 1)), min_size=0, max_size=30),
    st.sampled_from([HOLM, BH]),
)
def test_adjust_leaves_nan_out_of_the_family(values: list[float | None], method: str) -> None:
    p = [float("nan") if v is None else v for v in values]
    got = adjust(p, method)
    assert len(got) == len(p)
    live = [i for i, v in enumerate(values) if v is not None]
    assert all(np.isnan(got[i]) for i in range(len(p)) if i not in live)
    if live:
        want = _statsmodels_adjusted(np.array([p[i] for i in live]), method)
        assert np.allclose([got[i] for i in live], want, rtol=0, atol=TOL)
        assert all(p[i] <= got[i] + TOL <= 1 + TOL for i in live)
        ordered = sorted(live, key=lambda i: p[i])
        assert all(got[a] <= got[b] + TOL for a, b in itertools.pairwise(ordered))


def test_adjust_refuses_unknown_methods_and_values() -> None:
    with pytest.raises(ValueError):
        adjust([0.1], "bonferroni")
    with pytest.raises(ValueError):
        adjust([1.5])
    assert adjust([]) == []


def test_a_a_family_keeps_false_alarms_at_the_level() -> None:
    """Two identical systems scored on 20 correlated criteria over 30 units, 200 seeded
    repetitions: Holm's family-wise false alarms stay at most 5% within binomial error
    (BH's too: under no real difference its false discovery rate is the family-wise one),
    where the unadjusted tests raise one far more often."""
    rng = np.random.default_rng(2026)
    reps, tests, units, alpha = 200, 20, 30, 0.05
    holm = bh = raw = 0
    for _ in range(reps):
        shared = rng.normal(size=(units, 1))
        diff = 0.7 * shared + 0.7 * rng.normal(size=(units, tests))  # correlation ~0.5
        base = rng.normal(3, 1, (units, tests))
        p = [paired_test(base[:, j], base[:, j] + diff[:, j]).p_value for j in range(tests)]
        holm += min(adjust(p, HOLM)) <= alpha
        bh += min(adjust(p, BH)) <= alpha
        raw += min(p) <= alpha
    error = 3 * np.sqrt(alpha * (1 - alpha) / reps)
    assert holm / reps <= alpha + error
    assert bh / reps <= alpha + error
    assert raw / reps > 3 * alpha
