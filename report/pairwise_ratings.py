"""Bradley-Terry ratings of the pairwise part of a report (pure): each model's rating
under one judge on one criterion (or all pooled), with intervals over the bootstrap
replicates; :mod:`report.pairwise_report` reports them as its ``rating`` rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from flask_eval.report import ratings
from flask_eval.report.bootstrap import DEFAULT_CONFIDENCE, FloatArray, percentile_interval
from flask_eval.report.pairwise import ALL_CRITERIA, Game, criteria_of


@dataclass(frozen=True)
class Rating:
    """One model's rating under one judge on one criterion (or all pooled)."""

    model: str
    judge: str
    criterion: str
    anchor: str
    rating: float | None
    ci: tuple[float, float] | None
    win_rate: float | None  # predicted, against the anchor
    win_ci: tuple[float, float] | None
    games: int
    regularized: bool = False


def _pair_sums(
    games: Sequence[Game], models: Sequence[str], instances: Sequence[str], weights: FloatArray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, FloatArray, FloatArray, np.ndarray]:
    """Per unordered pair (a < b in ``models``): A's score and games, point and per
    replicate ((B, pairs) each), and games per model."""
    index = {m: i for i, m in enumerate(models)}
    row = {iid: i for i, iid in enumerate(instances)}
    a, b = ratings.pair_index(models)
    pair = {(int(x), int(y)): k for k, (x, y) in enumerate(zip(a, b, strict=True))}
    n_inst, n_pairs = len(instances), len(a)
    s_mat, g_mat = np.zeros((n_inst, n_pairs)), np.zeros((n_inst, n_pairs))
    played = np.zeros(len(models))
    for g in games:
        x, y = index[g.model_a], index[g.model_b]
        k, flip = (pair[(x, y)], False) if x < y else (pair[(y, x)], True)
        s_mat[row[g.instance_id], k] += (1.0 - g.score) if flip else g.score
        g_mat[row[g.instance_id], k] += 1.0
        played[[x, y]] += 1
    reps_s, reps_g = weights.T @ s_mat, weights.T @ g_mat
    return a, b, s_mat.sum(axis=0), g_mat.sum(axis=0), reps_s, reps_g, played


def fit_ratings(
    games: Sequence[Game],
    models: Sequence[str],
    anchor: str,
    instances: Sequence[str],
    weights: FloatArray,
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[Rating]:
    """Bradley-Terry ratings per judge x criterion (and all pooled), with intervals over
    the replicates of ``weights`` (the point fit warms each replicate's fit up)."""
    out: list[Rating] = []
    judges = list(dict.fromkeys(g.judge for g in games))
    criteria = criteria_of(games)
    at = models.index(anchor)
    for judge in judges:
        for crit in criteria:
            mine = [g for g in games if g.judge == judge and crit in (ALL_CRITERIA, g.criterion)]
            if not mine:
                continue
            a, b, s, g, reps_s, reps_g, played = _pair_sums(mine, models, instances, weights)
            point = ratings.fit(len(models), a, b, s, g, at)
            lo = hi = np.full(len(models), np.nan)
            if weights.shape[1]:
                reps, _ = ratings.fit_replicates(
                    len(models), a, b, reps_s, reps_g, at, ratings.to_logits(point.ratings)
                )
                lo, hi = percentile_interval(reps.T, confidence)
            for m, name in enumerate(models):
                value = float(point.ratings[m])
                rated = bool(np.isfinite(value))
                ci = (float(lo[m]), float(hi[m])) if np.isfinite(lo[m]) and rated else None
                win = ratings.win_probability(value, 1000.0) if rated else None
                win_ci = (
                    None
                    if ci is None
                    else (
                        ratings.win_probability(ci[0], 1000.0),
                        ratings.win_probability(ci[1], 1000.0),
                    )
                )
                out.append(
                    Rating(
                        name,
                        judge,
                        crit,
                        anchor,
                        value if rated else None,
                        ci,
                        win,
                        win_ci,
                        int(played[m]),
                        point.regularized,
                    )
                )
    return out
