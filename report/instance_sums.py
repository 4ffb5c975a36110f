"""Per-instance sums of a score table, and their bootstrap replicates (pure numpy).

A replicate of a micro-averaged mean is ``weights @ totals / weights @ counts`` over the
instances (``report.bootstrap``): what every interval needs is, for a set of cells, the
``(instances, 2 * models * judges)`` matrix of their per-instance score totals and counts
(:func:`per_instance`), then one matrix product with the instances' weights
(:meth:`Replicates.sums`), in float32 where that is exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from flask_eval.report.scores import SCORED, FloatArray, IntArray, ScoreTable

#: float32 holds every integer up to 2^24 exactly (its significand has 24 bits)
_EXACT_FLOAT32 = float(2**24)


def per_instance(table: ScoreTable, cells: IntArray) -> tuple[IntArray, FloatArray]:
    """(instances, per-instance sums) of ``cells``: an ``(instances, 2 * models * judges)``
    matrix, scores in the first half of the columns and counts in the second (column
    ``model * judges + judge`` in each half), instances in increasing order."""
    inst, local = np.unique(table.instance[cells], return_inverse=True)
    n_rows, n_models, n_judges = len(inst), len(table.models), len(table.judges)
    width = n_models * n_judges
    scored = table.state[cells] == SCORED
    # bincount adds in input order, as np.add.at did (the same sums), without its per-item
    # overhead; the flat index of (instance x model, judge), each half written in place
    flat = ((local.reshape(-1) * n_models + table.model[cells]) * n_judges)[:, None]
    index = (flat + np.arange(n_judges)).reshape(-1)
    size = n_rows * width
    out = np.empty((n_rows, 2, width), dtype=np.float64)
    score = np.where(scored, table.score[cells], 0.0).reshape(-1)
    out[:, 0] = np.bincount(index, score, size).reshape(n_rows, width)
    count = scored.reshape(-1).astype(np.float64)
    out[:, 1] = np.bincount(index, count, size).reshape(n_rows, width)
    return inst.astype(np.int64), out.reshape(n_rows, 2 * width)


@dataclass(frozen=True)
class Replicates:
    """Bootstrap weights ``(instances, B)`` ready for many products: with a float32 copy
    when every weight is a whole number (resampling counts always are)."""

    weights: FloatArray
    small: npt.NDArray[np.float32] | None
    largest: float

    @classmethod
    def of(cls, weights: FloatArray | Replicates) -> Replicates:
        """``weights`` ready (as they are when already :class:`Replicates`)."""
        if isinstance(weights, Replicates):
            return weights
        weights = np.asarray(weights, dtype=np.float64)
        largest = float(np.abs(weights).max()) if weights.size else 0.0
        small = weights.astype(np.float32) if weights.size and _whole(weights) else None
        return cls(weights, small, largest)

    def sums(self, block: FloatArray, rows: IntArray | None = None) -> FloatArray:
        """``block.T @ weights[rows]`` (all rows when None): the ``(columns, B)``
        replicate sums of per-instance sums.

        When every value is a whole number and no sum can reach 2^24 the product is taken
        in float32 (about twice as fast), which is then exact: every partial sum is a
        whole number that float32 holds, so the result equals the float64 product."""
        if self.small is not None and block.size:
            bound = float(np.abs(block).sum(axis=0).max()) * self.largest
            if bound < _EXACT_FLOAT32 and _whole(block):
                w = self.small if rows is None else self.small[rows]
                return (block.astype(np.float32).T @ w).astype(np.float64)
        w64 = self.weights if rows is None else self.weights[rows]
        return np.asarray(block.T @ w64, dtype=np.float64)


def _whole(values: FloatArray) -> bool:
    return bool(np.all(np.floor(values) == values))
