"""Prediction-powered inference of a mean (pure): what people would say, from a few of
their labels and every judge score (Angelopoulos et al., Science 2023; PPI++, Angelopoulos,
Duchi and Zrnic 2023). docs/design/calibration.md says what it assumes and promises.

The estimate of the people's mean is

    theta = lam * mean(f_unlabelled) + mean(y_labelled - lam * f_labelled)

(the judge's mean on the unlabelled cells, corrected by the rectifier: the people's
labels minus the judge's scores on the labelled cells). ``lam = 1`` is plain PPI,
``lam = 0`` the people's own mean. PPI++ tunes it for a mean as

    lam = cov(y, f_labelled) / ((1 + n / N) * var(f_all)),  clipped to [0, 1],

which minimises the estimated variance. ``lam="in-sample"`` computes it from every label,
as ``ppi_py`` does; the estimate and standard error are then ``ppi_py``'s. Tuned on the
labels it then corrects, it is optimistic with few labels: it follows their chance
agreement with the judge, which biases the estimate towards the judge and makes the
standard error too small (with 16 labels the interval covers up to two points less).

Cross-fitting (the default, ``lam=None`` or ``"cross-fit"``) removes that: each labelled
instance gets the lambda above computed without its own labels (every other labelled
instance and every unlabelled cell; leave one instance out), and each labelled cell is
rectified with its instance's lambda,

    theta = mean_i(y_i - lam_i * (f_i - mean(f_unlabelled))),

so that the judge's unlabelled mean carries the mean lambda, the reported ``lam``. Leaving
out one instance rather than half of them keeps each lambda almost as precise as the
one from every label: halves gave intervals up to 6% wider for the same coverage. With
many labels the lambdas differ from the in-sample one by O(1/n) and the estimate and
standard error approach ``ppi_py``'s. Nothing is random: the folds are the instances.
The lambdas are computed in one pass from per-instance sums.

Variance. Its standard error is that of ``ppi_py``: the variance of the rectifier's mean
plus ``lam**2`` times that of the judge's unlabelled mean, each the plain (divide by the
count) variance of the cells over the count; cross-fitted, the rectifier's terms are
each cell's ``y_i - lam_i * (f_i - mean(f_unlabelled))`` (its own lambda, the usual
cross-fitting variance, which takes the lambdas as given: they are O(1/n) apart). When
``groups_*`` name the instance of each cell, the variances are cluster-robust (the
sandwich over instances, with the influence of each cell summed over its instance: the
cells of one instance are correlated); with one cell per instance this is exactly the
formula above. An instance with cells on both sides
(some labelled, some not) carries the covariance of the two means as well.

Weights. ``weights`` are the inverse inclusion probabilities of the labelled cells when
people's labels were drawn with known unequal probabilities: the rectifier's mean and the
people-only mean are then weighted (Hajek) means, with their linearised variances. The
judge's unlabelled mean stays unweighted: it stands for the judge's mean over the whole
population, which holds when the unlabelled cells are (close to) all of it, that is when
the labelled share is small or the draw did not depend on the judge's score. Otherwise
pass every cell's score (the labelled ones too) as ``f_unlabelled``, with every cell's
instance in ``groups_unlabelled``: the judge's mean is then that of the population, and
the sandwich carries its covariance with the rectifier's through the shared instances.

Interval. Student's t with (labelled instances - 1) degrees of freedom around the estimate:
with a few labels, the rectifier's variance is itself estimated from those few, and the
normal quantile would be too narrow (the t quantile is the small-sample safeguard; with
many labels the two agree). The people-only interval uses the same quantile. A skewed
score (most labels at the top, a few far below) still undercovers with a dozen labels,
as the people's own t interval does: the draws that miss the rare low labels have both
a high mean and a small variance. Johnson's skewness-corrected t and a bootstrap-t were
measured for this (docs/design/calibration.md): neither helped broadly, the third moment
of so few labels being too uncertain, and neither is applied.

Undefined figures are NaN, never an exception: with fewer than two labelled instances no
variance (and no interval, no effective number of labels); without labels no estimate.
Without unlabelled cells the judge's scores add nothing: ``lam`` is 0 and the estimate is
the people's mean.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
import numpy.typing as npt
from scipy import stats

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

NAN = float("nan")

Tuning = Literal["cross-fit", "in-sample"]
#: ``lam`` tuned for each labelled instance on the others (the default)
CROSS_FIT: Final = "cross-fit"
#: ``lam`` tuned on every label, as ``ppi_py`` tunes it
IN_SAMPLE: Final = "in-sample"


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


def _cross_fitted_lam(c: _Cells) -> FloatArray:
    """Each labelled cell's lambda: :func:`_tuned_lam` on the data without the labelled
    cells of its instance (every other labelled instance and every unlabelled cell), in
    closed form from per-instance sums (the same figure as recomputing it, in one pass)."""
    n, big_n, k = len(c.y), len(c.fu), c.n_groups
    # shifts change neither covariance nor variance: centre for numerical accuracy
    y, f = c.y - c.y.mean(), c.f - c.f.mean()
    big_u, sy, sf = (_sum_by(c.gl, v, k) for v in (c.u, c.u * y, c.u * f))
    cells = _sum_by(c.gl, np.ones(n), k)  # labelled cells per instance
    a, b = float(np.dot(sy, sf)), float(np.dot(sy, big_u))
    cc, d = float(np.dot(big_u, sf)), float(np.dot(big_u, big_u))
    with np.errstate(divide="ignore", invalid="ignore"):
        # the rectifier's covariance without instance g (weights renormalised to mean 1)
        rest_n, rest_u = n - cells, big_u.sum() - big_u
        ybar, fbar = (sy.sum() - sy) / rest_u, (sf.sum() - sf) / rest_u
        s = (
            (a - sy * sf)
            - fbar * (b - sy * big_u)
            - ybar * (cc - big_u * sf)
            + ybar * fbar * (d - big_u * big_u)
        )
        cov = rest_n / rest_u**2 * s
        # the judge's variance over every cell but instance g's labelled ones
        shift = float(np.concatenate([c.f, c.fu]).mean())
        lf = _sum_by(c.gl, c.f - shift, k)
        v = lf + _sum_by(c.gu, c.fu - shift, k)
        m = cells + _sum_by(c.gu, np.ones(big_n), k)
        v2, m2 = v - lf, m - cells
        q = float(np.dot(v, v)) - v * v + v2 * v2
        r = float(np.dot(v, m)) - v * m + v2 * m2
        p = float(np.dot(m, m)) - m * m + m2 * m2
        total = m.sum() - cells
        mean = (v.sum() - lf) / total
        groups = k - (m2 == 0)
        var = groups / (groups - 1) * (q - 2 * mean * r + mean * mean * p) / total
        lam = cov / ((1 + rest_n / big_n) * var)
    ok = (groups >= 2) & (var > 0) & np.isfinite(lam)
    lam = np.clip(np.where(ok, lam, 0.0), 0.0, 1.0)
    return lam[c.gl].astype(np.float64)


def _weights(c: _Cells, lam: float | Tuning | None) -> FloatArray:
    """The judge's weight on each labelled cell (one value unless cross-fitted)."""
    if len(c.fu) == 0:
        return np.zeros(len(c.y))
    if lam is None or lam == CROSS_FIT:
        return _cross_fitted_lam(c)
    value = _tuned_lam(c) if lam == IN_SAMPLE else float(lam)
    return np.full(len(c.y), value)


