"""MT-Bench's scores as FastChat computes them (pure): ``fastchat/llm_judge/show_result.py``.

A run whose instances are turns of conversations (``core.conversations``: one ledger
instance per turn) gets this section beside its breakdowns, per judge (FastChat's
``show_result.py`` reads one judge's judgment file; its rows of every judge pooled would
be another number).

Single-answer grading (``display_result_single``): a judgment's score, its failures and
N/A left out (FastChat writes -1 for a verdict it could not read and drops every -1
before any mean), is averaged per model over the judgments of turn 1 ("First turn"), of
turn 2 ("Second turn") and over all of them ("Average"). The average is the mean over
every scored judgment of the model, **not** the mean of the two turn means: a model with
more failures in one turn weighs that turn less. Criteria, when a run grades several, are
pooled as FastChat pools the rows of its file.

Pairwise (``display_result_pairwise``, ``--mode pairwise-all``): a *match* is one
(instance, pair of models, criterion) judged in both orders (FastChat's game 1, model_1
shown first, and game 2, swapped). It is a win for a model only when both orders name it
the winner; any other outcome (a tie in game 1, or the two orders disagreeing) is a tie
for both models. A match with an order failed or not judged (FastChat's ``"error"``) is
left out. Per model: ``win_rate = win / (win + loss + tie)``, ``loss_rate = loss / (...)``
and ``win_rate_adjusted = (win + tie / 2) / (...)``; the rows are shown for all turns
pooled (FastChat's table), per turn and per MT-Bench category (the instance's
capability), each model's counts over the turns, or over the categories, summing to its
pooled counts (:mod:`report.pairwise_tally`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND, VERDICT_TIE
from flask_eval.report.pairwise import Comparison
from flask_eval.report.pairwise_tally import (
    ALL_TURNS,
    Outcome,
    PairScore,
    by_category,
    by_turn,
    tally,
)
from flask_eval.report.scores import SCORED, ScoreTable

__all__ = [
    "ALL_TURNS",
    "PAIR_CATEGORY_DIMENSION",
    "PAIR_DIMENSION",
    "PAIR_RULE",
    "RULE",
    "SINGLE_DIMENSION",
    "WINNER_OF_VERDICT",
    "MTBench",
    "Match",
    "PairScore",
    "PairSection",
    "SingleScore",
    "category_scores",
    "matches",
    "named_winner",
    "outcomes",
    "pair_scores",
    "pairwise_section",
    "single_scores",
]

#: What FastChat's judgment files call the outcome of one game, by our verdict (the
#: model shown first wins, the second wins, a tie); anything else is ``"error"``.
WINNER_OF_VERDICT: Mapping[int, str] = {
    VERDICT_FIRST: "first",
    VERDICT_SECOND: "second",
    VERDICT_TIE: "tie",
}

#: The dimensions of the section's CSV rows (:meth:`MTBench.rows`).
SINGLE_DIMENSION, PAIR_DIMENSION = "mt_bench", "mt_bench_pairwise"
PAIR_CATEGORY_DIMENSION = "mt_bench_pairwise_category"

RULE = (
    "MT-Bench as FastChat's show_result.py computes it, per judge: first and second turn "
    "means, and Average = the mean over every scored judgment of the model (failures and "
    "N/A left out), not the mean of the two turn means"
)
PAIR_RULE = (
    "MT-Bench pairwise as FastChat's show_result.py (pairwise-all) computes it, per judge: "
    "a match (one instance, two models, judged in both orders) is a win only when both "
    "orders agree on the winner, else a tie for both; a match with an order failed or not "
    "judged is left out; win_rate_adjusted counts a tie as half a win"
)


@dataclass(frozen=True)
class SingleScore:
    """One (model, judge)'s MT-Bench single-answer score.

    ``turns`` maps each turn (1, 2, ...) to (its mean, the judgments it averages);
    ``average`` is the mean over all ``n`` scored judgments; ``n_excluded`` counts the
    finished judgments left out (failed or N/A: FastChat's score -1).
    """

    model: str
    judge: str
    turns: Mapping[int, tuple[float | None, int]]
    average: float | None
    n: int
    n_excluded: int

    def turn_mean(self, turn: int) -> float | None:
        return self.turns.get(turn, (None, 0))[0]

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "judge": self.judge,
            "turns": {str(t): {"mean": m, "n": n} for t, (m, n) in sorted(self.turns.items())},
            "average": self.average,
            "n": self.n,
            "n_excluded": self.n_excluded,
        }


@dataclass
class MTBench:
    """The MT-Bench section of a report: single-answer scores and pairwise tallies (all
    turns pooled and per turn in ``pairwise``, per category in ``pairwise_categories``)."""

    single: list[SingleScore] = field(default_factory=list)
    pairwise: list[PairScore] = field(default_factory=list)
    pairwise_categories: list[PairScore] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def turns(self) -> list[int]:
        """The turns the single scores have, in order."""
        return sorted({t for s in self.single for t in s.turns})

    def rows(self) -> list[dict[str, Any]]:
        """The section as rows of the report's CSV: dimension :data:`SINGLE_DIMENSION`
        (key a turn, or ``average``; ``mean``, ``n`` scored, ``n_failed`` left out) and
        :data:`PAIR_DIMENSION` (key a turn, or ``all``; ``mean`` = win_rate_adjusted, ``n``
        matches, ``win``, ``tie`` and ``loss`` their shares) and
        :data:`PAIR_CATEGORY_DIMENSION` (key a category; the same fields)."""
        out: list[dict[str, Any]] = []
        for s in self.single:
            for key, (mean, n) in [*((str(t), v) for t, v in sorted(s.turns.items()))]:
                out.append(_row(s.model, s.judge, SINGLE_DIMENSION, key, mean, n))
            out.append(
                _row(s.model, s.judge, SINGLE_DIMENSION, "average", s.average, s.n)
                | {"n_failed": s.n_excluded}
            )
        for dimension, scores in (
            (PAIR_DIMENSION, self.pairwise),
            (PAIR_CATEGORY_DIMENSION, self.pairwise_categories),
        ):
            out += [p.row(dimension) for p in scores]
        return out

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.single:
            data["single"] = [s.as_dict() for s in self.single]
            data["definition"] = RULE
        if self.pairwise:
            data["pairwise"] = [p.as_dict() for p in self.pairwise]
            data["pairwise_by_category"] = [p.as_dict() for p in self.pairwise_categories]
            data["pairwise_definition"] = PAIR_RULE
        if self.notes:
            data["notes"] = list(self.notes)
        return data


def _row(
    model: str, judge: str, dimension: str, key: str, mean: float | None, n: int
) -> dict[str, Any]:
    return {
        "model": model,
        "judge": judge,
        "dimension": dimension,
        "key": key,
        "mean": mean,
        "n": n,
        "n_na": 0,
        "n_failed": 0,
    }


def _mean(values: np.ndarray) -> float | None:
    return float(values.mean()) if len(values) else None


def with_exact(table: ScoreTable, exact: Mapping[tuple[str, str, str, str], float]) -> ScoreTable:
    """``table`` with the ratings written with a fraction as written (``exact``: by model,
    instance, criterion and judge; ``rubrics.mtbench`` stores them rounded, the exact
    rating beside), as FastChat averages them."""
    if not exact:
        return table
    score = table.score.copy()
    judge_of = {name: j for j, name in enumerate(table.judges)}
    cell_of = {
        (table.models[m], table.instances[i], table.skills[s]): c
        for c, (m, i, s) in enumerate(zip(table.model, table.instance, table.skill, strict=True))
    }
    for (model, instance, criterion, judge), value in exact.items():
        cell, j = cell_of.get((model, instance, criterion)), judge_of.get(judge)
        if cell is not None and j is not None and table.state[cell, j] == SCORED:
            score[cell, j] = value
    return replace(table, score=score)


def single_scores(table: ScoreTable, models: Sequence[str] = ()) -> list[SingleScore]:
    """Each (model, judge)'s MT-Bench score of ``table`` (its turns: ``table.turn``),
    models in ``models``' order (then the table's), judges in the table's; a pair without
    a finished judgment is left out."""
    order = [*(m for m in models if m in table.models)]
    order += [m for m in table.models if m not in order]
    turn_of_cell = table.turn[table.instance]
    out: list[SingleScore] = []
    for name in order:
        mine = table.model == table.models.index(name)
        for j, judge in enumerate(table.judges):
            state = table.state[mine, j]
            scored = state == SCORED
            finished = int(np.count_nonzero(state != 0))  # NONE is 0: not finished
            if not finished:
                continue
            scores = table.score[mine, j][scored]
            turns = turn_of_cell[mine][scored]
            per_turn = {
                int(t): (_mean(scores[turns == t]), int(np.count_nonzero(turns == t)))
                for t in sorted(set(turns.tolist()))
            }
            n = len(scores)
            out.append(SingleScore(name, judge, per_turn, _mean(scores), n, finished - n))
    return out


@dataclass(frozen=True)
class Match:
    """One comparison judged in both orders: ``model_1`` shown first in game 1 (whose
    winner is ``g1``), ``model_2`` shown first in game 2 (``g2``); winners are
    ``"model_1"``, ``"model_2"``, ``"tie"`` or ``"error"``, as FastChat writes them."""

    instance_id: str
    model_1: str
    model_2: str
    criterion: str
    judge: str
    g1: str
    g2: str


def named_winner(verdict: int | None, first: str) -> str:
    """A verdict of the order in which ``first`` (``"model_1"`` or ``"model_2"``) was
    shown first, as FastChat names the winner."""
    other = "model_2" if first == "model_1" else "model_1"
    won = WINNER_OF_VERDICT.get(verdict) if verdict is not None else None
    return {"first": first, "second": other, "tie": "tie"}.get(won or "", "error")


def matches(
    orders: Iterable[tuple[str, str, str, str, str, int | None]],
    models: Sequence[str] = (),
) -> list[Match]:
    """FastChat's matches of judged orders ``(instance, first, second, criterion, judge,
    verdict)`` (verdict None: failed or not judged), in the order of their first order:
    model_1 is the model earlier in ``models`` (then by name); an order missing or not a
    verdict makes its game ``"error"``."""
    rank = {m: k for k, m in enumerate(models)}
    games: dict[tuple[str, str, str, str, str], list[int | None]] = {}
    for iid, first, second, criterion, judge, verdict in orders:
        one, two = sorted((first, second), key=lambda m: (rank.get(m, len(rank)), m))
        both = games.setdefault((iid, one, two, criterion, judge), [None, None])
        both[0 if first == one else 1] = verdict
    return [
        Match(
            iid,
            one,
            two,
            criterion,
            judge,
            named_winner(g1, "model_1"),
            named_winner(g2, "model_2"),
        )
        for (iid, one, two, criterion, judge), (g1, g2) in games.items()
    ]


def _outcome(match: Match) -> tuple[str, str] | None:
    """(winner, loser) of a match, ("", "") for a tie, None when left out."""
    g1, g2 = match.g1, match.g2
    if "error" in (g1, g2):
        return None
    if g1 == "tie" or g1 != g2:
        return "", ""
    if g1 == "model_1":
        return match.model_1, match.model_2
    return match.model_2, match.model_1


def outcomes(found: Iterable[Match]) -> list[Outcome]:
    """The decided matches as outcomes of :func:`report.pairwise_tally.tally` (a match
    with an order in error left out)."""
    out: list[Outcome] = []
    for match in found:
        decided = _outcome(match)
        if decided is not None:
            out.append(
                (match.judge, match.instance_id, match.model_1, match.model_2, decided[0] or None)
            )
    return out


def pair_scores(
    found: Sequence[Match], turn_of: Mapping[str, int], models: Sequence[str] = ()
) -> list[PairScore]:
    """Per judge, model and turn (and all turns pooled: :data:`ALL_TURNS`), the wins,
    losses and ties of FastChat's pairwise-all table; judges in order of appearance,
    models in ``models``' order, then by name."""
    return tally(outcomes(found), by_turn(turn_of), models)


