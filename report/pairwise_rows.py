"""The rows of the pairwise part of a report (pure): the dimensions, their fields and a
row builder per figure; :mod:`report.pairwise_report` says what each row holds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask_eval.report.pairwise import ALL_CRITERIA, WinRate
from flask_eval.report.pairwise_bias import LengthBin, Position
from flask_eval.report.pairwise_ratings import Rating
from flask_eval.report.pairwise_style import Controlled
from flask_eval.report.pairwise_tally import PairScore
from flask_eval.report.row_fields import FIELDS

PAIRWISE, RATING, POSITION, LENGTH_BIAS = "pairwise", "rating", "position", "length_bias"
ONE_ORDER = "pairwise_one_order"
LENGTH_CONTROLLED, STYLE_CONTROLLED = "length_controlled", "style_controlled"
LC_UNPENALIZED = "length_controlled_unpenalized"
BY_TURN, BY_CATEGORY = "pairwise_turn", "pairwise_category"
DIMENSIONS = (
    PAIRWISE,
    BY_TURN,
    BY_CATEGORY,
    RATING,
    POSITION,
    LENGTH_BIAS,
    ONE_ORDER,
    LENGTH_CONTROLLED,
    LC_UNPENALIZED,
    STYLE_CONTROLLED,
)
PAIRWISE_FIELDS: tuple[str, ...] = (
    *FIELDS,
    "criterion",
    "model_b",
    "win",
    "win_low",
    "win_high",
    "tie",
    "tie_low",
    "tie_high",
    "loss",
    "loss_low",
    "loss_high",
    "n_swapped",
    "win_rate",
    "anchor",
    "first_preference",
    "first_low",
    "first_high",
    "n_decisive",
)


def blank_row() -> dict[str, Any]:
    return dict.fromkeys(PAIRWISE_FIELDS) | {"n_na": 0, "n_failed": 0}


def _ci(interval: tuple[float, float] | None) -> tuple[float | None, float | None]:
    return (None, None) if interval is None else interval


def _failed(
    failed: Mapping[tuple[str, str, str, str], int],
    judge: str,
    crit: str,
    pair: frozenset[str] | None = None,
) -> int:
    return sum(
        n
        for (j, first, second, c), n in failed.items()
        if j == judge
        and (crit == ALL_CRITERIA or c == crit)
        and (pair is None or frozenset((first, second)) == pair)
    )


def pair_row(
    w: WinRate, failed: Mapping[tuple[str, str, str, str], int], dimension: str = PAIRWISE
) -> dict[str, Any]:
    row = blank_row()
    row.update(
        model=w.model_a,
        model_b=w.model_b,
        judge=w.judge,
        dimension=dimension,
        key=f"{w.model_a} vs {w.model_b}",
        criterion=w.criterion,
        mean=w.score,
        n=w.n,
        n_swapped=w.n_swapped,
        win=w.win,
        tie=w.tie,
        loss=w.loss,
        n_failed=_failed(failed, w.judge, w.criterion, frozenset((w.model_a, w.model_b))),
    )
    row["ci_low"], row["ci_high"] = _ci(w.score_ci)
    for name, interval in (("win", w.win_ci), ("tie", w.tie_ci), ("loss", w.loss_ci)):
        row[f"{name}_low"], row[f"{name}_high"] = _ci(interval)
    return row


def rating_row(r: Rating) -> dict[str, Any]:
    row = blank_row()
    row.update(
        model=r.model,
        judge=r.judge,
        dimension=RATING,
        key=r.model,
        criterion=r.criterion,
        mean=r.rating,
        n=r.games,
        win_rate=r.win_rate,
        anchor=r.anchor,
    )
    row["ci_low"], row["ci_high"] = _ci(r.ci)
    row["win_low"], row["win_high"] = _ci(r.win_ci)
    return row


def position_row(p: Position, failed: Mapping[tuple[str, str, str, str], int]) -> dict[str, Any]:
    row = blank_row()
    row.update(
        model="",
        judge=p.judge,
        dimension=POSITION,
        key=p.judge,
        criterion=p.criterion,
        mean=p.consistency,
        n=p.n_swapped,
        first_preference=p.first_preference,
        n_decisive=p.n_decisive,
        n_failed=_failed(failed, p.judge, p.criterion),
    )
    row["ci_low"], row["ci_high"] = _ci(p.consistency_ci)
    row["first_low"], row["first_high"] = _ci(p.first_preference_ci)
    return row


def length_row(b: LengthBin) -> dict[str, Any]:
    row = blank_row()
    row.update(
        model="",
        judge=b.judge,
        dimension=LENGTH_BIAS,
        key=b.key,
        criterion=b.criterion,
        mean=b.score,
        n=b.n,
        win=b.win,
        tie=b.tie,
        loss=b.loss,
    )
    row["ci_low"], row["ci_high"] = _ci(b.score_ci)
    return row


def controlled_rows(c: Controlled) -> list[dict[str, Any]]:
    lc, sc = blank_row(), blank_row()
    lc.update(
        model=c.model,
        judge=c.judge,
        dimension=LENGTH_CONTROLLED,
        key=c.model,
        criterion=ALL_CRITERIA,
        mean=c.lc_win,
        n=c.games_vs_anchor,
        win_rate=c.raw_win,
        anchor=c.anchor,
    )
    lc["ci_low"], lc["ci_high"] = _ci(c.lc_ci)
    plain = {
        **lc,
        "dimension": LC_UNPENALIZED,
        "mean": c.lc_win_unpenalized,
        "ci_low": None,
        "ci_high": None,
    }
    sc.update(
        model=c.model,
        judge=c.judge,
        dimension=STYLE_CONTROLLED,
        key=c.model,
        criterion=ALL_CRITERIA,
        mean=c.style_rating,
        n=c.games,
        win_rate=c.style_win,
        anchor=c.anchor,
    )
    sc["ci_low"], sc["ci_high"] = _ci(c.style_ci)
    sc["win_low"], sc["win_high"] = _ci(c.style_win_ci)
    return [lc, plain, sc]


def breakdown_row(p: PairScore) -> dict[str, Any]:
    """A model's tally in one turn (:data:`BY_TURN`) or category (:data:`BY_CATEGORY`),
    criteria pooled."""
    row = blank_row() | p.row(BY_TURN if p.category is None else BY_CATEGORY)
    return row | {"criterion": ALL_CRITERIA}
