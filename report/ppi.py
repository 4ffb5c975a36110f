"""Prediction-powered inference of a mean (pure): what people would say, from a few of
their labels and every judge score (Angelopoulos et al., Science 2023; PPI++, Angelopoulos,
Duchi and Zrnic 2023). docs/design/calibration.md says what it assumes and promises."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


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

    ``groups_*`` number each cell's cluster (its instance): the variance sums residuals
    per cluster first; ``weights`` (1 / inclusion probability) weigh the labelled cells;
    the interval uses Student's t with (labelled clusters - 1) degrees of freedom."""
    from scipy import stats

    y = np.asarray(y_labelled, dtype=np.float64)
    f = np.asarray(f_labelled, dtype=np.float64)
    fu = np.asarray(f_unlabelled, dtype=np.float64)
    n, big_n = len(y), len(fu)
    gl = np.arange(n, dtype=np.int64) if groups_labelled is None else np.asarray(groups_labelled)
    gu = (
        np.arange(n, n + big_n, dtype=np.int64)
        if groups_unlabelled is None
        else np.asarray(groups_unlabelled)
    )
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    raw = float(np.concatenate([f, fu]).mean()) if n + big_n else float("nan")
    nan = float("nan")
    if n == 0:
        return MeanEstimate(nan, nan, nan, nan, raw, nan, nan, nan, 0, big_n, nan, nan)
    total = float(w.sum())

    def mean_var(values: FloatArray, wt: FloatArray, groups: IntArray) -> tuple[float, float]:
        size = float(wt.sum())
        m = float((wt * values).sum() / size)
        _, codes = np.unique(groups, return_inverse=True)
        sums = np.bincount(codes.reshape(-1), weights=wt * (values - m))
        k = len(sums)
        var = float((sums**2).sum() / size**2) * (k / (k - 1) if k > 1 else nan)
        return m, var

    classical, var_y = mean_var(y, w, gl)
    if big_n:
        mu, var_fu = mean_var(fu, np.ones(big_n), gu)
    else:
        mu, var_fu = 0.0, 0.0
    if lam is None:
        if big_n and n > 1:
            fm = float((w * f).sum() / total)
            cov = float((w * (y - classical) * (f - fm)).sum() / total)
            var_f = float((w * (f - fm) ** 2).sum() / total)
            lam = cov / ((1 + n / big_n) * var_f) if var_f > 0 else 0.0
            lam = min(max(lam, 0.0), 1.0)
        else:
            lam = 0.0
    rectifier, var_r = mean_var(y - lam * f, w, gl)
    estimate = rectifier + lam * mu
    var = var_r + lam**2 * var_fu
    se = float(np.sqrt(var))
    clusters = len(np.unique(gl))
    q = float(stats.t.ppf(0.5 + confidence / 2, clusters - 1)) if clusters > 1 else nan
    half_c = q * float(np.sqrt(var_y))
    ess = n * var_y / var if var > 0 else nan
    return MeanEstimate(
        estimate=float(estimate),
        low=float(estimate - q * se),
        high=float(estimate + q * se),
        se=se,
        raw=raw,
        classical=classical,
        classical_low=classical - half_c,
        classical_high=classical + half_c,
        labelled=n,
        unlabelled=big_n,
        lam=float(lam),
        ess=float(ess),
    )
