"""Pairwise judgments aggregated: win / tie / loss rates, position bias, length bias (pure).

Input: :class:`Comparison` records, one per judged order (the ledger's pairwise rows that
are done: ``first`` was shown first, ``verdict`` is a ``core.types.VERDICT_*`` by
position). Failed and unfinished rows are no records; they are counted apart.

**Both orders combined.** A comparison is one (instance, unordered model pair, criterion,
judge). Its models are named A and B in a stable order (A comes first in the model order
given, by default sorted names). Each judged order gives a verdict in model terms (A, B
or tie). When both orders were judged:

- both say A: A wins; both say B: B wins; both say tie: tie;
- anything else is a tie: a swap that flips the verdict (each order preferred the
  response shown first, or each the one shown second), and also one tie plus one win
  (the conservative rule of MT-Bench, Zheng et al. 2023, section 3.4: a win only when
  the answer is preferred in both orders, otherwise a tie).

A comparison judged in one order only counts as that order says. A's *score* is
``win + tie / 2`` (ties count half, as in Arena-Hard and AlpacaEval).

**Position.** Per judge (x criterion): *consistency* = the share of comparisons judged in
both orders whose model-terms verdict survives the swap (both orders agree, ties
included); *first-position preference* = the share of the judge's non-tie verdicts, over
every judged order, that picked the response shown first (0.5: no preference).

**Intervals** are percentile bootstrap intervals that resample instances, with the
weights of :func:`report.bootstrap.instance_weights` over the sorted instance ids of the
records: the same records, replicates and seed always give the same intervals.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from flask_eval.core.types import VERDICT_FIRST, VERDICT_TIE, VERDICTS
from flask_eval.report.bootstrap import DEFAULT_CONFIDENCE, FloatArray, percentile_interval

IntArray = npt.NDArray[np.int64]

#: the criterion key of every criterion pooled
ALL_CRITERIA = "all"
#: outcomes of a comparison for model A
WIN, TIE, LOSS = 0, 1, 2
SCORE_OF = (1.0, 0.5, 0.0)

Interval = tuple[float, float] | None


@dataclass(frozen=True)
class Comparison:
    """One judged order: ``first`` was shown first, ``verdict`` a ``VERDICT_*`` by position."""

    instance_id: str
    first: str
    second: str
    criterion: str
    judge: str
    verdict: int


@dataclass(frozen=True)
class Game:
    """A comparison with its orders combined: the outcome for ``model_a`` (:data:`WIN`,
    :data:`TIE`, :data:`LOSS`), whether both orders were judged and, if so, whether they
    agreed (``consistent``)."""

    instance_id: str
    model_a: str
    model_b: str
    criterion: str
    judge: str
    outcome: int
    swapped: bool
    consistent: bool | None

    @property
    def score(self) -> float:
        return SCORE_OF[self.outcome]


def model_order(records: Iterable[Comparison], models: Sequence[str] = ()) -> list[str]:
    """``models`` then any other model of the records, sorted: the stable order of pairs."""
    seen = {m for c in records for m in (c.first, c.second)}
    return [*dict.fromkeys(m for m in models), *sorted(seen - set(models))]


def _in_a_terms(record: Comparison, model_a: str) -> int:
    """The record's verdict as an outcome for ``model_a``."""
    if record.verdict not in VERDICTS:
        raise ValueError(f"unknown verdict {record.verdict!r}")
    if record.verdict == VERDICT_TIE:
        return TIE
    picked_first = record.verdict == VERDICT_FIRST
    return WIN if picked_first == (record.first == model_a) else LOSS