def category_scores(
    found: Sequence[Match], category_of: Mapping[str, str], models: Sequence[str] = ()
) -> list[PairScore]:
    """:func:`pair_scores` per category of the instances (every turn) instead of per
    turn; none when no instance has a category."""
    return tally(outcomes(found), by_category(category_of), models) if category_of else []


@dataclass
class PairSection:
    """MT-Bench's pairwise tallies of a run: by turn, by category, and the notes."""

    by_turn: list[PairScore]
    by_category: list[PairScore]
    notes: list[str]


def pairwise_section(
    comparisons: Sequence[Comparison],
    turn_of: Mapping[str, int],
    models: Sequence[str] = (),
    category_of: Mapping[str, str] | None = None,
) -> PairSection:
    """MT-Bench's pairwise tallies of a run's judged comparisons (done verdicts only: an
    order that failed or is unfinished is missing, FastChat's ``"error"``) by turn and by
    ``category_of`` (instance -> its category), and the notes on what was left out."""
    found = matches(
        ((c.instance_id, c.first, c.second, c.criterion, c.judge, c.verdict) for c in comparisons),
        models,
    )
    left = sum(1 for m in found if _outcome(m) is None)
    notes = []
    if left:
        notes.append(
            f"MT-Bench pairwise: {left} of {len(found)} matches have an order failed or not "
            "judged and are left out, as FastChat's show_result.py leaves out a match with "
            "an order in error"
        )
    return PairSection(
        pair_scores(found, turn_of, models),
        category_scores(found, category_of or {}, models),
        notes,
    )
