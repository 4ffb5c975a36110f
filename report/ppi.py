"""Prediction-powered inference of a mean (pure): what people would say, from a few of
their labels and every judge score (Angelopoulos et al., Science 2023; PPI++, Angelopoulos,
Duchi and Zrnic 2023). docs/design/calibration.md says what it assumes and promises.

The estimate of the people's mean is

    theta = lam * mean(f_unlabelled) + mean(y_labelled - lam * f_labelled)

(the judge's mean on the unlabelled cells, corrected by the rectifier: the people's
labels minus the judge's scores on the labelled cells). ``lam = 1`` is plain PPI,
``lam = 0`` the people's own mean; ``lam=None`` tunes it as PPI++ does for a mean,

    lam = cov(y, f_labelled) / ((1 + n / N) * var(f_all)),  clipped to [0, 1],

which minimises the estimated variance (a tuned ``lam`` never makes the estimate
inconsistent: the rectifier removes the judge's bias whatever its weight).

Variance. Its standard error is that of ``ppi_py``: the variance of the rectifier's mean
plus ``lam**2`` times that of the judge's unlabelled mean, each the plain (divide by the
count) variance of the cells over the count. When ``groups_*`` name the instance of each
cell, the variances are cluster-robust (the sandwich over instances, with the influence
of each cell summed over its instance: the cells of one instance are correlated); with one
cell per instance this is exactly the formula above. An instance with cells on both sides
(some labelled, some not) carries the covariance of the two means as well.

Weights. ``weights`` are the inverse inclusion probabilities of the labelled cells when
people's labels were drawn with known unequal probabilities: the rectifier's mean and the
people-only mean are then weighted (Hajek) means, with their linearised variances. The
judge's unlabelled mean stays unweighted: it stands for the judge's mean over the whole
population, which holds when the unlabelled cells are (close to) all of it, that is when
the labelled share is small or the draw did not depend on the judge's score.

Interval. Student's t with (labelled instances - 1) degrees of freedom around the estimate:
with a few labels, the rectifier's variance is itself estimated from those few, and the
normal quantile would be too narrow (the t quantile is the small-sample safeguard; with
many labels the two agree). The people-only interval uses the same quantile.

Undefined figures are NaN, never an exception: with fewer than two labelled instances no
variance (and no interval, no effective number of labels); without labels no estimate.
Without unlabelled cells the judge's scores add nothing: ``lam`` is 0 and the estimate is
the people's mean.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

NAN = float("nan")


@dataclass(frozen=True)
class MeanEstimate:
    """The people's mean of some cells, estimated from their labels on ``labelled`` of
    them and a judge's scores on all. Undefined figures are NaN."""

    estimate: float  # the PPI++ estimate of the people's mean
    low: float  # its confidence interval
    high: float
    se: float  # its standard error
    raw: float  # the judge's own mean over every cell it scored (labelled or not)
    classical: float  # the people's mean over the labelled cells alone
    classical_low: float  # its interval (people only, same quantile)
    classical_high: float
    labelled: int  # n: cells with a label and a judge score
    unlabelled: int  # N: cells with a judge score and no label
    lam: float  # the weight of the judge's scores (PPI++'s tuned lambda; 1 = plain PPI)
    ess: float  # effective number of labels: n * Var(classical) / Var(PPI++)
    classical_se: float = NAN  # the people-only mean's standard error
    df: float = NAN  # the degrees of freedom of the t quantile (labelled instances - 1)


@dataclass(frozen=True)
class _Cells:
    """The validated inputs: every cell's instance code (0..G-1, over both sides)."""

    y: FloatArray
    f: FloatArray
    fu: FloatArray
    u: FloatArray  # the labelled cells' weights, normalised to mean 1
    gl: IntArray
    gu: IntArray
    n_groups: int
    labelled_groups: int


def _vector(x: object, name: str) -> FloatArray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional")
    return a


def _codes(
    groups_labelled: IntArray | None, groups_unlabelled: IntArray | None, n: int, big_n: int
) -> tuple[IntArray, IntArray]:
    """Instance codes 0..G-1 shared by both sides; a side without groups is one instance
    per cell (instances of its own)."""
    gl = None if groups_labelled is None else np.asarray(groups_labelled).reshape(-1)
    gu = None if groups_unlabelled is None else np.asarray(groups_unlabelled).reshape(-1)
    if gl is not None and len(gl) != n:
        raise ValueError("groups_labelled needs one instance per labelled cell")
    if gu is not None and len(gu) != big_n:
        raise ValueError("groups_unlabelled needs one instance per unlabelled cell")
    # (0, cell) for a cell that is its own instance, (1, instance) otherwise
    kind = np.concatenate([np.full(n, int(gl is not None)), np.full(big_n, int(gu is not None))])
    value = np.concatenate(
        [
            np.arange(n) if gl is None else gl.astype(np.int64),
            n + np.arange(big_n) if gu is None else gu.astype(np.int64),
        ]
    )
    _, inverse = np.unique(np.stack([kind, value], axis=1), axis=0, return_inverse=True)
    all_codes = inverse.reshape(-1).astype(np.int64)
    return all_codes[:n], all_codes[n:]


