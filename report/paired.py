"""Paired comparisons of two sets of scores on the same units, and the control of the
error across a family of them (pure). docs/design/compare.md says what they assume."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

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


def unit_means(values: FloatArray, units: IntArray) -> tuple[IntArray, FloatArray]:
    """The units present (sorted) and the mean of ``values`` in each."""
    raise NotImplementedError


def paired_test(
    base: FloatArray,
    new: FloatArray,
    *,
    confidence: float = 0.95,
    min_effect: float = 0.0,
    alpha: float = 0.05,
    power: float = 0.8,
) -> PairedTest:
    """The paired t-test of ``new - base`` (one value per unit, aligned)."""
    raise NotImplementedError


def adjust(p_values: Sequence[float], method: str = HOLM) -> list[float]:
    """Adjusted p-values of a family: Holm's step-down (family-wise error) or
    Benjamini-Hochberg's step-up (false discovery rate); NaN stays NaN, out of the family."""
    raise NotImplementedError
