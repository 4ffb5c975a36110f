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
    """The PPI++ estimate of the mean of ``y`` (see the module's docstring)."""
    raise NotImplementedError
