"""The pairwise part of a report: win rates, ratings, position and length bias as rows of
the report's row contract (pure; ``app.report`` builds it, ``report.render`` and
``report.html`` draw it).

Rows (JSON ``rows``, CSV lines) keep the fields of :data:`report.row_fields.FIELDS`
(model, judge, dimension, key, mean, n, n_na, n_failed, ci_low, ci_high) and add
``criterion`` (a criterion, or ``all`` pooled) and the fields of their dimension
(:data:`PAIRWISE_FIELDS` is the union, None where a field does not apply):

- ``pairwise``: key ``"A vs B"``, model A, ``model_b`` B; ``mean`` = A's score (win +
  tie / 2) with its interval; ``win``, ``tie``, ``loss`` rates with ``*_low`` /
  ``*_high`` intervals; ``n`` comparisons (``n_swapped`` of them judged in both orders);
  ``n_failed`` judgments of the pair that failed;
- ``rating``: key = model = the rated model; ``mean`` = its Bradley-Terry rating (Elo
  scale, the ``anchor`` at 1000) with its interval; ``win_rate`` = the predicted win
  rate against the anchor (Arena-Hard's leaderboard column) with ``win_low`` /
  ``win_high``; ``n`` = games the model played;
- ``position``: key = judge (model ""): ``mean`` = ``consistency`` (with its interval),
  ``first_preference`` with ``first_low`` / ``first_high``; ``n`` = comparisons judged
  in both orders, ``n_decisive`` = judged orders with a non-tie verdict;
- ``length_bias``: key = a bin of ``len(A) - len(B)`` in characters (model ""): ``mean``
  = the score of the first-named model A (win + tie / 2) with its interval; ``win``,
  ``tie``, ``loss``; ``n`` comparisons;
- ``length_controlled``: key = model = the model: ``mean`` = its AlpacaEval 2
  length-controlled win rate against the ``anchor`` as AlpacaEval reports it by default
  (cross-validated L1 penalty, :mod:`report.lc_winrate`) with its interval; ``win_rate`` =
  its plain score against the anchor; ``n`` = its games against the anchor (criteria
  pooled);
- ``length_controlled_unpenalized``: as ``length_controlled``, ``mean`` = the same
  formula's unpenalised maximum likelihood fit (:func:`report.style.length_controlled`;
  None when it has no finite maximum), no interval;
- ``style_controlled``: key = model: ``mean`` = its Arena-Hard style-controlled rating
  (anchor at 1000) with its interval; ``win_rate`` = the predicted win rate against the
  anchor with ``win_low`` / ``win_high``; ``n`` = games played (criteria pooled);
- ``pairwise_turn`` and ``pairwise_category`` (a run of conversations): key = a turn
  (``all``: every turn pooled) or a category, model = the model: ``mean`` = its score
  (win + tie / 2) against every other model in that group, ``win``, ``tie``, ``loss``
  rates, ``n`` games (:mod:`report.pairwise_tally`, criteria pooled);
- ``pairwise_one_order``: as ``pairwise``, for the comparisons of a run planned in both
  orders that were judged in one order only (the other failed or is unfinished). They
  are left out of every other row (win rates, ratings, length bias), as FastChat leaves
  out a comparison with an order in error, and reported apart here.

A run with one criterion reports it pooled only (criterion ``all``): its own rows would
repeat them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flask_eval.report.bootstrap import DEFAULT_CONFIDENCE, FloatArray
from flask_eval.report.pairwise import (
    ALL_CRITERIA,
    Comparison,
    WinRate,
    combine,
    criteria_of,
    model_order,
    win_rates,
)
from flask_eval.report.pairwise_bias import LengthBin, Position, length_bias, position
from flask_eval.report.pairwise_labels import JudgeAgreement, LabelAccuracy, judge_agreement
from flask_eval.report.pairwise_ratings import Rating, fit_ratings
from flask_eval.report.pairwise_rows import (
    BY_CATEGORY,
    BY_TURN,
    DIMENSIONS,
    LC_UNPENALIZED,
    LENGTH_BIAS,
    LENGTH_CONTROLLED,
    ONE_ORDER,
    PAIRWISE,
    PAIRWISE_FIELDS,
    POSITION,
    RATING,
    STYLE_CONTROLLED,
    breakdown_row,
    controlled_rows,
    length_row,
    pair_row,
    position_row,
    rating_row,
)
from flask_eval.report.pairwise_style import NOTE as CONTROLLED_NOTE
from flask_eval.report.pairwise_style import Controlled, controlled
from flask_eval.report.pairwise_tally import PairScore, breakdown

__all__ = [
    "BY_CATEGORY",
    "BY_TURN",
    "DIMENSIONS",
    "LC_UNPENALIZED",
    "LENGTH_BIAS",
    "LENGTH_CONTROLLED",
    "ONE_ORDER",
    "PAIRWISE",
    "PAIRWISE_FIELDS",
    "POSITION",
    "RATING",
    "STYLE_CONTROLLED",
    "PairwiseReport",
    "PairwiseRunData",
    "build",
]


@dataclass
class PairwiseReport:
    """Everything the pairwise part of a report shows."""

    models: list[str]
    judges: list[str]
    anchor: str
    #: instances the intervals resample (every instance with a judged comparison)
    instances: int = 0
    win_rates: list[WinRate] = field(default_factory=list)
    #: comparisons planned in both orders but judged in one only: apart from the rest
    one_order: list[WinRate] = field(default_factory=list)
    ratings: list[Rating] = field(default_factory=list)
    positions: list[Position] = field(default_factory=list)
    length_bins: list[LengthBin] = field(default_factory=list)
    agreement: list[JudgeAgreement] = field(default_factory=list)
    #: accuracy of each judge against an imported set's gold labels (Auto-J, HHH)
    label_accuracy: list[LabelAccuracy] = field(default_factory=list)
    failed: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    #: length- and style-controlled figures per judge (when the responses' texts are known)
    controlled: list[Controlled] = field(default_factory=list)
    #: each model's tally per turn and per category (a run of conversations)
    breakdowns: list[PairScore] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def rows(self) -> list[dict[str, Any]]:
        """Every row of the pairwise dimensions, each with all of :data:`PAIRWISE_FIELDS`."""
        return [
            *(pair_row(w, self.failed) for w in self.win_rates),
            *(breakdown_row(p) for p in self.breakdowns),
            *(rating_row(r) for r in self.ratings),
            *(position_row(p, self.failed) for p in self.positions),
            *(length_row(b) for b in self.length_bins),
            *(pair_row(w, self.failed, ONE_ORDER) for w in self.one_order),
            *(row for c in self.controlled for row in controlled_rows(c)),
        ]

    def summary(self) -> dict[str, Any]:
        """What the JSON document says of the pairwise part besides its rows."""
        return {
            "models": self.models,
            "judges": self.judges,
            "anchor": self.anchor,
            "judge_agreement": [vars(a) for a in self.agreement],
            "instances": self.instances,
            "label_accuracy": [a.as_dict() for a in self.label_accuracy],
            "notes": self.notes,
        }

    def leaderboard(self, judge: str, criterion: str = ALL_CRITERIA) -> list[Rating]:
        """Ratings of one judge, best first (unrated models last)."""
        rows = [r for r in self.ratings if r.judge == judge and r.criterion == criterion]
        return sorted(rows, key=lambda r: (r.rating is None, -(r.rating or 0.0)))

    def controlled_board(self, judge: str) -> list[Controlled]:
        """The length- and style-controlled figures of one judge, best style-controlled
        rating first (models without one last)."""
        rows = [c for c in self.controlled if c.judge == judge]
        return sorted(rows, key=lambda c: (c.style_rating is None, -(c.style_rating or 0.0)))

    def matrix(self, judge: str, criterion: str = ALL_CRITERIA) -> dict[tuple[str, str], float]:
        """(row model, column model) -> the row model's score against the column model."""
        out: dict[tuple[str, str], float] = {}
        for w in self.win_rates:
            if w.judge == judge and w.criterion == criterion:
                out[(w.model_a, w.model_b)] = w.score
                out[(w.model_b, w.model_a)] = 1.0 - w.score
        return out