def combine(records: Iterable[Comparison], models: Sequence[str] = ()) -> list[Game]:
    """Every comparison with its orders combined (the rule in the module docstring).

    Raises ValueError on a record comparing a model with itself, an unknown verdict, or
    two records of the same order of one comparison.
    """
    records = list(records)
    rank = {m: i for i, m in enumerate(model_order(records, models))}
    groups: dict[tuple[str, str, str, str, str], dict[str, Comparison]] = {}
    for c in records:
        if c.first == c.second:
            raise ValueError(f"comparison of {c.first!r} with itself on {c.instance_id!r}")
        a, b = sorted((c.first, c.second), key=rank.__getitem__)
        orders = groups.setdefault((c.instance_id, a, b, c.criterion, c.judge), {})
        if c.first in orders:
            raise ValueError(
                f"two judgments of {c.first} vs {c.second} on {c.instance_id!r}, "
                f"{c.criterion}, by {c.judge}"
            )
        orders[c.first] = c
    games = []
    for (instance, a, b, criterion, judge), orders in groups.items():
        outcomes = [_in_a_terms(r, a) for r in orders.values()]
        swapped = len(outcomes) == 2
        consistent = outcomes[0] == outcomes[1] if swapped else None
        outcome = outcomes[0] if consistent in (None, True) else TIE
        games.append(Game(instance, a, b, criterion, judge, outcome, swapped, consistent))
    return games


# -- bootstrap of category shares ------------------------------------------------------


@dataclass(frozen=True)
class Shares:
    """Per cell: counts of each category, their shares and percentile intervals."""

    counts: FloatArray  # (cells, k)
    shares: FloatArray  # (cells, k); NaN for an empty cell
    low: FloatArray  # (cells, k)
    high: FloatArray

    def interval(self, cell: int, category: int) -> Interval:
        lo, hi = float(self.low[cell, category]), float(self.high[cell, category])
        return (lo, hi) if np.isfinite(lo) and np.isfinite(hi) else None


def shares(
    instance: IntArray,
    cell: IntArray,
    category: IntArray,
    n_cells: int,
    k: int,
    weights: FloatArray,
    confidence: float = DEFAULT_CONFIDENCE,
    values: FloatArray | None = None,
) -> Shares:
    """Shares of ``k`` categories in each cell, with intervals resampling instances.

    One observation per entry (``instance``, ``cell``, ``category``); ``weights`` are the
    ``(instances, B)`` replicate weights. ``values`` (length ``k``), when given, adds
    one more column: the mean value of the categories (e.g. a score), with its interval.
    """
    n_inst = weights.shape[0]
    width = n_cells * k
    from scipy.sparse import coo_matrix  # only when a pairwise report is built

    data = coo_matrix(
        (np.ones(len(instance)), (instance, cell * k + category)), shape=(n_inst, width)
    ).tocsr()
    counts = np.asarray(data.sum(axis=0)).reshape(n_cells, k)
    extra = 0 if values is None else 1
    with np.errstate(invalid="ignore", divide="ignore"):
        point = counts / counts.sum(axis=1, keepdims=True)
    if values is not None:
        point = np.concatenate([point, point @ np.asarray(values)[:, None]], axis=1)
    low = np.full((n_cells, k + extra), np.nan)
    high = low.copy()
    if weights.shape[1] and len(instance):
        reps = np.asarray(data.T @ weights).reshape(n_cells, k, -1)  # (cells, k, B)
        with np.errstate(invalid="ignore", divide="ignore"):
            rates = reps / reps.sum(axis=1, keepdims=True)
        if values is not None:
            mean = np.einsum("ckb,k->cb", rates, np.asarray(values))[:, None, :]
            rates = np.concatenate([rates, mean], axis=1)
        lo, hi = percentile_interval(rates.reshape(n_cells * (k + extra), -1), confidence)
        low, high = lo.reshape(n_cells, k + extra), hi.reshape(n_cells, k + extra)
    return Shares(counts, point, low, high)


# -- results ---------------------------------------------------------------------------


@dataclass(frozen=True)
class WinRate:
    """A vs B under one judge on one criterion (or :data:`ALL_CRITERIA` pooled)."""

    model_a: str
    model_b: str
    judge: str
    criterion: str
    n: int  # comparisons
    n_swapped: int  # of which judged in both orders
    win: float
    tie: float
    loss: float
    score: float  # win + tie / 2
    win_ci: Interval = None
    tie_ci: Interval = None
    loss_ci: Interval = None
    score_ci: Interval = None


def criteria_of(items: Iterable[Game] | Iterable[Comparison]) -> list[str]:
    """The criterion keys of a report on ``items``: each criterion, then
    :data:`ALL_CRITERIA` pooled; a single criterion is reported as :data:`ALL_CRITERIA`
    alone (its rows would repeat the pooled ones)."""
    criteria = list(dict.fromkeys(x.criterion for x in items))
    return [*criteria, ALL_CRITERIA] if len(criteria) > 1 else [ALL_CRITERIA]


