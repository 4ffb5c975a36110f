"""The judge card's estimators (pure, numpy and scipy): a mean over independent instances
and a clustered slope or mean, each with its Student t interval and two-sided p-value.

Rows of one instance (its criteria, the models answering it) are correlated; instances are
independent. :func:`instance_mean` averages each instance's values first and runs a
one-sample t over the instance means (``instances - 1`` degrees of freedom);
:func:`clustered_slope` fits a line through the origin on every row and takes its
variance from the instances' sums of scores (CR1: statsmodels' ``OLS`` with
``cov_type='cluster'``), its t with ``instances - 1`` degrees of freedom.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import special

FloatArray = npt.NDArray[np.float64]
NAN = float("nan")


@dataclass(frozen=True)
class Estimate:
    """A number with its interval and two-sided p-value (H0: it is 0; None when it cannot
    be tested: fewer than two instances), over ``items`` rows of ``clusters`` instances."""

    value: float
    low: float
    high: float
    p_value: float | None
    items: int
    clusters: int


def _codes(clusters: Sequence[Hashable]) -> tuple[npt.NDArray[np.int64], int]:
    index: dict[Hashable, int] = {}
    codes = np.fromiter((index.setdefault(c, len(index)) for c in clusters), np.int64)
    return codes, len(index)


def _t(value: float, se: float, df: int, confidence: float) -> tuple[float, float, float]:
    """The interval and the two-sided p-value of ``value`` with standard error ``se``; a
    zero ``se`` is an exact value (p 1 when it is 0, else 0)."""
    if se == 0:
        return value, value, 1.0 if value == 0 else 0.0
    half = float(special.stdtrit(df, 0.5 + confidence / 2)) * se
    p = float(2 * special.stdtr(df, -abs(value) / se))
    return value - half, value + half, min(p, 1.0)


def _check(confidence: float, n: int, *others: int) -> None:
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    if any(m != n for m in others):
        raise ValueError("every array needs one value per row")


def instance_mean(
    values: Sequence[float] | FloatArray,
    clusters: Sequence[Hashable],
    confidence: float = 0.95,
) -> Estimate:
    """The mean of the instances' means of ``values`` (``clusters`` names each row's
    instance) with the one-sample t interval and p-value over the instance means: what
    :func:`scipy.stats.ttest_1samp` gives on them."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    _check(confidence, len(v), len(clusters))
    if len(v) == 0:
        return Estimate(NAN, NAN, NAN, None, 0, 0)
    codes, g = _codes(clusters)
    means = np.bincount(codes, weights=v, minlength=g) / np.bincount(codes, minlength=g)
    value = float(means.mean())
    if g < 2:
        return Estimate(value, NAN, NAN, None, len(v), g)
    se = float(means.std(ddof=1)) / math.sqrt(g)
    low, high, p = _t(value, se, g - 1, confidence)
    return Estimate(value, low, high, p, len(v), g)


def clustered_slope(
    y: Sequence[float] | FloatArray,
    x: Sequence[float] | FloatArray,
    clusters: Sequence[Hashable],
    confidence: float = 0.95,
) -> Estimate:
    """The least-squares slope of ``y`` on ``x`` through the origin, its cluster-robust
    (CR1) standard error by ``clusters`` and a t with ``clusters - 1`` degrees of freedom.
    With ``x`` all ones it is the mean of ``y`` (a ratio of sums when ``y`` is a count)
    with its clustered interval. NaN when every ``x`` is 0."""
    yy = np.asarray(y, dtype=np.float64).reshape(-1)
    xx = np.asarray(x, dtype=np.float64).reshape(-1)
    n = len(yy)
    _check(confidence, n, len(xx), len(clusters))
    sxx = float(xx @ xx)
    if n == 0 or sxx == 0:
        return Estimate(NAN, NAN, NAN, None, n, len(set(clusters)))
    codes, g = _codes(clusters)
    beta = float(xx @ yy) / sxx
    if g < 2 or n < 2:
        return Estimate(beta, NAN, NAN, None, n, g)
    scores = np.bincount(codes, weights=xx * (yy - beta * xx), minlength=g)
    factor = g / (g - 1)  # CR1's G/(G-1) (N-1)/(N-K) with one regressor, K = 1
    se = math.sqrt(factor * float(scores @ scores)) / sxx
    low, high, p = _t(beta, se, g - 1, confidence)
    return Estimate(beta, low, high, p, n, g)
