"""The items people rated and the groups, bootstrap weights and intervals every
statistic of the People section shares (pure; :mod:`report.people` says what each
figure is)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from flask_eval.core.people import is_person
from flask_eval.report.bootstrap import (
    DEFAULT_CONFIDENCE,
    DEFAULT_REPLICATES,
    DEFAULT_SEED,
    instance_weights,
    percentile_interval,
)
from flask_eval.report.metrics import ABILITY, OVERALL, SKILL
from flask_eval.report.people_data import ALL, MODEL, Interval, Item, ScoreRow

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: disagreements listed per judge
DEFAULT_TOP = 10


def _same(name: str) -> str:
    return name


@dataclass(frozen=True)
class PeopleSettings:
    """How the section is computed: the bootstrap, the orders of skills, abilities,
    models and judges (others after them, sorted), each skill's ability, how a ledger
    judge name maps to its judge (samples), and how many disagreements per judge."""

    replicates: int = DEFAULT_REPLICATES
    seed: int = DEFAULT_SEED
    confidence: float = DEFAULT_CONFIDENCE
    ability_of: Mapping[str, str] = field(default_factory=dict)
    skill_order: Sequence[str] = ()
    ability_order: Sequence[str] = ()
    model_order: Sequence[str] = ()
    judge_order: Sequence[str] = ()
    judge_of: Callable[[str], str] = _same
    top: int = DEFAULT_TOP


def ordered(present: Iterable[str], order: Sequence[str]) -> list[str]:
    """``present``'s names: those in ``order`` first (in its order), then the rest sorted."""
    names = set(present)
    first = [n for n in dict.fromkeys(order) if n in names]
    return first + sorted(names - set(first))


@dataclass(frozen=True)
class Items:
    """The items people rated, sorted, with what every statistic needs of them: the
    instance each belongs to (an index into ``instances``, sorted ids), and the bootstrap
    weights of those instances (``(instances, B)``; None without a bootstrap)."""

    keys: list[Item]
    instances: list[str]
    instance: IntArray
    weights: FloatArray | None
    settings: PeopleSettings

    @classmethod
    def of(cls, keys: Iterable[Item], settings: PeopleSettings) -> Items:
        ordered_keys = sorted(set(keys))
        instances = sorted({k.instance for k in ordered_keys})
        index = {iid: n for n, iid in enumerate(instances)}
        instance = np.array([index[k.instance] for k in ordered_keys], dtype=np.int64)
        weights = None
        if settings.replicates > 0 and instances:
            weights = instance_weights(len(instances), settings.replicates, settings.seed)
        return cls(ordered_keys, instances, instance.reshape(-1), weights, settings)

    def __len__(self) -> int:
        return len(self.keys)

    def groups(self, pairwise: bool = False) -> list[tuple[str, str, BoolArray]]:
        """(dimension, key, which items) of every group: all items, each skill, each
        ability, each model (in pairwise grading, the items with the model on either side);
        a group of every item (one skill, one model) is the first alone."""
        s = self.settings
        n = len(self.keys)
        criteria = np.array([k.criterion for k in self.keys], dtype=object)
        out: list[tuple[str, str, BoolArray]] = [(OVERALL, ALL, np.ones(n, dtype=bool))]
        for skill in ordered(criteria.tolist(), s.skill_order):
            out.append((SKILL, skill, criteria == skill))
        abilities = np.array([s.ability_of.get(k.criterion, "") for k in self.keys], dtype=object)
        for ability in ordered((a for a in abilities.tolist() if a), s.ability_order):
            out.append((ABILITY, ability, abilities == ability))
        first = np.array([k.model for k in self.keys], dtype=object)
        second = np.array([k.model_b for k in self.keys], dtype=object)
        models = [*first.tolist(), *(m for m in second.tolist() if m)] if pairwise else first
        for model in ordered(models, s.model_order):
            out.append((MODEL, model, (first == model) | (second == model)))
        return out[:1] + [g for g in out[1:] if not g[2].all()]

    def interval(self, replicates: FloatArray) -> list[Interval]:
        """The percentile interval of each row of ``replicates`` (``(k, B)``)."""
        rows = np.atleast_2d(replicates)
        low, high = percentile_interval(rows, self.settings.confidence)
        return [
            (float(lo), float(hi)) if np.isfinite(lo) and np.isfinite(hi) else None
            for lo, hi in zip(low.tolist(), high.tolist(), strict=True)
        ]

    def ratio_interval(self, values: FloatArray, select: BoolArray) -> Interval:
        """The interval of the mean of ``values`` over the ``select``-ed items, instances
        resampled."""
        if self.weights is None or not select.any():
            return None
        k = len(self.instances)
        totals = np.bincount(self.instance[select], weights=values[select], minlength=k)
        counts = np.bincount(self.instance[select], minlength=k).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            replicates = (totals @ self.weights) / (counts @ self.weights)
        return self.interval(replicates)[0]


def finite(x: float) -> float | None:
    """``x``, or None when it is NaN or infinite."""
    return float(x) if np.isfinite(x) else None


def split_rows(
    rows: Iterable[ScoreRow], judge_of: Callable[[str], str]
) -> tuple[dict[Item, dict[str, float | None]], dict[str, dict[Item, list[float | None]]]]:
    """The people's ratings (item -> rater -> score, raters sorted) and each judge's
    (judge -> item -> its samples' scores, sorted): the same whatever order the rows come
    in (a rater's second row of an item, which the ledger cannot hold, would replace the
    first)."""
    people: dict[Item, dict[str, float | None]] = {}
    judges: dict[str, dict[Item, list[float | None]]] = {}
    for r in rows:
        score = None if r.score is None else float(r.score)
        if is_person(r.judge):
            people.setdefault(r.item, {})[r.judge] = score
        else:
            judges.setdefault(judge_of(r.judge), {}).setdefault(r.item, []).append(score)
    for item, ratings in people.items():
        people[item] = dict(sorted(ratings.items()))
    for scores in judges.values():
        for samples in scores.values():
            samples.sort(key=lambda v: (v is None, v or 0.0))
    return people, judges
