"""Which of a run's items each rater rates, in which order, which side first (pure).

The items are the run's subjects as its ledger plans them (``storage.planning``): an
absolute run's (model, instance), a pairwise run's (first model, second model, instance),
each with its criteria. A pairwise run that plans both orders of a pair (``--swap``)
shows people each pair once: which side a rater sees first is drawn per item and rater
(``swapped``) and recorded, so position cannot favour a model.

Per panel (:class:`core.people.Panel`): ``limit`` keeps the first items in the ledger's
order, ``sample`` a seeded random sample; the first ``overlap`` of the kept items (in a
seeded random order) go to every rater, each other item to ``per_item`` raters, dealt
round-robin so that every rater gets as many as the others (within one). A rater's queue
is in a seeded random order (``rank``) until the run's order (``--human-first``) ranks it.
Everything is drawn from ``random.Random`` seeded by the run's seed and the panel's name:
planning the same run again plans the same items, raters, sides and order.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from flask_eval.core.people import Panel, People, rater_judge

__all__ = ["Item", "Rating", "assign", "people_items"]


@dataclass(frozen=True)
class Item:
    """One page of rating: a subject and its criteria."""

    model: str
    model_b: str
    instance_id: str
    criteria: tuple[str, ...]


@dataclass(frozen=True)
class Rating:
    """An item planned for a rater (``judge``: the rater's ledger name)."""

    judge: str
    item: Item
    rank: float
    swapped: bool


def people_items(subjects: Iterable[tuple[str, str, str, tuple[str, ...]]]) -> list[Item]:
    """The items people see, in the ledger's order, of the subjects (model, model_b,
    instance, criteria) one judge of the run has: a pair planned in both orders once (in
    the order whose first model sorts first)."""
    items = [Item(m, mb, i, tuple(c)) for m, mb, i, c in subjects]
    keys = {(it.model, it.model_b, it.instance_id) for it in items}
    return [
        it
        for it in items
        if not it.model_b
        or (it.model_b, it.model, it.instance_id) not in keys
        or it.model < it.model_b
    ]


def _rng(seed: int, panel: Panel, what: str) -> random.Random:
    return random.Random(f"{seed}\x1f{panel.name}\x1f{what}")


def _kept(items: Sequence[Item], panel: Panel, seed: int) -> list[Item]:
    if panel.limit is not None:
        return list(items[: panel.limit])
    if panel.sample is not None and panel.sample < len(items):
        chosen = set(_rng(seed, panel, "sample").sample(range(len(items)), panel.sample))
        return [it for k, it in enumerate(items) if k in chosen]
    return list(items)


def assign(items: Sequence[Item], people: People) -> list[Rating]:
    """Every panel's ratings of ``items`` (:func:`people_items`), by rater then rank."""
    out: list[Rating] = []
    for panel in people.panels:
        kept = _kept(items, panel, people.seed)
        order = list(kept)
        _rng(people.seed, panel, "deal").shuffle(order)
        overlap = min(panel.overlap, len(order))
        raters = list(panel.raters)
        _rng(people.seed, panel, "raters").shuffle(raters)
        queues: dict[str, list[Item]] = {r: [] for r in panel.raters}
        for item in order[:overlap]:
            for rater in panel.raters:
                queues[rater].append(item)
        turn = 0
        for item in order[overlap:]:
            for _ in range(panel.per_item):
                queues[raters[turn % len(raters)]].append(item)
                turn += 1
        for rater in panel.raters:
            queue = sorted(queues[rater], key=lambda it: (it.model, it.model_b, it.instance_id))
            rng = _rng(people.seed, panel, f"queue\x1f{rater}")
            rng.shuffle(queue)
            pairwise = rng.random  # the same generator: one stream per rater
            out += [
                Rating(rater_judge(rater), it, float(k), bool(it.model_b) and pairwise() < 0.5)
                for k, it in enumerate(queue)
            ]
    return out
