"""Each model's wins, losses and ties against every other model, per judge, by turn of a
conversation and by category (pure).

One implementation for the MT-Bench section (:mod:`report.mtbench`: FastChat's
pairwise-all table, a match judged in both orders) and for the pairwise report's
breakdowns (:mod:`report.pairwise_report`: its combined games). An *outcome* is one
decided comparison: its judge, instance, the two models and the winner (None: a tie).
Each outcome counts once for each of its two models in every group of its instance:
turn groups are every turn pooled (:data:`ALL_TURNS`) and the instance's own turn;
category groups are the instance's category (:data:`NO_CATEGORY` for an instance without
one), so the counts of a model summed over the turns, or over the categories, are its
pooled counts. Criteria are pooled per judge, as FastChat pools the rows of its file.
Per model: ``win_rate = win / (win + loss + tie)``, ``loss_rate = loss / (...)`` and
``win_rate_adjusted = (win + tie / 2) / (...)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flask_eval.report.pairwise import LOSS, WIN, Game

#: The per-turn key of the rows pooling every turn.
ALL_TURNS = 0
#: The category of an instance that has none, when other instances have one.
NO_CATEGORY = "(none)"

#: (judge, instance, model, other model, the winner or None for a tie)
Outcome = tuple[str, str, str, str, str | None]
#: (turn or ALL_TURNS, category or None): the groups a tally is kept for
Group = tuple[int, str | None]


@dataclass(frozen=True)
class PairScore:
    """One model's tally against every other model, for one judge, on one turn
    (:data:`ALL_TURNS`: every turn pooled, FastChat's table) or, when ``category`` is
    set, on the instances of one category (every turn)."""

    judge: str
    model: str
    turn: int
    win: int
    loss: int
    tie: int
    category: str | None = None

    @property
    def matches(self) -> int:
        return self.win + self.loss + self.tie

    def _rate(self, count: float) -> float | None:
        return count / self.matches if self.matches else None

    @property
    def win_rate(self) -> float | None:
        return self._rate(self.win)

    @property
    def loss_rate(self) -> float | None:
        return self._rate(self.loss)

    @property
    def tie_rate(self) -> float | None:
        return self._rate(self.tie)

    @property
    def win_rate_adjusted(self) -> float | None:
        return self._rate(self.win + 0.5 * self.tie)

    @property
    def key(self) -> str:
        """The group as a row key: the category, else the turn (``all``: pooled)."""
        if self.category is not None:
            return self.category
        return "all" if self.turn == ALL_TURNS else str(self.turn)

    def row(self, dimension: str) -> dict[str, Any]:
        """The tally as a report row of ``dimension``: ``key`` the group, ``mean`` =
        win_rate_adjusted, ``n`` matches, ``win``, ``tie`` and ``loss`` their shares."""
        return {
            "model": self.model,
            "judge": self.judge,
            "dimension": dimension,
            "key": self.key,
            "mean": self.win_rate_adjusted,
            "n": self.matches,
            "n_na": 0,
            "n_failed": 0,
            "win": self.win_rate,
            "tie": self.tie_rate,
            "loss": self.loss_rate,
        }

    def as_dict(self) -> dict[str, Any]:
        group: dict[str, Any] = (
            {"category": self.category}
            if self.category is not None
            else {"turn": self.turn or "all"}
        )
        return {
            "judge": self.judge,
            "model": self.model,
            **group,
            "win": self.win,
            "loss": self.loss,
            "tie": self.tie,
            "win_rate": self.win_rate,
            "loss_rate": self.loss_rate,
            "win_rate_adjusted": self.win_rate_adjusted,
        }


def tally(
    outcomes: Iterable[Outcome],
    groups: Callable[[str], Iterable[Group]],
    models: Sequence[str] = (),
) -> list[PairScore]:
    """Per judge, group (``groups(instance)``) and model, the wins, losses and ties of
    ``outcomes``; judges in order of appearance, then turns, categories by name, models
    in ``models``' order, then by name."""
    counts: dict[tuple[str, Group, str], list[int]] = {}
    judges: dict[str, int] = {}
    for judge, iid, one, two, winner in outcomes:
        judges.setdefault(judge, len(judges))
        for group in groups(iid):
            for model in (one, two):
                mine = counts.setdefault((judge, group, model), [0, 0, 0])
                mine[2 if winner is None else 0 if model == winner else 1] += 1
    rank = {m: k for k, m in enumerate(models)}

    def order(key: tuple[str, Group, str]) -> tuple[int, int, str, int, str]:
        judge, (turn, category), model = key
        return judges[judge], turn, category or "", rank.get(model, len(rank)), model

    out = []
    for judge, (turn, category), model in sorted(counts, key=order):
        win, loss, tie = counts[(judge, (turn, category), model)]
        out.append(PairScore(judge, model, turn, win, loss, tie, category))
    return out


def by_turn(turn_of: Mapping[str, int]) -> Callable[[str], list[Group]]:
    """The turn groups of an instance: every turn pooled, and its own turn (1 when
    ``turn_of`` does not know it)."""
    return lambda iid: [(ALL_TURNS, None), (turn_of.get(iid, 1), None)]


def by_category(category_of: Mapping[str, str]) -> Callable[[str], list[Group]]:
    """The category group of an instance (:data:`NO_CATEGORY` when it has none)."""
    return lambda iid: [(ALL_TURNS, category_of.get(iid, NO_CATEGORY))]


def _winner(game: Game) -> str | None:
    return {WIN: game.model_a, LOSS: game.model_b}.get(game.outcome)


def game_outcomes(games: Iterable[Game]) -> list[Outcome]:
    """The outcomes of combined games (:func:`report.pairwise.combine`)."""
    return [(g.judge, g.instance_id, g.model_a, g.model_b, _winner(g)) for g in games]


def breakdown(
    games: Sequence[Game],
    turn_of: Mapping[str, int],
    category_of: Mapping[str, str],
    models: Sequence[str] = (),
) -> list[PairScore]:
    """Each model's tally of ``games`` per turn (every turn pooled first) and, when any
    instance has a category, per category."""
    outcomes = game_outcomes(games)
    out = tally(outcomes, by_turn(turn_of), models) if turn_of else []
    if category_of:
        out += tally(outcomes, by_category(category_of), models)
    return out
