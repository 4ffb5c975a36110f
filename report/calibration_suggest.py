"""Which cells people should label next (pure): a Poisson sample of the unlabelled cells
with known inclusion probabilities, proportional to how much a label would shrink the
calibrated intervals, so that the labels can be weighed (1 / probability) by
:func:`report.calibration.calibrate` and the estimate stays unbiased.

A cell's expected gain is the spread of the judges' scores on it (their disagreement)
plus the spread of the people's labels around the judges' mean in its skill (the
residual a label corrects; over every labelled cell when its skill has fewer than two,
1 when there are none), floored at ``floor`` times the mean gain so that every cell has
a chance. Probabilities are ``size * gain / sum(gain)``, capped at 1 (the excess spread
over the rest); each cell is then drawn independently with its probability.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from flask_eval.report.calibration import FloatArray, people_labels
from flask_eval.report.scores import SCORED, ScoreTable

#: the columns of a labels template (a reference file `--reference NAME=FILE` reads back)
TEMPLATE_COLUMNS = ("model", "instance_id", "skill", "score", "probability")


@dataclass(frozen=True)
class Suggestion:
    """A cell to label and the probability it had of being drawn."""

    model: str
    instance_id: str
    skill: str
    probability: float


def _capped(gain: FloatArray, size: float) -> FloatArray:
    """Inclusion probabilities proportional to ``gain`` summing to ``size``, capped at 1."""
    p = np.zeros_like(gain)
    free = np.ones(len(gain), dtype=bool)
    left = min(size, float(len(gain)))
    for _ in range(len(gain) + 1):
        total = float(gain[free].sum())
        if total <= 0 or left <= 0:
            break
        p[free] = left * gain[free] / total
        over = free & (p >= 1.0)
        if not over.any():
            break
        p[over] = 1.0
        left -= float(over.sum())
        free &= ~over
    return np.minimum(p, 1.0)


def expected_gain(
    table: ScoreTable, columns: Sequence[str], judges: Sequence[str], floor: float = 0.1
) -> FloatArray:
    """Each cell's expected gain from a label (module docstring); 0 for cells already
    labelled or no judge scored."""
    labelled, labels = people_labels(table, columns)
    index = [table.judge_index(j) for j in judges]
    scores = np.where(table.state[:, index] == SCORED, table.score[:, index], np.nan)
    counts = (~np.isnan(scores)).sum(axis=1)
    judged = counts > 0
    mean = np.full(table.n_cells, np.nan)
    mean[judged] = np.nansum(scores[judged], axis=1) / counts[judged]
    spread = np.zeros(table.n_cells)
    several = counts > 1
    spread[several] = np.nanstd(scores[several], axis=1)
    resid = labels - mean
    known = labelled & judged
    overall = float(np.std(resid[known])) if known.sum() > 1 else 1.0
    per_skill = np.full(len(table.skills), overall)
    for s in range(len(table.skills)):
        mine = known & (table.skill == s)
        if mine.sum() > 1:
            per_skill[s] = float(np.std(resid[mine]))
    gain = spread + per_skill[table.skill]
    candidates = judged & ~labelled
    if candidates.any():
        gain = np.maximum(gain, floor * float(gain[candidates].mean()) + 1e-12)
    return np.where(candidates, gain, 0.0)


def suggest(
    table: ScoreTable,
    columns: Sequence[str],
    judges: Sequence[str],
    size: int,
    *,
    seed: int = 0,
    floor: float = 0.1,
) -> list[Suggestion]:
    """About ``size`` unlabelled cells (a Poisson sample: the number drawn varies around
    ``size``) with their inclusion probabilities, the largest expected gain first."""
    gain = expected_gain(table, columns, judges, floor)
    p = _capped(gain, float(size))
    drawn = np.random.default_rng(seed).random(table.n_cells) < p
    picked = np.flatnonzero(drawn & (p > 0))
    picked = picked[np.argsort(-gain[picked], kind="stable")]
    return [
        Suggestion(
            table.models[int(table.model[c])],
            table.instances[int(table.instance[c])],
            table.skills[int(table.skill[c])],
            float(p[c]),
        )
        for c in picked.tolist()
    ]


def template_csv(suggestions: Sequence[Suggestion]) -> str:
    """A labels template: one row per cell, its score empty for people to fill."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(TEMPLATE_COLUMNS)
    for s in suggestions:
        writer.writerow((s.model, s.instance_id, s.skill, "", f"{s.probability:.6g}"))
    return buffer.getvalue()
