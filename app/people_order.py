"""The order of the raters' queues (``human_first``, ``core.people.HUMAN_FIRST``).

``random``: a seeded random order. ``disagreement``: the items the run's judges disagree
on most come first, then the others in the same random order. How much the judges
(every worker not ``human/...``, each sample counted) disagree on an item:

* absolute grading: the mean, over the item's criteria the judges scored, of the
  population standard deviation of their done scores (N/A left out);
* pairwise: the mean, over those criteria, of the share of the judges' verdicts that
  differ from the most frequent one; a verdict given on the comparison in the other
  order (``(B, A)`` for the item ``(A, B)``) counts too, read for the item's order;
* an item with fewer than two judge scores: 0.

An item's rank is ``-disagreement + u * 1e-6`` (``u`` in [0, 1), a hash of the seed and
the item: the same for an item whatever else the queue holds), or ``u`` for ``random``;
the queue serves the lowest rank first. The judges' scores are summed per subject in
SQL (``storage.people_rows.judge_scores``): Python only sees one line per subject.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass

from flask_eval.core.people import HUMAN_FIRST
from flask_eval.storage import people_rows
from flask_eval.storage.people_rows import Item, Subject, SubjectScores
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store

__all__ = [
    "TIEBREAK",
    "JudgeScores",
    "apply_order",
    "disagreement",
    "disagreement_ranks",
    "random_ranks",
]

#: the width of the random tiebreak added to ``-disagreement``
TIEBREAK = 1e-6


def _run_id(run: RunInfo | int) -> int:
    return run if isinstance(run, int) else run.id


def _default_seed(run: RunInfo | int) -> str:
    return f"run:{_run_id(run)}"


def _unit(seed: str, item: Item) -> float:
    """A number in [0, 1) fixed by ``seed`` and ``item``."""
    digest = hashlib.sha256("\x00".join((seed, *item)).encode("utf-8")).digest()
    return int.from_bytes(digest[:7], "big") / float(1 << 56)


def _spread(scores: SubjectScores) -> float:
    """The population standard deviation of one subject's absolute scores."""
    if scores.n < 2:
        return 0.0
    mean = scores.total / scores.n
    return math.sqrt(max(0.0, scores.squares / scores.n - mean * mean))


def _dissent(counts: tuple[int, int, int]) -> float:
    """The share of verdicts that differ from the most frequent one."""
    n = sum(counts)
    return 0.0 if n < 2 else (n - max(counts)) / n


@dataclass(frozen=True)
class JudgeScores:
    """The judges' scores per subject, and the criteria they scored per (model, model_b,
    instance)."""

    subjects: Mapping[Subject, SubjectScores]
    criteria: Mapping[tuple[str, str, str], tuple[str, ...]]

    @classmethod
    def of(cls, subjects: Mapping[Subject, SubjectScores]) -> JudgeScores:
        criteria: dict[tuple[str, str, str], list[str]] = {}
        for model, model_b, instance_id, criterion in subjects:
            criteria.setdefault((model, model_b, instance_id), []).append(criterion)
        return cls(subjects, {k: tuple(v) for k, v in criteria.items()})


def disagreement(item: Item, scores: JudgeScores) -> float:
    """How much the judges disagree on ``item`` (see the module docstring)."""
    _, model, model_b, instance_id = item
    criteria = set(scores.criteria.get((model, model_b, instance_id), ()))
    if model_b:
        criteria.update(scores.criteria.get((model_b, model, instance_id), ()))
    values: list[float] = []
    judged = 0
    for criterion in sorted(criteria):
        here = scores.subjects.get((model, model_b, instance_id, criterion))
        if not model_b:
            if here is not None:
                judged += here.n
                values.append(_spread(here))
            continue
        first = second = tie = 0
        if here is not None:
            first, second, tie = here.first, here.second, here.tie
        swapped = scores.subjects.get((model_b, model, instance_id, criterion))
        if swapped is not None:  # the other order: its first is this item's second
            first, second, tie = first + swapped.second, second + swapped.first, tie + swapped.tie
        judged += first + second + tie
        values.append(_dissent((first, second, tie)))
    if judged < 2 or not values:
        return 0.0
    return sum(values) / len(values)


def random_ranks(store: Store, run: RunInfo | int, seed: str | None = None) -> dict[Item, float]:
    """Each open item of the run's people: a seeded random rank in [0, 1)."""
    seed = _default_seed(run) if seed is None else seed
    return {item: _unit(seed, item) for item in people_rows.open_people_items(store, _run_id(run))}


def disagreement_ranks(
    store: Store, run: RunInfo | int, seed: str | None = None
) -> dict[Item, float]:
    """Each open item of the run's people (key: judge, model, model_b, instance id): its
    rank, ``-disagreement + u * TIEBREAK``: the items the judges disagree on most first,
    then the seeded random order."""
    seed = _default_seed(run) if seed is None else seed
    run_id = _run_id(run)
    items = people_rows.open_people_items(store, run_id)
    if not items:
        return {}
    wanted = {(m, b, i) for _, m, b, i in items} | {(b, m, i) for _, m, b, i in items if b}
    scores = JudgeScores.of(people_rows.judge_scores(store, run_id, wanted))
    return {item: -disagreement(item, scores) + _unit(seed, item) * TIEBREAK for item in items}


def apply_order(store: Store, run: RunInfo | int, how: str, seed: str | None = None) -> int:
    """Rank the open items of the run's people ``how`` (one of ``HUMAN_FIRST``) through
    ``storage.ratings.set_ranks``; returns how many items were ranked."""
    from flask_eval.storage import ratings

    if how not in HUMAN_FIRST:
        raise ValueError(f"unknown order {how!r}: use one of {', '.join(HUMAN_FIRST)}")
    ranks = (
        disagreement_ranks(store, run, seed)
        if how == "disagreement"
        else random_ranks(store, run, seed)
    )
    if ranks:
        ratings.set_ranks(store, _run_id(run), ranks)
    return len(ranks)
