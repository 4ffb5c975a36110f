"""Judge scores calibrated to people (pure): what people would say, per judge, model and
key of the report's breakdown, from people's labels on some cells and the judge's scores
on all, by prediction-powered inference (:func:`report.ppi.ppi_mean`, PPI++).

For a judge, a model and a key (the cells :meth:`report.breakdown.Aggregation.members`
gives the key, the one membership the report's means use): the *labelled* cells are
those the people scored (their label: the mean of the people's columns that scored the
cell, N/A left out) and the judge scored; the *unlabelled* ones those the judge scored
and no person did. Cells are clustered by instance. A key with fewer than
:attr:`CalibrationSettings.min_labels` labels has no row; :attr:`Calibration.skipped`
says which. Weights (1 / inclusion probability, per cell) are used when labels were
drawn with known unequal probabilities; the judge's mean is then taken over every cell
of the key (labelled ones too), the population the weighted labels stand for.

Pairwise runs (:func:`calibrate_pairs`): the people's and the judge's verdict for the
pair's first model (1 a win, 0.5 a tie, 0 a loss) per (instance, criterion); calibrated
win rates per model pair and judge. docs/design/calibration.md says what it assumes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND, VERDICT_TIE
from flask_eval.report.ppi import MeanEstimate, ppi_mean
from flask_eval.report.scores import SCORED, ScoreTable

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: the one line every calibrated section carries: what the intervals assume
ASSUMPTION = (
    "the intervals assume the labelled cells are a uniform random sample of the cells "
    "(or were drawn with the known probabilities given, which weigh them)"
)
#: why a pairwise run's ratings are not calibrated
NO_RATINGS = (
    "ratings (Bradley-Terry) are not calibrated: they are fitted to every pair at once, "
    "and the labelled pairs of a few items give no valid interval for that fit; the "
    "calibrated win rates are"
)
#: a verdict for the pair's first model: a win, a tie, a loss
VERDICT_VALUE = {VERDICT_FIRST: 1.0, VERDICT_TIE: 0.5, VERDICT_SECOND: 0.0}


@dataclass(frozen=True)
class CalibrationSettings:
    """``confidence`` of the intervals; ``min_labels``: a key needs at least this many
    labelled cells; ``lam``: the judge's weight (None: PPI++'s, cross-fitted; 1 is plain PPI)."""

    confidence: float = 0.95
    min_labels: int = 2
    lam: float | None = None


#: below this many labelled instances a key's interval is flagged: with about seven
#: labels per key, calibrated and people-only 95% intervals alike covered 91-93% of the
#: time on simulated FLASK runs (docs/benchmarks.md); with twenty or more, 93-96%
FEW_INSTANCES = 10


@dataclass(frozen=True)
class CalibratedRow:
    """One judge, model (a pair ``A vs B`` in a pairwise run) and key: the calibrated
    estimate of the people's mean, the judge's raw mean, the people-only mean."""

    judge: str
    model: str
    dimension: str
    key: str
    estimate: float
    low: float
    high: float
    raw: float
    people: float
    people_low: float
    people_high: float
    labelled: int
    unlabelled: int
    lam: float
    ess: float
    instances: int = 0  # the labelled instances (the interval's units)

    @property
    def few(self) -> bool:
        """Fewer than :data:`FEW_INSTANCES` labelled instances: the interval's coverage
        is short of its level (docs/design/calibration.md)."""
        return self.instances < FEW_INSTANCES

    @property
    def gain(self) -> float:
        """The effective number of labels per label (ESS / n): how many labels the
        judge's scores are worth, per label."""
        return self.ess / self.labelled if self.labelled else float("nan")

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["gain"] = self.gain
        data["few_labels"] = self.few
        return {k: _clean(v) for k, v in data.items()}

    @classmethod
    def of(cls, where: tuple[str, str, str, str], m: MeanEstimate) -> CalibratedRow:
        return cls(
            *where,
            estimate=m.estimate,
            low=m.low,
            high=m.high,
            raw=m.raw,
            people=m.classical,
            people_low=m.classical_low,
            people_high=m.classical_high,
            labelled=m.labelled,
            unlabelled=m.unlabelled,
            lam=m.lam,
            ess=m.ess,
            instances=int(m.df) + 1 if np.isfinite(m.df) else 0,
        )


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


@dataclass
class Calibration:
    """The "Calibrated to PEOPLE" section: rows, keys skipped for too few labels, and
    notes (always :data:`ASSUMPTION`; warnings where it is known not to hold)."""

    people: str
    columns: tuple[str, ...]
    confidence: float
    rows: list[CalibratedRow] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    pairwise: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "people": self.people,
            "columns": list(self.columns),
            "confidence": self.confidence,
            "pairwise": self.pairwise,
            "assumption": ASSUMPTION,
            "notes": list(self.notes),
            "skipped": list(self.skipped),
            "rows": [r.as_dict() for r in self.rows],
        }


def people_labels(table: ScoreTable, columns: Sequence[str]) -> tuple[BoolArray, FloatArray]:
    """Which cells people scored, and their label: the mean of ``columns`` that scored
    the cell (a panel's raters averaged; N/A and failed left out); NaN elsewhere (no
    columns: no cell is labelled)."""
    if not columns:
        return np.zeros(table.n_cells, dtype=bool), np.full(table.n_cells, np.nan)
    index = [table.judge_index(c) for c in columns]
    scored = table.state[:, index] == SCORED
    counts = scored.sum(axis=1)
    sums = np.where(scored, table.score[:, index], 0.0).sum(axis=1)
    labelled = counts > 0
    labels = np.full(table.n_cells, np.nan)
    labels[labelled] = sums[labelled] / counts[labelled]
    return labelled, labels