def _cells(
    y_labelled: FloatArray,
    f_labelled: FloatArray,
    f_unlabelled: FloatArray,
    groups_labelled: IntArray | None,
    groups_unlabelled: IntArray | None,
    weights: FloatArray | None,
) -> _Cells:
    y = _vector(y_labelled, "y_labelled")
    f = _vector(f_labelled, "f_labelled")
    fu = _vector(f_unlabelled, "f_unlabelled")
    n, big_n = len(y), len(fu)
    if len(f) != n:
        raise ValueError("y_labelled and f_labelled must have the same length")
    if weights is None:
        u = np.ones(n)
    else:
        w = _vector(weights, "weights")
        if len(w) != n:
            raise ValueError("weights needs one weight per labelled cell")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError("weights must be finite and non-negative")
        if n and w.sum() <= 0:
            raise ValueError("weights must not all be zero")
        u = w / w.mean() if n else w
    gl, gu = _codes(groups_labelled, groups_unlabelled, n, big_n)
    n_groups = int(max(gl.max(initial=-1), gu.max(initial=-1))) + 1
    return _Cells(y, f, fu, u, gl, gu, n_groups, len(np.unique(gl)))


def _sum_by(codes: IntArray, values: FloatArray, n_groups: int) -> FloatArray:
    return np.bincount(codes, weights=values, minlength=n_groups).astype(np.float64)


def _weighted_mean(c: _Cells, x: FloatArray) -> tuple[float, FloatArray]:
    """The (Hajek) mean of ``x`` over the labelled cells and its influence per instance
    (which sums to 0; its sum of squares is the sandwich variance)."""
    n = len(x)
    m = float(np.dot(c.u, x) / n)
    return m, _sum_by(c.gl, c.u * (x - m) / n, c.n_groups)


def _tuned_lam(c: _Cells) -> float:
    """PPI++'s lambda for a mean (ppi_py's, which pools the judge's variance over every
    cell with one degree of freedom spent); with instances, the per-cell covariances are
    cluster-robust (the design effect of the instances included)."""
    n, big_n = len(c.y), len(c.fu)
    _, iy = _weighted_mean(c, c.y)
    _, i_f = _weighted_mean(c, c.f)
    cov = float(np.dot(iy, i_f)) * n  # (1/n) sum_g (sum u(y - ybar)) (sum u(f - fbar))
    f_all = np.concatenate([c.f, c.fu])
    codes = np.concatenate([c.gl, c.gu])
    groups = len(np.unique(codes))
    if groups < 2:
        return 0.0
    sums = _sum_by(codes, f_all - f_all.mean(), c.n_groups)
    var = groups / (groups - 1) * float(np.dot(sums, sums)) / len(f_all)
    if not (var > 0 and np.isfinite(cov)):
        return 0.0
    return float(np.clip(cov / ((1 + n / big_n) * var), 0.0, 1.0))


def ppi_mean(
    y_labelled: FloatArray,
    f_labelled: FloatArray,
    f_unlabelled: FloatArray,
    *,
    confidence: float = 0.95,
    lam: float | None = None,
    groups_labelled: IntArray | None = None,
    groups_unlabelled: IntArray | None = None,
    weights: FloatArray | None = None,
) -> MeanEstimate:
    """The PPI++ estimate of the mean of ``y`` (see the module's docstring).

    ``y_labelled`` and ``f_labelled`` are the people's labels and the judge's scores on the
    same cells, ``f_unlabelled`` the judge's scores on the other cells. ``groups_*`` are
    the instance of each cell (cluster-robust variances), ``weights`` the inverse inclusion
    probabilities of the labelled cells. ValueError for mismatched lengths, negative
    weights or a confidence outside (0, 1); small data give NaN figures instead.
    """
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    if lam is not None and not np.isfinite(lam):
        raise ValueError("lam must be a finite number")
    c = _cells(y_labelled, f_labelled, f_unlabelled, groups_labelled, groups_unlabelled, weights)
    n, big_n = len(c.y), len(c.fu)
    f_all = np.concatenate([c.f, c.fu])
    raw = float(f_all.mean()) if len(f_all) else NAN
    if n == 0:
        return MeanEstimate(NAN, NAN, NAN, NAN, raw, NAN, NAN, NAN, 0, big_n, NAN, NAN)
    weight = 0.0 if big_n == 0 else (_tuned_lam(c) if lam is None else float(lam))
    classical, infl_c = _weighted_mean(c, c.y)
    rect, infl = _weighted_mean(c, c.y - weight * c.f)
    estimate = rect
    if big_n:
        fu_mean = float(c.fu.mean())
        estimate += weight * fu_mean
        infl = infl + _sum_by(c.gu, weight * (c.fu - fu_mean) / big_n, c.n_groups)
    df = float(c.labelled_groups - 1)
    if df < 1:
        return MeanEstimate(
            estimate, NAN, NAN, NAN, raw, classical, NAN, NAN, n, big_n, weight, NAN
        )
    var = float(np.dot(infl, infl))
    var_c = float(np.dot(infl_c, infl_c))
    q = float(stats.t.ppf(0.5 + confidence / 2, df))
    se, se_c = float(np.sqrt(var)), float(np.sqrt(var_c))
    ess = n * var_c / var if var > 0 else NAN
    return MeanEstimate(
        estimate=estimate,
        low=estimate - q * se,
        high=estimate + q * se,
        se=se,
        raw=raw,
        classical=classical,
        classical_low=classical - q * se_c,
        classical_high=classical + q * se_c,
        labelled=n,
        unlabelled=big_n,
        lam=weight,
        ess=ess,
        classical_se=se_c,
        df=df,
    )