# -- building --------------------------------------------------------------------------


@dataclass(frozen=True)
class PairwiseRunData:
    """What a run's ledger holds beside its finished comparisons, each part optional:
    ``lengths`` ((model, instance) -> the response's length), ``texts`` ((model,
    instance) -> the response, for the length- and style-controlled figures of
    :mod:`report.pairwise_style`), ``failed`` ((judge, first, second, criterion) ->
    failed judgments), and of a run of conversations ``turns`` (instance -> its turn)
    and ``categories`` (instance -> its category), for the per-turn and per-category
    breakdowns."""

    lengths: Mapping[tuple[str, str], int] | None = None
    texts: Mapping[tuple[str, str], str] | None = None
    failed: Mapping[tuple[str, str, str, str], int] | None = None
    turns: Mapping[str, int] | None = None
    categories: Mapping[str, str] | None = None


def build(
    records: Sequence[Comparison],
    weights: FloatArray,
    instances: Sequence[str],
    *,
    models: Sequence[str] = (),
    anchor: str | None = None,
    run_data: PairwiseRunData | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
    both_orders: bool = False,
) -> PairwiseReport:
    """The pairwise report of ``records``; ``weights`` has one row per ``instances``
    entry (:func:`report.pairwise.instances_of`); ``anchor`` defaults to the first
    model. ``run_data``: the responses' lengths and texts (which add the controlled
    figures) and the failed judgments, if known.
    ``both_orders``: the run planned every comparison in both orders, so one judged in
    one order only is set apart (``one_order``) instead of counted from that order."""
    run_data = PairwiseRunData() if run_data is None else run_data
    lengths, texts, failed = run_data.lengths, run_data.texts, run_data.failed
    order = model_order(records, models)
    every = combine(records, order)
    games = [g for g in every if g.swapped or not both_orders]
    single = [g for g in every if both_orders and not g.swapped]
    anchor = anchor if anchor is not None else (order[0] if order else "")
    if order and anchor not in order:
        raise ValueError(f"anchor {anchor!r} is not among the models {order}")
    several = len(criteria_of(every)) > 1
    report = PairwiseReport(
        models=order,
        judges=list(dict.fromkeys(c.judge for c in records)),
        anchor=anchor,
        instances=len(instances),
        win_rates=win_rates(games, instances, weights, confidence, several),
        one_order=win_rates(single, instances, weights, confidence, several),
        positions=position(records, every, instances, weights, confidence),
        length_bins=length_bias(games, lengths or {}, instances, weights, confidence),
        agreement=judge_agreement(games),
        failed=dict(failed or {}),
        breakdowns=breakdown(games, run_data.turns or {}, run_data.categories or {}, order),
    )
    rank = {j: i for i, j in enumerate(report.judges)}
    report.one_order.sort(key=lambda w: rank[w.judge])  # stable: the judge's own order kept
    if order:
        report.ratings = fit_ratings(games, order, anchor, instances, weights, confidence)
    if order and texts:
        report.controlled = controlled(games, order, anchor, instances, weights, texts, confidence)
        if report.controlled:
            report.notes.append(CONTROLLED_NOTE)
        for c in report.controlled:
            if c.model != anchor and c.lc_win is None and c.raw_win in (0.0, 1.0):
                report.notes.append(
                    f"judge {c.judge}: {c.model} {'won' if c.raw_win else 'lost'} every game "
                    "against the anchor, so it has no length-controlled win rate (AlpacaEval's "
                    "fit would see one outcome only and report an artefact: 0.5 for a model "
                    "that lost every game)"
                )
    if any(r.regularized for r in report.ratings):
        report.notes.append(
            "ratings: some group of models won (or lost) every game, so the maximum "
            "likelihood ratings are infinite; one virtual tie per pair of models that "
            "played was added to make them finite"
        )
    for judge in report.judges:
        n = sum(1 for g in single if g.judge == judge)
        if n:
            report.notes.append(
                f"judge {judge}: {n} comparisons were judged in one order only (the other "
                "order failed or is not finished); they are left out of the win rates, "
                "ratings and length bias, as FastChat leaves out a comparison with an order "
                "in error, and shown apart (one order only)"
            )
    return report