def criterion_cells(criterion: str, several: bool) -> tuple[str, ...]:
    """The criterion keys one judgment counts toward (see :func:`criteria_of`)."""
    return (criterion, ALL_CRITERIA) if several else (ALL_CRITERIA,)


def _index(values: Sequence[str]) -> tuple[list[str], dict[str, int]]:
    names = list(dict.fromkeys(values))
    return names, {v: i for i, v in enumerate(names)}


def instances_of(records: Iterable[Comparison]) -> list[str]:
    """The instances resampled: every instance id of the records, sorted."""
    return sorted({c.instance_id for c in records})


def cells_of(
    games: Sequence[Game], keys: Sequence[tuple[str, ...]], several: bool | None = None
) -> tuple[list[tuple[str, ...]], IntArray, IntArray]:
    """Cells ``key + (criterion,)`` of every game, each game also in the
    :data:`ALL_CRITERIA` cell (only there when ``several`` is false: one criterion;
    default: whether ``games`` have several): (cells, entry -> game, entry -> cell)."""
    if several is None:
        several = len(criteria_of(games)) > 1
    index: dict[tuple[str, ...], int] = {}
    game_of, cell_of = [], []
    for g, key in enumerate(keys):
        for crit in criterion_cells(games[g].criterion, several):
            cell = index.setdefault((*key, crit), len(index))
            game_of.append(g)
            cell_of.append(cell)
    return list(index), np.array(game_of, dtype=np.int64), np.array(cell_of, dtype=np.int64)


def win_rates(
    games: Sequence[Game],
    instances: Sequence[str],
    weights: FloatArray,
    confidence: float = DEFAULT_CONFIDENCE,
    several: bool | None = None,
) -> list[WinRate]:
    """Win, tie and loss rates of A vs B per pair x judge x criterion (and all pooled;
    ``several``: see :func:`cells_of`).

    ``instances`` are the rows of ``weights`` (see :func:`instances_of`).
    """
    if not games:
        return []
    row = {iid: i for i, iid in enumerate(instances)}
    keys = [(g.model_a, g.model_b, g.judge) for g in games]
    cells, game_of, cell_of = cells_of(games, keys, several)
    inst = np.array([row[games[g].instance_id] for g in game_of.tolist()], dtype=np.int64)
    outcome = np.array([games[g].outcome for g in game_of.tolist()], dtype=np.int64)
    swapped = np.bincount(
        cell_of, np.array([games[g].swapped for g in game_of.tolist()], dtype=float), len(cells)
    )
    s = shares(inst, cell_of, outcome, len(cells), 3, weights, confidence, np.array(SCORE_OF))
    out = []
    for c, (a, b, judge, crit) in enumerate(cells):
        win, tie, loss, score = (float(v) for v in s.shares[c])
        out.append(
            WinRate(
                model_a=a,
                model_b=b,
                judge=judge,
                criterion=crit,
                n=int(s.counts[c].sum()),
                n_swapped=int(swapped[c]),
                win=win,
                tie=tie,
                loss=loss,
                score=score,
                win_ci=s.interval(c, WIN),
                tie_ci=s.interval(c, TIE),
                loss_ci=s.interval(c, LOSS),
                score_ci=s.interval(c, 3),
            )
        )
    return in_order(out, lambda w: (w.judge, w.criterion, w.model_a, w.model_b), games)


T = TypeVar("T")


def in_order(items: list[T], key: Callable[[T], tuple[str, ...]], games: Sequence[Game]) -> list[T]:
    """Judges, criteria and models in their first-seen order (criterion "all" last);
    ``key`` gives (judge, criterion, *models) of an item."""
    judges = _index([g.judge for g in games])[1]
    criteria = _index(criteria_of(games))[1]
    models = _index([m for g in games for m in (g.model_a, g.model_b)])[1]

    def order(item: T) -> tuple[int, ...]:
        judge, crit, *names = key(item)
        return (judges[judge], criteria.get(crit, -1), *(models.get(n, -1) for n in names))

    return sorted(items, key=order)
