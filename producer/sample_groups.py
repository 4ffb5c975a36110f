"""The sampler's groups: the calls of one judge with one set of criteria, counted exactly
and sampled uniformly (a reservoir, Algorithm L), and the regression estimator of a
group's totals from its sample (``producer.sampling.CallSampler``). Pure."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import exp, floor, fsum, inf, log

from flask_eval.core.types import InstanceRubric
from flask_eval.producer.estimate import CallTexts
from flask_eval.storage.records import PlannedCall


@dataclass(slots=True)
class Order:
    """The calls of one judge with criteria in one order (the exact estimates' prefix
    group): how many."""

    group: Group
    criteria: int
    calls: int = 0

    def count(self, chars: int) -> bool:
        """:meth:`producer.sampling.CallSampler.count` of a call of this order."""
        self.calls += 1
        group = self.group
        group.chars += chars
        seen = group.seen = group.seen + 1
        return seen <= group.size or seen == group.next


@dataclass(slots=True)
class Group:
    """The calls of one judge with one set of criteria (one template): exact counts and
    character total, and a uniform sample (Algorithm L: a skip count drawn when the
    reservoir fills and after each replacement, so a call not taken costs a comparison)."""

    judge: str
    size: int
    rng: random.Random
    orders: list[Order] = field(default_factory=list)
    items: list[tuple[PlannedCall, CallTexts, int]] = field(default_factory=list)
    seen: int = 0
    chars: int = 0
    weight: float = 0.0
    next: int = 0

    def take(self, call: PlannedCall, texts: CallTexts, chars: int) -> None:
        """Sample the call just seen (the reservoir is not full, or it was its turn)."""
        if self.seen <= self.size:
            self.items.append((call, texts, chars))
            if self.seen == self.size:
                self.weight = 1.0
                self._skip()
        else:
            self.items[self.rng.randrange(self.size)] = (call, texts, chars)
            self._skip()

    def _skip(self) -> None:
        rng = self.rng
        self.weight *= exp(log(rng.random() or 1e-300) / self.size)
        self.next = self.seen + floor(log(rng.random() or 1e-300) / log(1 - self.weight)) + 1


def rubric_chars(rubrics: Mapping[str, InstanceRubric], criteria: Sequence[str]) -> int:
    own = [rubrics[c] for c in criteria if c in rubrics]
    return sum(len(r.criteria) + sum(len(v) for v in r.scores.values()) for r in own)


def regression(
    ys: Sequence[float], xs: Sequence[float], population: int, x_total: float
) -> tuple[float, float]:
    """The regression estimate of the total of ``y`` over a population of ``population``
    units whose ``x`` total is known, from a simple random sample (``ys``, ``xs``), and
    its variance: ``N (ybar + b (X/N - xbar))`` with ``b`` the sample's least-squares
    slope, variance ``N^2 (1 - n/N) s_e^2 / n`` (``s_e^2``: the residuals' variance, n - 2
    degrees of freedom). A sample of the whole population: its total, variance 0."""
    n = len(ys)
    if n >= population:
        return fsum(ys), 0.0
    mx, my = fsum(xs) / n, fsum(ys) / n
    sxx = fsum((x - mx) ** 2 for x in xs)
    slope = fsum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    residual = fsum((y - my - slope * (x - mx)) ** 2 for x, y in zip(xs, ys, strict=True))
    freedom = n - 2 if sxx else n - 1
    if freedom <= 0:
        return population * my, inf
    variance = population**2 * (1 - n / population) * residual / freedom / n
    return population * (my + slope * (x_total / population - mx)), variance
