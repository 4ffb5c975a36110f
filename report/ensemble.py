"""Ensembles: a virtual judge that combines several judges' scores (pure numpy).

For each (model, instance, skill) cell, with ``k`` member judges that gave a score, ``a``
that said N/A, ``f`` that failed and ``u`` without a finished judgment, and quorum ``q``:

- ``k >= q``: **scored**, the combination of the ``k`` scores;
- otherwise, if ``u > 0`` and ``k + a + u >= q``: **not finished** (ignored, like a
  pending judgment: the quorum may still be reached);
- otherwise, if ``k + a >= q``: **N/A** (enough judges answered, too few gave a score);
- otherwise, if any member finished: **failed** (too few successful judges);
- otherwise no judgment.

Combinations: ``mean`` (a fractional score), ``median`` (halves possible), ``majority``
(the score given by a strict majority of the ``k`` scoring judges, i.e. by more than
``k / 2`` of them; when no score has a strict majority, the median of the ``k`` scores:
two judges giving 3 and 5 make 4, three giving 3, 3, 5 make 3, and 2, 3, 5 make 3).

An ensemble is named ``ensemble/{method}@q{quorum}`` and is reported like any judge.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from flask_eval.report.scores import FAILED, NA, NONE, SCORED, FloatArray, ScoreTable, StateArray

METHODS: tuple[str, ...] = ("mean", "median", "majority")
PREFIX = "ensemble/"


@dataclass(frozen=True)
class EnsembleSpec:
    """``METHOD[:QUORUM]``, e.g. ``mean:2``; the quorum defaults to 1."""

    method: str
    quorum: int = 1

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(
                f"unknown ensemble method {self.method!r}; choose one of: {', '.join(METHODS)}"
            )
        if self.quorum < 1:
            raise ValueError(f"ensemble quorum must be >= 1, got {self.quorum}")

    @property
    def name(self) -> str:
        return f"{PREFIX}{self.method}@q{self.quorum}"

    @classmethod
    def parse(cls, text: str) -> EnsembleSpec:
        method, sep, quorum = text.strip().partition(":")
        if not sep:
            return cls(method.strip().lower())
        try:
            q = int(quorum)
        except ValueError:
            raise ValueError(f"invalid ensemble quorum in {text!r}: use METHOD[:QUORUM]") from None
        return cls(method.strip().lower(), q)


def _majority(scores: FloatArray) -> FloatArray:
    """Row-wise: the score of a strict majority of the finite entries, else their median.

    Rows without a finite entry give NaN. A strict majority is unique when it exists, so
    no tie-break is needed; without one (two judges disagreeing, three all different, a
    2-2 split) the median is the central score, as ``median`` would give.
    """
    result = np.full(len(scores), np.nan)
    finite = np.isfinite(scores)
    k = finite.sum(axis=1)
    has = k > 0
    if not has.any():
        return result
    values = np.unique(scores[finite])
    counts = np.stack([(scores == v).sum(axis=1) for v in values], axis=1)  # (cells, values)
    best = counts.argmax(axis=1)
    majority = 2 * counts[np.arange(len(scores)), best] > k
    with np.errstate(all="ignore"):
        median = np.nanmedian(np.where(has[:, None], scores, 0.0), axis=1)
    result[has] = np.where(majority, values[best], median)[has]
    return result


def combine(
    state: StateArray, score: FloatArray, method: str, quorum: int
) -> tuple[StateArray, FloatArray]:
    """The ensemble's (state, score) per cell from its members' columns ``(cells, m)``."""
    if method not in METHODS:
        raise ValueError(f"unknown ensemble method {method!r}")
    scored = state == SCORED
    k = scored.sum(axis=1)
    a = (state == NA).sum(axis=1)
    f = (state == FAILED).sum(axis=1)
    u = (state == NONE).sum(axis=1)
    values = np.where(scored, score, np.nan)
    out = np.full(len(state), np.nan)
    ok = k >= quorum
    if ok.any():
        chosen = values[ok]
        if method == "mean":
            out[ok] = np.nanmean(chosen, axis=1)
        elif method == "median":
            out[ok] = np.nanmedian(chosen, axis=1)
        else:
            out[ok] = _majority(chosen)
    result = np.full(len(state), NONE, dtype=np.int8)
    open_ = ~ok & (u > 0) & (k + a + u >= quorum)
    na = ~ok & ~open_ & (k + a >= quorum)
    failed = ~ok & ~open_ & ~na & (k + a + f > 0)
    result[ok] = SCORED
    result[na] = NA
    result[failed] = FAILED
    return result, out


def add_ensembles(
    table: ScoreTable, specs: Sequence[EnsembleSpec], members: Sequence[str] = ()
) -> ScoreTable:
    """``table`` with one more judge column per ensemble.

    ``members`` are the judges combined (default: every judge of the table that is not
    itself an ensemble). Raises ValueError on an unknown member, a quorum above the number
    of members, or the same ensemble twice.
    """
    if not specs:
        return table
    chosen = list(members) or [j for j in table.judges if not j.startswith(PREFIX)]
    unknown = [m for m in chosen if m not in table.judges]
    if unknown:
        raise ValueError(f"unknown ensemble judge(s): {', '.join(unknown)}")
    names = [s.name for s in specs]
    if len(set(names)) != len(names) or set(names) & set(table.judges):
        raise ValueError("the same ensemble is given twice")
    cols = [table.judge_index(m) for m in chosen]
    states, scores = [], []
    for spec in specs:
        if spec.quorum > len(cols):
            raise ValueError(
                f"ensemble {spec.name}: quorum {spec.quorum} > {len(cols)} member judge(s)"
            )
        st, sc = combine(table.state[:, cols], table.score[:, cols], spec.method, spec.quorum)
        states.append(st)
        scores.append(sc)
    return table.with_judges(names, np.stack(states, axis=1), np.stack(scores, axis=1))
