"""Position and length bias of pairwise judges (pure): see :mod:`report.pairwise` for
the combination of orders and the bootstrap.

- :func:`position`: per judge x criterion, position *consistency* (the share of
  comparisons judged in both orders whose verdict in model terms survives the swap) and
  *first-position preference* (the share of non-tie verdicts, over every judged order,
  that picked the response shown first);
- :func:`length_bias`: the win / tie / loss rates and score of the first-named model of
  each pair (A) by bins of the length difference ``len(A) - len(B)`` in characters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from flask_eval.core.types import VERDICT_FIRST, VERDICT_TIE
from flask_eval.report.bootstrap import DEFAULT_CONFIDENCE, FloatArray
from flask_eval.report.pairwise import (
    SCORE_OF,
    Comparison,
    Game,
    Interval,
    cells_of,
    criteria_of,
    criterion_cells,
    in_order,
    shares,
)

#: edges (characters, len(A) - len(B)) of the length-bias bins
LENGTH_EDGES: tuple[int, ...] = (-1000, -500, -200, -50, 50, 200, 500, 1000)


@dataclass(frozen=True)
class Position:
    """Position bias of one judge on one criterion (or all pooled); None: no data."""

    judge: str
    criterion: str
    n_swapped: int
    consistency: float | None
    n_decisive: int  # judged orders with a non-tie verdict
    first_preference: float | None
    consistency_ci: Interval = None
    first_preference_ci: Interval = None


@dataclass(frozen=True)
class LengthBin:
    """The score of the first-named model (A) when ``len(A) - len(B)`` is in the bin."""

    judge: str
    criterion: str
    key: str  # the bin, e.g. "-200..-50" or ">=1000"
    low: float  # bounds of the length difference, characters (may be +-inf)
    high: float
    n: int
    win: float
    tie: float
    loss: float
    score: float
    score_ci: Interval = None


def position(
    records: Sequence[Comparison],
    games: Sequence[Game],
    instances: Sequence[str],
    weights: FloatArray,
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[Position]:
    """Position consistency and first-position preference per judge x criterion."""
    row = {iid: i for i, iid in enumerate(instances)}
    several = len(criteria_of(records)) > 1
    both = [g for g in games if g.swapped]
    cells_c, game_c, cell_c = cells_of(both, [(g.judge,) for g in both], several)
    cons = shares(
        np.array([row[both[g].instance_id] for g in game_c.tolist()], dtype=np.int64),
        cell_c,
        np.array([0 if both[g].consistent else 1 for g in game_c.tolist()], dtype=np.int64),
        len(cells_c),
        2,
        weights,
        confidence,
    )
    decisive = [r for r in records if r.verdict != VERDICT_TIE]
    index: dict[tuple[str, str], int] = {}
    inst, cell, cat = [], [], []
    for r in decisive:
        for crit in criterion_cells(r.criterion, several):
            inst.append(row[r.instance_id])
            cell.append(index.setdefault((r.judge, crit), len(index)))
            cat.append(0 if r.verdict == VERDICT_FIRST else 1)
    first = shares(
        np.array(inst, dtype=np.int64),
        np.array(cell, dtype=np.int64),
        np.array(cat, dtype=np.int64),
        len(index),
        2,
        weights,
        confidence,
    )
    where_c = {key: c for c, key in enumerate(cells_c)}
    keys = dict.fromkeys(
        [*((r.judge, crit) for r in records for crit in criterion_cells(r.criterion, several))]
    )
    out = []
    for judge, crit in keys:
        c, f = where_c.get((judge, crit)), index.get((judge, crit))
        n_sw = int(cons.counts[c].sum()) if c is not None else 0
        n_dec = int(first.counts[f].sum()) if f is not None else 0
        out.append(
            Position(
                judge,
                crit,
                n_sw,
                float(cons.shares[c, 0]) if c is not None else None,
                n_dec,
                float(first.shares[f, 0]) if f is not None else None,
                cons.interval(c, 0) if c is not None else None,
                first.interval(f, 0) if f is not None else None,
            )
        )
    return in_order(out, lambda p: (p.judge, p.criterion), games)


def _bin_label(low: float, high: float) -> str:
    if not np.isfinite(low):
        return f"<{int(high)}"
    if not np.isfinite(high):
        return f">={int(low)}"
    return f"{int(low)}..{int(high)}"


def length_bias(
    games: Sequence[Game],
    lengths: Mapping[tuple[str, str], int],
    instances: Sequence[str],
    weights: FloatArray,
    confidence: float = DEFAULT_CONFIDENCE,
    edges: Sequence[int] = LENGTH_EDGES,
) -> list[LengthBin]:
    """A's win/tie/loss rates and score per bin of ``len(A) - len(B)`` (characters), per
    judge x criterion. ``lengths`` maps (model, instance) to the response's length; games
    whose lengths are unknown are left out. Bins are ``[edge_i, edge_i+1)``, plus one
    below the first edge and one from the last edge up; empty bins are left out."""
    bounds = [-np.inf, *map(float, edges), np.inf]
    known = [
        g
        for g in games
        if (g.model_a, g.instance_id) in lengths and (g.model_b, g.instance_id) in lengths
    ]
    diff = np.array(
        [lengths[(g.model_a, g.instance_id)] - lengths[(g.model_b, g.instance_id)] for g in known],
        dtype=np.float64,
    )
    which = np.searchsorted(np.array(bounds[1:-1]), diff, side="right")
    row = {iid: i for i, iid in enumerate(instances)}
    cells, game_of, cell_of = cells_of(
        known,
        [(g.judge, str(int(b))) for g, b in zip(known, which.tolist(), strict=True)],
        len(criteria_of(games)) > 1,
    )
    s = shares(
        np.array([row[known[g].instance_id] for g in game_of.tolist()], dtype=np.int64),
        cell_of,
        np.array([known[g].outcome for g in game_of.tolist()], dtype=np.int64),
        len(cells),
        3,
        weights,
        confidence,
        np.array(SCORE_OF),
    )
    out = []
    for c, (judge, b, crit) in enumerate(cells):
        lo, hi = bounds[int(b)], bounds[int(b) + 1]
        win, tie, loss, score = (float(v) for v in s.shares[c])
        out.append(
            LengthBin(
                judge=judge,
                criterion=crit,
                key=_bin_label(lo, hi),
                low=lo,
                high=hi,
                n=int(s.counts[c].sum()),
                win=win,
                tie=tie,
                loss=loss,
                score=score,
                score_ci=s.interval(c, 3),
            )
        )
    rank = {_bin_label(bounds[i], bounds[i + 1]): i for i in range(len(bounds) - 1)}
    return _sorted_bins(out, known, rank)


def _sorted_bins(
    out: list[LengthBin], games: Sequence[Game], rank: Mapping[str, int]
) -> list[LengthBin]:
    first = in_order(out, lambda x: (x.judge, x.criterion), games)
    order = {(x.judge, x.criterion): i for i, x in enumerate(first)}
    return sorted(out, key=lambda x: (order[(x.judge, x.criterion)], rank[x.key]))