def calibrate(
    table: ScoreTable,
    columns: Sequence[str],
    judges: Sequence[str],
    members: Iterable[tuple[str, str, IntArray]],
    settings: CalibrationSettings = CalibrationSettings(),
    weights: FloatArray | None = None,
) -> Calibration:
    """Each judge of ``judges``, model of ``table`` and key of ``members`` calibrated to
    the people's ``columns`` (module docstring); ``weights``: one per cell (1 / the
    inclusion probability of its label; None: a uniform sample)."""
    labelled, labels = people_labels(table, columns)
    out = Calibration(
        people=", ".join(columns), columns=tuple(columns), confidence=settings.confidence
    )
    keys = list(members)
    for judge in judges:
        col = table.judge_index(judge)
        scored = table.state[:, col] == SCORED
        for m, model in enumerate(table.models):
            for dimension, key, cells in keys:
                mine = cells[(table.model[cells] == m) & scored[cells]]
                if not len(mine):
                    continue
                lab, unl = mine[labelled[mine]], mine[~labelled[mine]]
                if len(lab) < settings.min_labels:
                    out.skipped.append(
                        f"{judge}, {model}, {dimension} {key}: {len(lab)} label(s) "
                        f"(fewer than {settings.min_labels})"
                    )
                    continue
                # drawn with unequal probabilities: the judge's mean over every cell
                # (the unlabelled ones alone lean away from the cells drawn most)
                rest = unl if weights is None else mine
                estimate = ppi_mean(
                    labels[lab],
                    table.score[lab, col],
                    table.score[rest, col],
                    confidence=settings.confidence,
                    lam=settings.lam,
                    groups_labelled=table.instance[lab],
                    groups_unlabelled=table.instance[rest],
                    weights=None if weights is None else weights[lab],
                )
                row = CalibratedRow.of((judge, model, dimension, key), estimate)
                raw = float(table.score[mine, col].mean())  # every cell once
                out.rows.append(replace(row, unlabelled=len(unl), raw=raw))
    return out


# -- pairwise ------------------------------------------------------------------------------

#: a pairwise run's done row: (instance, first, second, criterion, judge, verdict)
VerdictRow = tuple[str, str, str, str, str, int]


def _verdict_items(
    rows: Iterable[VerdictRow], judge_of: Callable[[str], str]
) -> dict[str, dict[tuple[str, str, str, str], list[float]]]:
    """judge -> (A, B, instance, criterion) -> its verdicts for A (samples, raters)."""
    out: dict[str, dict[tuple[str, str, str, str], list[float]]] = {}
    for instance, first, second, criterion, judge, verdict in rows:
        value = VERDICT_VALUE.get(int(verdict))
        if value is None:
            continue
        a, b = sorted((first, second))
        if a != first:
            value = 1.0 - value
        key = (a, b, instance, criterion)
        out.setdefault(judge_of(judge), {}).setdefault(key, []).append(value)
    return out


def calibrate_pairs(
    rows: Iterable[VerdictRow],
    people: Sequence[str],
    judge_of: Callable[[str], str] = lambda j: j,
    settings: CalibrationSettings = CalibrationSettings(),
) -> Calibration:
    """Calibrated win rates per judge and model pair (``A vs B``: A's win rate over B,
    ties half) of a pairwise run's done rows, to the mean verdict of ``people`` (ledger
    names of raters) per item. Samples of a judge are averaged per item."""
    items = _verdict_items(rows, judge_of)
    wanted = set(people)
    label: dict[tuple[str, str, str, str], list[float]] = {}
    for name in wanted:
        for key, values in items.get(name, {}).items():
            label.setdefault(key, []).extend(values)
    out = Calibration(
        people=", ".join(people),
        columns=tuple(people),
        confidence=settings.confidence,
        pairwise=True,
    )
    out.notes.append(NO_RATINGS)
    for judge in sorted(j for j in items if j not in wanted and not j.startswith("human/")):
        by_pair: dict[tuple[str, str], list[tuple[str, float, float]]] = {}
        for item, values in items[judge].items():
            given = label.get(item)
            by_pair.setdefault(item[:2], []).append(
                (item[2], float(np.mean(values)), float(np.mean(given)) if given else np.nan)
            )
        for (a, b), cells in sorted(by_pair.items()):
            inst = {i: k for k, i in enumerate(sorted({c[0] for c in cells}))}
            groups = np.array([inst[c[0]] for c in cells], dtype=np.int64)
            f = np.array([c[1] for c in cells])
            y: FloatArray = np.array([c[2] for c in cells], dtype=np.float64)
            has = ~np.isnan(y)
            where = (judge, f"{a} vs {b}", "overall", "win rate")
            if int(has.sum()) < settings.min_labels:
                out.skipped.append(f"{judge}, {a} vs {b}: {int(has.sum())} label(s)")
                continue
            estimate = ppi_mean(
                y[has],
                f[has],
                f[~has],
                confidence=settings.confidence,
                lam=settings.lam,
                groups_labelled=groups[has],
                groups_unlabelled=groups[~has],
            )
            out.rows.append(CalibratedRow.of(where, estimate))
    return out
