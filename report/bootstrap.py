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
    the same (n, replicates, seed) always gives the same weights: replicate b draws the
    row numbers ``numpy.random.default_rng(seed).integers(0, n, size=(replicates,
    n))[b]``. The report numbers a run's instances by their ids sorted as strings
    (Python's ``sorted``: "1" < "10" < "2"), absolute and pairwise alike, so row k is the
    k-th id in that order; with it an interval can be reproduced draw for draw.
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
