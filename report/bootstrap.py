"""Bootstrap confidence intervals that resample *instances* (pure numpy).

Scores of one instance are not independent (the same response is judged on 2-3 skills,
by the same judge, and an easy instance is easy for every model), so the unit resampled
is the instance: a replicate draws ``n`` instances with replacement, and every statistic
of the report is recomputed on that replicate. A replicate is a vector of instance
*weights* (how often each instance was drawn), so a statistic that is a ratio of sums
over instances (a micro-averaged mean score) is a matrix product: ``weights @ totals /
weights @ counts``, all B replicates at once.

Intervals are percentile intervals of the replicates. Replicates in which a statistic is
undefined (no scored judgment drawn) are left out of its interval.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: Defaults of the command line.
DEFAULT_REPLICATES = 1000
DEFAULT_SEED = 0
DEFAULT_CONFIDENCE = 0.95


def instance_weights(n: int, replicates: int, seed: int) -> FloatArray:
    """Resampling weights, shape ``(n, replicates)``: column b counts how often each of
    the ``n`` instances was drawn in replicate b (each column sums to ``n``).

    Instance-major, so the rows of a subset of instances are contiguous. Reproducible:
    the same (n, replicates, seed) always gives the same weights.
    """
    if n < 0 or replicates < 0:
        raise ValueError("n and replicates must be >= 0")
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, max(n, 1), size=(replicates, n))
    flat = draws + (np.arange(replicates, dtype=np.int64) * n)[:, None]
    counts = np.bincount(flat.ravel(), minlength=replicates * n).reshape(replicates, n)
    return np.ascontiguousarray(counts.T, dtype=np.float64)


def percentile_interval(
    replicates: FloatArray, confidence: float = DEFAULT_CONFIDENCE
) -> tuple[FloatArray, FloatArray]:
    """Percentile interval of each row of ``replicates`` (shape ``(k, B)``).

    Equal to ``np.nanpercentile(row, [50 - 50 c, 50 + 50 c])`` (linear interpolation) for
    each row; NaN replicates are left out; a row without finite replicates gives NaN.
    """
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    data = np.atleast_2d(np.asarray(replicates, dtype=np.float64))
    if data.shape[1] == 0:
        nan = np.full(data.shape[0], np.nan)
        return nan, nan.copy()
    ordered = np.sort(data, axis=1)  # NaN sort last
    valid = np.sum(~np.isnan(ordered), axis=1)
    alpha = (1.0 - confidence) / 2.0
    bounds = []
    for q in (alpha, 1.0 - alpha):
        pos = q * np.maximum(valid - 1, 0)
        below = np.floor(pos).astype(np.int64)
        above = np.minimum(below + 1, np.maximum(valid - 1, 0))
        t = pos - below
        a = np.take_along_axis(ordered, below[:, None], axis=1)[:, 0]
        b = np.take_along_axis(ordered, above[:, None], axis=1)[:, 0]
        value = np.where(t >= 0.5, b - (b - a) * (1 - t), a + (b - a) * t)
        bounds.append(np.where(valid > 0, value, np.nan))
    return bounds[0], bounds[1]


def ratio_replicates(totals: FloatArray, counts: FloatArray, weights: FloatArray) -> FloatArray:
    """Replicates of ``sum(totals) / sum(counts)`` per column: shape ``(k, B)``.

    ``totals`` and ``counts`` are per-instance sums, shape ``(n,)`` or ``(n, k)``;
    ``weights`` comes from :func:`instance_weights` (shape ``(n, B)``). NaN where a
    replicate drew no counted item.
    """
    tot = np.asarray(totals, dtype=np.float64).reshape(len(weights), -1)
    cnt = np.asarray(counts, dtype=np.float64).reshape(len(weights), -1)
    num = tot.T @ weights
    den = cnt.T @ weights
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def ratio_interval(
    totals: FloatArray,
    counts: FloatArray,
    weights: FloatArray,
    confidence: float = DEFAULT_CONFIDENCE,
) -> tuple[FloatArray, FloatArray]:
    """Percentile interval of the micro-averaged mean ``sum(totals) / sum(counts)``."""
    return percentile_interval(ratio_replicates(totals, counts, weights), confidence)


def mean_interval(
    values: FloatArray,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
) -> tuple[float, float]:
    """Interval of the mean of one value per instance (the simplest case)."""
    values = np.asarray(values, dtype=np.float64)
    weights = instance_weights(len(values), replicates, seed)
    lo, hi = ratio_interval(values, np.ones_like(values), weights, confidence)
    return float(lo[0]), float(hi[0])


@dataclass(frozen=True)
class PairedDifference:
    """Mean of A minus mean of B over the instances both answered, with its interval."""

    diff: float | None
    ci_low: float | None
    ci_high: float | None
    n_instances: int
    mean_a: float | None
    mean_b: float | None


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def paired_difference(
    totals_a: FloatArray,
    counts_a: FloatArray,
    totals_b: FloatArray,
    counts_b: FloatArray,
    weights: FloatArray,
    confidence: float = DEFAULT_CONFIDENCE,
) -> PairedDifference:
    """Paired comparison of two models judged on the same ``n`` instances.

    Inputs are per-instance score sums and counts of each model (shape ``(n,)``, the
    instances both answered) and :func:`instance_weights` over those instances. Both means
    are recomputed on the same replicate, so the instance effect cancels in the
    difference: the interval is that of the paired difference.
    """
    a = np.asarray(totals_a, dtype=np.float64), np.asarray(counts_a, dtype=np.float64)
    b = np.asarray(totals_b, dtype=np.float64), np.asarray(counts_b, dtype=np.float64)
    n = len(a[0])
    mean_a = a[0].sum() / a[1].sum() if a[1].sum() else np.nan
    mean_b = b[0].sum() / b[1].sum() if b[1].sum() else np.nan
    reps = ratio_replicates(a[0], a[1], weights) - ratio_replicates(b[0], b[1], weights)
    lo, hi = percentile_interval(reps, confidence)
    diff = mean_a - mean_b
    return PairedDifference(
        diff=_finite(diff),
        ci_low=_finite(lo[0]) if np.isfinite(diff) else None,
        ci_high=_finite(hi[0]) if np.isfinite(diff) else None,
        n_instances=n,
        mean_a=_finite(mean_a),
        mean_b=_finite(mean_b),
    )
