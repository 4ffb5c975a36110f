"""Meta-evaluation of a judge, as Prometheus 2 reports it (pure): one table, a row per
eval set, a column per metric.

**Absolute sets** (MT-Bench, Vicuna Bench, FLASK, Feedback Collection): per record, the
mean of the judge's repetitions against the mean of the reference's scores (GPT-4's three,
or people's): Pearson's r, Spearman's rho and Kendall's tau-b, each as
``scipy.stats.pearsonr`` / ``spearmanr`` / ``kendalltau`` compute it (what prometheus-eval's
``calculate_results`` calls). Records the judge gave no score are left out and counted.
Each has a 95% interval: a percentile bootstrap over records (``replicates`` resamples
drawn with a seeded generator, so the same inputs give the same interval; a resample
whose scores are constant has no correlation and is left out of the percentiles).

**Pairwise sets** (Auto-J, HHH Alignment, MT-Bench human judgements, Preference
Collection): accuracy against the gold labels counted as Auto-J's ``pairwise_eval.py``
counts it (:func:`report.pairwise_labels.label_accuracy`): *both orders*, right when the
verdict of each order equals the label (Auto-J's "agreement"), and *listed order*, the
order as the file lists the responses; each with the comparisons labelled a tie and
without them (Prometheus 2's ``skip_tie``). Each has a 95% Wilson score interval.

:func:`table_data` returns the table as plain data, for JSON and for other reports that
print it next to theirs; :func:`render_text` prints it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from flask_eval.report.pairwise_labels import LabelAccuracy, Tally

#: the metrics of an absolute set, in column order
CORRELATIONS = ("pearson", "spearman", "kendall")
#: the metrics of a pairwise set, in column order (LabelAccuracy's tallies)
ACCURACIES = ("both", "both_no_tie", "listed", "listed_no_tie")
COLUMNS = CORRELATIONS + ACCURACIES
HEADERS = {
    "pearson": "Pearson",
    "spearman": "Spearman",
    "kendall": "Kendall",
    "both": "Acc both",
    "both_no_tie": "Acc both w/o tie",
    "listed": "Acc listed",
    "listed_no_tie": "Acc listed w/o tie",
}
CONFIDENCE = 0.95
DEFAULT_REPLICATES = 1000
DEFAULT_SEED = 0
INTERVALS = {
    "absolute": "95% percentile bootstrap over records",
    "pairwise": "95% Wilson score interval",
}


@dataclass(frozen=True)
class Estimate:
    """One metric of one set: its value, its interval (None: not defined) and the
    number of items it is computed over."""

    value: float | None
    low: float | None
    high: float | None
    n: int

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n}


@dataclass(frozen=True)
class SetResult:
    """One row of the table: a set, the judge, and its metrics by column name."""

    name: str
    kind: str  # "absolute" or "pairwise"
    judge: str
    reference: str  # what the judge is compared with ("gpt-4", "human labels", ...)
    metrics: dict[str, Estimate]
    notes: tuple[str, ...] = field(default=())


def _finite(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def _correlations(judge: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """Pearson, Spearman and Kendall (tau-b) as scipy computes them; NaN where one side is
    constant (scipy warns then; the warning is not the user's concern here)."""
    if len(judge) < 2 or np.ptp(judge) == 0 or np.ptp(gold) == 0:
        return dict.fromkeys(CORRELATIONS, math.nan)
    return {
        "pearson": float(stats.pearsonr(judge, gold)[0]),
        "spearman": float(stats.spearmanr(judge, gold)[0]),
        "kendall": float(stats.kendalltau(judge, gold)[0]),
    }


def correlation_metrics(
    judge: Sequence[float],
    gold: Sequence[float],
    *,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = DEFAULT_SEED,
    confidence: float = CONFIDENCE,
) -> dict[str, Estimate]:
    """Pearson, Spearman and Kendall of paired scores with percentile bootstrap
    intervals over the pairs (the module docstring)."""
    if len(judge) != len(gold):
        raise ValueError("judge and gold scores differ in length")
    a, b = np.asarray(judge, dtype=float), np.asarray(gold, dtype=float)
    n = len(a)
    point = _correlations(a, b)
    draws: dict[str, list[float]] = {m: [] for m in CORRELATIONS}
    if n >= 2:
        rng = np.random.default_rng(seed)
        for _ in range(replicates):
            pick = rng.integers(0, n, n)
            for m, v in _correlations(a[pick], b[pick]).items():
                if not math.isnan(v):
                    draws[m].append(v)
    tail = 100 * (1 - confidence) / 2
    out: dict[str, Estimate] = {}
    for m in CORRELATIONS:
        value = _finite(point[m])
        if value is None or len(draws[m]) < 2:
            out[m] = Estimate(value, None, None, n)
            continue
        low, high = np.percentile(draws[m], [tail, 100 - tail])
        out[m] = Estimate(value, float(low), float(high), n)
    return out


def wilson(correct: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The Wilson score interval of ``correct`` out of ``n`` (None when ``n`` is 0)."""
    if n <= 0:
        return None
    z = float(stats.norm.ppf(1 - (1 - confidence) / 2))
    p = correct / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _tally_estimate(tally: Tally, confidence: float) -> Estimate:
    bounds = wilson(tally.correct, tally.n, confidence)
    low, high = bounds if bounds is not None else (None, None)
    return Estimate(tally.accuracy, low, high, tally.n)


def accuracy_metrics(
    accuracy: LabelAccuracy, confidence: float = CONFIDENCE
) -> dict[str, Estimate]:
    """The four accuracies of one judge's :class:`LabelAccuracy`, with Wilson intervals."""
    return {m: _tally_estimate(getattr(accuracy, m), confidence) for m in ACCURACIES}


def table_data(results: Sequence[SetResult]) -> dict[str, Any]:
    """The table as plain data: ``columns`` (name and header), ``intervals`` (how each
    kind's intervals are made) and ``rows`` (set, kind, judge, reference, metrics by
    column, notes). Correlations are in [-1, 1], accuracies in [0, 1]."""
    return {
        "columns": [{"name": c, "header": HEADERS[c]} for c in COLUMNS],
        "intervals": dict(INTERVALS),
        "rows": [
            {
                "set": r.name,
                "kind": r.kind,
                "judge": r.judge,
                "reference": r.reference,
                "metrics": {m: e.as_dict() for m, e in r.metrics.items()},
                "notes": list(r.notes),
            }
            for r in results
        ],
    }


def _cell(metric: str, e: Estimate | None) -> str:
    if e is None or e.value is None:
        return "-"
    scale, digits = (100.0, 2) if metric in ACCURACIES else (1.0, 3)
    text = f"{e.value * scale:.{digits}f}"
    if e.low is not None and e.high is not None:
        text += f" [{e.low * scale:.{digits}f}, {e.high * scale:.{digits}f}]"
    return text


def render_text(results: Sequence[SetResult]) -> str:
    """The table as text: one row per set, correlations to 3 decimals, accuracies in
    percent to 2, each with its interval in brackets; then how the intervals are made
    and each set's notes."""
    used = [c for c in COLUMNS if any(c in r.metrics for r in results)]
    header = ["set", "judge", "n", *(HEADERS[c] for c in used)]
    rows = [
        [
            r.name,
            r.judge,
            str(max((e.n for e in r.metrics.values()), default=0)),
            *(_cell(c, r.metrics.get(c)) for c in used),
        ]
        for r in results
    ]
    widths = [max(len(x) for x in col) for col in zip(header, *rows, strict=True)]
    lines = [
        "  ".join(x.ljust(w) for x, w in zip(line, widths, strict=True)).rstrip()
        for line in (header, *rows)
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    kinds = dict.fromkeys(r.kind for r in results)
    lines.append("")
    for kind in kinds:
        what = "correlations" if kind == "absolute" else "accuracies (%)"
        lines.append(f"{kind} sets: {what}, intervals: {INTERVALS[kind]}")
    if any(r.kind == "absolute" for r in results):
        lines.append(
            "  the mean of the judge's repetitions against the mean of the reference's scores"
        )
    if any(r.kind == "pairwise" for r in results):
        lines.append(
            "  both: right in both orders (Auto-J's rule); listed: the order as listed; "
            "w/o tie: comparisons labelled a tie left out"
        )
    for r in results:
        for note in r.notes:
            lines.append(f"{r.name}: {note}")
    return "\n".join(lines) + "\n"
