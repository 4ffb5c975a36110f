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
from flask_eval.report.pairwise_style import NOTE as CONTROLLED_NOTE
from flask_eval.report.pairwise_style import Controlled, controlled
from flask_eval.report.row_fields import FIELDS

PAIRWISE, RATING, POSITION, LENGTH_BIAS = "pairwise", "rating", "position", "length_bias"
ONE_ORDER = "pairwise_one_order"
LENGTH_CONTROLLED, STYLE_CONTROLLED = "length_controlled", "style_controlled"
LC_UNPENALIZED = "length_controlled_unpenalized"
DIMENSIONS = (
    PAIRWISE,
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
    notes: list[str] = field(default_factory=list)

    def rows(self) -> list[dict[str, Any]]:
        """Every row of the pairwise dimensions, each with all of :data:`PAIRWISE_FIELDS`."""
        return [
            *(_pair_row(w, self.failed) for w in self.win_rates),
            *(_rating_row(r) for r in self.ratings),
            *(_position_row(p, self.failed) for p in self.positions),
            *(_length_row(b) for b in self.length_bins),
            *(_pair_row(w, self.failed, ONE_ORDER) for w in self.one_order),
            *(row for c in self.controlled for row in _controlled_rows(c)),
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


def _blank() -> dict[str, Any]:
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


def _pair_row(
    w: WinRate, failed: Mapping[tuple[str, str, str, str], int], dimension: str = PAIRWISE
) -> dict[str, Any]:
    row = _blank()
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


def _rating_row(r: Rating) -> dict[str, Any]:
    row = _blank()
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


def _position_row(p: Position, failed: Mapping[tuple[str, str, str, str], int]) -> dict[str, Any]:
    row = _blank()
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


def _length_row(b: LengthBin) -> dict[str, Any]:
    row = _blank()
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


def _controlled_rows(c: Controlled) -> list[dict[str, Any]]:
    lc, sc = _blank(), _blank()
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


# -- building --------------------------------------------------------------------------


@dataclass(frozen=True)
class PairwiseRunData:
    """What a run's ledger holds beside its finished comparisons, each part optional:
    ``lengths`` ((model, instance) -> the response's length), ``texts`` ((model,
    instance) -> the response, for the length- and style-controlled figures of
    :mod:`report.pairwise_style`) and ``failed`` ((judge, first, second, criterion) ->
    failed judgments)."""

    lengths: Mapping[tuple[str, str], int] | None = None
    texts: Mapping[tuple[str, str], str] | None = None
    failed: Mapping[tuple[str, str, str, str], int] | None = None


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