def ppi_mean(
    y_labelled: FloatArray,
    f_labelled: FloatArray,
    f_unlabelled: FloatArray,
    *,
    confidence: float = 0.95,
    lam: float | Tuning | None = None,
    groups_labelled: IntArray | None = None,
    groups_unlabelled: IntArray | None = None,
    weights: FloatArray | None = None,
) -> MeanEstimate:
    """The PPI++ estimate of the mean of ``y`` (see the module's docstring).

    ``y_labelled`` and ``f_labelled`` are the people's labels and the judge's scores on the
    same cells, ``f_unlabelled`` the judge's scores on the other cells. ``lam`` is the
    judge's weight: a number, ``"cross-fit"`` (the default, also ``None``: tuned for each
    labelled instance without its labels) or ``"in-sample"`` (tuned on every label, as
    ``ppi_py``). ``groups_*`` are the instance of each cell (cluster-robust variances),
    ``weights`` the inverse inclusion probabilities of the labelled cells. ValueError for
    mismatched lengths, negative weights, an unknown ``lam`` or a confidence outside
    (0, 1); small data give NaN figures instead.
    """
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    if isinstance(lam, str):
        if lam not in (CROSS_FIT, IN_SAMPLE):
            raise ValueError(f"lam must be a number, {CROSS_FIT!r} or {IN_SAMPLE!r}")
    elif lam is not None and not np.isfinite(lam):
        raise ValueError("lam must be a finite number")
    c = _cells(y_labelled, f_labelled, f_unlabelled, groups_labelled, groups_unlabelled, weights)
    n, big_n = len(c.y), len(c.fu)
    f_all = np.concatenate([c.f, c.fu])
    raw = float(f_all.mean()) if len(f_all) else NAN
    if n == 0:
        return MeanEstimate(NAN, NAN, NAN, NAN, raw, NAN, NAN, NAN, 0, big_n, NAN, NAN)
    lams = _weights(c, lam)
    weight = float(np.dot(c.u, lams) / n)  # the unlabelled mean's weight
    classical, infl_c = _weighted_mean(c, c.y)
    fu_mean = float(c.fu.mean()) if big_n else 0.0
    # each labelled cell rectified with its own weight: y - lam * (f - mean(f_unlabelled))
    estimate, infl = _weighted_mean(c, c.y - lams * (c.f - fu_mean))
    if big_n:
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
