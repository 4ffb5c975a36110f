"""Paired comparisons of two sets of scores on the same units, and the control of the
error across a family of them (pure). docs/design/compare.md says what they assume."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt
from scipy import optimize, stats

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: the ways to control the error across a family of tests
HOLM, BH = "holm", "bh"
METHODS = (HOLM, BH)


@dataclass(frozen=True)
class PairedTest:
    """NEW against BASE on ``n`` paired units (undefined figures are NaN)."""

    n: int  # paired units (instances)
    base: float  # BASE's mean over the units
    new: float  # NEW's mean over the units
    effect: float  # NEW - BASE: the mean paired difference
    low: float  # its confidence interval (Student's t, n - 1 degrees of freedom)
    high: float
    se: float  # its standard error
    p_value: float  # two-sided, H0: effect = 0
    p_regression: float  # one-sided, H0: effect >= -min_effect (no drop of min_effect)
    mde: float  # the smallest |effect| a two-sided test at ``alpha`` detects with ``power``


NAN = float("nan")


def unit_means(values: FloatArray, units: IntArray) -> tuple[IntArray, FloatArray]:
    """The units present (sorted) and the mean of ``values`` in each."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    u = np.asarray(units).reshape(-1)
    if len(v) != len(u):
        raise ValueError("values and units must have the same length")
    present, inverse = np.unique(u, return_inverse=True)
    inverse = inverse.reshape(-1)
    sums = np.bincount(inverse, weights=v, minlength=len(present))
    counts = np.bincount(inverse, minlength=len(present))
    return present.astype(np.int64), (sums / np.maximum(counts, 1)).astype(np.float64)


@lru_cache(maxsize=1024)
def _mde_in_sd(n: int, alpha: float, power: float) -> float:
    """The standardised effect (in standard deviations of the differences) that a
    two-sided one-sample t-test on ``n`` values at level ``alpha`` rejects with
    probability ``power``: by the noncentral t, both tails counted."""
    df = n - 1
    crit = float(stats.t.isf(alpha / 2, df))
    root_n = np.sqrt(n)

    def shortfall(delta: float) -> float:
        nc = delta * root_n
        upper = float(stats.nct.sf(crit, df, nc))
        # the far tail is negligible (scipy's noncentral t returns NaN when it underflows)
        lower = float(np.nan_to_num(stats.nct.cdf(-crit, df, nc)))
        reject = upper + lower
        return reject - power

    if shortfall(0.0) >= 0:  # the level alone rejects that often
        return 0.0
    high = 1.0
    while shortfall(high) < 0:
        high *= 2
        if high > 1e6:
            return NAN
    return float(optimize.brentq(shortfall, 0.0, high, xtol=1e-12, rtol=1e-12))


def paired_test(
    base: FloatArray,
    new: FloatArray,
    *,
    confidence: float = 0.95,
    min_effect: float = 0.0,
    alpha: float = 0.05,
    power: float = 0.8,
) -> PairedTest:
    """The paired t-test of ``new - base`` (one value per unit, aligned).

    ``p_value`` is two-sided (H0: no effect), as :func:`scipy.stats.ttest_rel`'s;
    ``p_regression`` one-sided, H0: the effect is at least ``-min_effect`` against a drop
    of more than ``min_effect`` (small when NEW is worse than BASE by more than it).
    ``mde`` is the smallest |effect| the two-sided test at ``alpha`` detects with
    probability ``power`` on these ``n`` units (the noncentral t, with the observed
    standard deviation of the differences). Fewer than two units: NaN figures. Identical
    differences: p-values of 0 or 1 (the effect is known exactly), an ``mde`` of 0.
    """
    for name, value in (("confidence", confidence), ("alpha", alpha), ("power", power)):
        if not 0 < value < 1:
            raise ValueError(f"{name} must be in (0, 1)")
    b = np.asarray(base, dtype=np.float64).reshape(-1)
    a = np.asarray(new, dtype=np.float64).reshape(-1)
    if len(a) != len(b):
        raise ValueError("base and new need one value per unit each, aligned")
    n = len(a)
    if n == 0:
        return PairedTest(0, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN)
    d = a - b
    effect = float(d.mean())
    means = (float(b.mean()), float(a.mean()))
    if n < 2:
        return PairedTest(n, *means, effect, NAN, NAN, NAN, NAN, NAN, NAN)
    sd = float(d.std(ddof=1))
    df = n - 1
    if sd == 0:
        p = 1.0 if effect == 0 else 0.0
        p_reg = 1.0 if effect >= -min_effect else 0.0
        return PairedTest(n, *means, effect, effect, effect, 0.0, p, p_reg, 0.0)
    se = sd / np.sqrt(n)
    half = float(stats.t.ppf(0.5 + confidence / 2, df)) * se
    p = float(2 * stats.t.sf(abs(effect) / se, df))
    p_reg = float(stats.t.cdf((effect + min_effect) / se, df))
    mde = _mde_in_sd(n, float(alpha), float(power)) * sd
    return PairedTest(
        n=n,
        base=means[0],
        new=means[1],
        effect=effect,
        low=effect - half,
        high=effect + half,
        se=float(se),
        p_value=min(p, 1.0),
        p_regression=p_reg,
        mde=mde,
    )


def adjust(p_values: Sequence[float], method: str = HOLM) -> list[float]:
    """Adjusted p-values of a family: Holm's step-down (family-wise error) or
    Benjamini-Hochberg's step-up (false discovery rate); NaN stays NaN, out of the family."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}")
    p = np.asarray(p_values, dtype=np.float64).reshape(-1)
    out = np.full(len(p), np.nan)
    live = np.flatnonzero(~np.isnan(p))
    m = len(live)
    if m == 0:
        return out.tolist()
    q = p[live]
    if np.any((q < 0) | (q > 1)):
        raise ValueError("p-values must be in [0, 1]")
    order = np.argsort(q, kind="stable")
    ranked = q[order]
    rank = np.arange(1, m + 1)
    if method == HOLM:
        adjusted = np.maximum.accumulate(np.minimum((m - rank + 1) * ranked, 1.0))
    else:
        adjusted = np.minimum.accumulate((m / rank * ranked)[::-1])[::-1]
        adjusted = np.minimum(adjusted, 1.0)
    result = np.empty(m)
    result[order] = adjusted
    out[live] = result
    return [float(x) for x in out]
