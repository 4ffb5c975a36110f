"""Bootstrap intervals for every cell of the report, and paired model comparisons.

All cells are computed on the *same* replicates (one set of instance weights for the
whole run), so the intervals of a report are mutually consistent and any two cells can be
compared on paired replicates. Which cells make up each (dimension, key), and how their
replicate sums are shared, is ``report.breakdown``'s business (the same membership gives
the point estimates); this module turns replicate means into percentile intervals.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from flask_eval.report.bootstrap import DEFAULT_CONFIDENCE, FloatArray, percentile_interval
from flask_eval.report.breakdown import Aggregation
from flask_eval.report.instance_sums import Replicates, per_instance
from flask_eval.report.metrics import OVERALL, OVERALL_KEY
from flask_eval.report.scores import ScoreTable

#: (model, judge, dimension, key) -> (ci_low, ci_high)
Intervals = dict[tuple[str, str, str, str], tuple[float, float]]

Progress = Callable[[int], object]


def cell_intervals(
    aggregation: Aggregation,
    weights: FloatArray | Replicates,
    confidence: float = DEFAULT_CONFIDENCE,
    progress: Progress | None = None,
) -> Intervals:
    """Percentile intervals of every (model, judge, dimension, key) mean of the report.

    ``weights`` has one row per instance of the table (see
    :func:`report.bootstrap.instance_weights`); keys are those of
    :meth:`Aggregation.rows`. Cells without a scored judgment get no interval.
    ``progress(1)`` is called :attr:`Aggregation.steps` times.
    """
    table = aggregation.table
    weights = Replicates.of(weights)
    if weights.weights.shape[0] != len(table.instances):
        raise ValueError("weights need one row per instance of the table")
    out: Intervals = {}
    if table.n_cells == 0 or weights.weights.shape[1] == 0:
        return out
    n_judges = len(table.judges)
    for dimension, key, means in aggregation.replicates(weights, progress):
        # a column without any scored judgment is NaN in every replicate
        live = np.flatnonzero(~np.isnan(means).all(axis=1))
        if len(live) == 0:
            continue
        lo, hi = percentile_interval(means[live], confidence)
        for col, low, high in zip(live.tolist(), lo.tolist(), hi.tolist(), strict=True):
            if np.isfinite(low) and np.isfinite(high):
                model, judge = divmod(col, n_judges)
                out[(table.models[model], table.judges[judge], dimension, key)] = (low, high)
    return out


@dataclass(frozen=True)
class Comparison:
    """Paired overall comparison of two models under one judge (mean A - mean B)."""

    judge: str
    model_a: str
    model_b: str
    n_instances: int
    mean_a: float | None
    mean_b: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None

    def as_dict(self) -> dict[str, object]:
        return {
            "judge": self.judge,
            "model_a": self.model_a,
            "model_b": self.model_b,
            "dimension": OVERALL,
            "key": OVERALL_KEY,
            "n_instances": self.n_instances,
            "mean_a": self.mean_a,
            "mean_b": self.mean_b,
            "diff": self.diff,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
        }


def _ratio(num: float, den: float) -> float | None:
    return float(num / den) if den > 0 else None


def _common_sums(
    full: FloatArray, weights: Replicates, common: np.ndarray
) -> tuple[int, FloatArray, FloatArray | None]:
    """(instances, point sums, replicate sums or None without replicates) of the rows of
    ``full`` that ``common`` marks; all rows are read in place, not copied."""
    rows = None if common.all() else np.flatnonzero(common)
    block = full if rows is None else full[rows]
    reps = weights.sums(block, rows) if weights.weights.shape[1] else None
    return int(common.sum()), block.sum(axis=0), reps


def comparisons(
    table: ScoreTable,
    weights: FloatArray | Replicates,
    confidence: float = DEFAULT_CONFIDENCE,
    model_order: Sequence[str] = (),
) -> list[Comparison]:
    """Every pair of models under every judge, on the instances both models answered.

    An instance is answered by a model when the model has a judgment on it. The overall
    mean of each model is recomputed on those instances only, and both are resampled
    together (same replicate weights), so the interval is that of the paired difference.
    Weights with zero columns give differences without intervals.
    """
    models = [m for m in model_order if m in table.models]
    models += [m for m in table.models if m not in models]
    if len(models) < 2:
        return []
    inst, sums = per_instance(table, np.arange(table.n_cells))
    full = np.zeros((len(table.instances), sums.shape[1]))
    full[inst] = sums
    answered = np.zeros((len(table.models), len(table.instances)), dtype=bool)
    answered[table.model, table.instance] = True
    n_judges, width = len(table.judges), sums.shape[1] // 2
    # (instances, point sums, replicate sums) per set of common instances: models that
    # answered the same instances share them (one product and one sum for all their pairs)
    cache: dict[bytes, tuple[int, FloatArray, FloatArray | None]] = {}
    replicated = Replicates.of(weights)
    n_replicates = replicated.weights.shape[1]
    found: list[tuple[str, str, str, int, float | None, float | None, float | None]] = []
    diffs: list[FloatArray] = []  # each pair's replicate differences, one interval call
    for a_pos, a_name in enumerate(models):
        for b_name in models[a_pos + 1 :]:
            a, b = table.models.index(a_name), table.models.index(b_name)
            common = answered[a] & answered[b]
            key = common.tobytes()
            if key not in cache:
                cache[key] = _common_sums(full, replicated, common)
            n_rows, point, reps = cache[key]
            for j, judge in enumerate(table.judges):
                ca, cb = a * n_judges + j, b * n_judges + j
                mean_a = _ratio(point[ca], point[width + ca])
                mean_b = _ratio(point[cb], point[width + cb])
                diff = None if mean_a is None or mean_b is None else mean_a - mean_b
                if diff is not None and reps is not None:
                    with np.errstate(invalid="ignore", divide="ignore"):
                        d = reps[ca] / reps[width + ca] - reps[cb] / reps[width + cb]
                    d[~np.isfinite(d)] = np.nan
                else:
                    d = np.full(max(n_replicates, 1), np.nan)
                diffs.append(d)
                found.append((judge, a_name, b_name, n_rows, mean_a, mean_b, diff))
    if not found:
        return []
    # row-wise, so one call for every pair gives each pair's interval as before
    lo, hi = percentile_interval(np.stack(diffs), confidence)
    result: list[Comparison] = []
    for (judge, a_name, b_name, n, mean_a, mean_b, diff), low, high in zip(
        found, lo.tolist(), hi.tolist(), strict=True
    ):
        finite = diff is not None and np.isfinite(low)
        result.append(
            Comparison(
                judge,
                a_name,
                b_name,
                n,
                mean_a,
                mean_b,
                diff,
                float(low) if finite else None,
                float(high) if finite else None,
            )
        )
    return result
