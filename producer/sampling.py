"""Token and cost estimates from a sample of rendered prompts (`--dry-run`, `--max-cost` on
big plans): what ``producer.estimate.Estimator`` computes by rendering every call, from a
fixed number of renders, with a stated 95% margin (docs/design/estimates.md).

The calls are fed one by one, in plan order (:meth:`CallSampler.add`: no rendering, a few
additions and a dictionary look-up per call, memory bounded by the samples kept). They
fall into groups, one per judge and set of criteria: the calls rendered from one prompt
template, whose prompt tokens are the template's plus about a quarter of the characters
of the texts the call fills in. Per group the sampler keeps the exact count of calls and
the exact total of those characters, and a uniform sample of the calls (a reservoir,
Algorithm L, seeded). :meth:`CallSampler.summarize` renders the samples (at most
``budget`` calls in all, ``size`` per group) and estimates each group's totals with the
regression estimator on the characters (tokens ~ a + b * characters), whose variance
gives the margin (the central limit theorem on the sample's mean residual, with the
finite-population correction). A group of no more calls than its sample is rendered
wholly: its figures are exact, :func:`estimate.summarize_estimates`'s own.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from math import fsum

import numpy as np
import numpy.typing as npt

from flask_eval.producer.context import RunContext
from flask_eval.producer.estimate import (
    AnswerCache,
    CallEstimate,
    CallTexts,
    Estimate,
    Estimator,
    add_cache_cost,
    estimate_each,
    note_short_prefix,
    summarize_estimates,
)
from flask_eval.producer.prefix import PrefixGroup, as_rendered, cache_minimum
from flask_eval.producer.sample_groups import Group, Order, regression, rubric_chars
from flask_eval.storage.records import PlannedCall

__all__ = ["CallSampler", "CallTexts", "SampledEstimate"]

#: calls sampled per group (a judge and a set of criteria): a group of no more is exact
DEFAULT_SIZE = 256
#: calls rendered at most in all, whatever the number of groups (the per-group sample
#: shrinks to fit, down to :data:`MIN_SIZE`)
DEFAULT_BUDGET = 16_000
MIN_SIZE = 32
#: the normal distribution's 97.5% quantile: a 95% two-sided margin
Z95 = 1.959963984540054

#: a call as ``cost_of`` knows it: judge, model, second model, instance, criteria
CallKey = tuple[str, str, str, str, tuple[str, ...]]


def _key(call: PlannedCall) -> CallKey:
    return (call.judge, call.model, call.model_b, call.instance_id, tuple(call.criteria))


@dataclass
class SampledEstimate(Estimate):
    """A judge's :class:`Estimate`, sampled or exact (``rendered`` None: every call
    rendered), with its groups (a judge and a set of criteria each), and how many were
    sampled rather than rendered wholly."""

    groups: int = 0
    sampled_groups: int = 0


class CallSampler:
    """Estimates of every call fed to :meth:`add`, from a uniform sample of each group's
    (a judge and a set of criteria) calls: ``size`` per group, ``budget`` in all."""

    def __init__(
        self,
        context: RunContext,
        size: int = DEFAULT_SIZE,
        seed: int = 0,
        budget: int = DEFAULT_BUDGET,
    ) -> None:
        if size < 1 or budget < 1:
            raise ValueError("a sample takes at least one call")
        self.context = context
        self.size, self.seed, self.budget = size, seed, budget
        self._groups: dict[tuple[str, tuple[str, ...]], Group] = {}
        self._orders: dict[tuple[str, ...], Order] = {}
        self._reference, self._pairwise = context.reference, context.pairwise
        self._costs: dict[CallKey, float] = {}  # cost_of: the exactly rendered calls'
        self._means: dict[int, float] = {}  # cost_of: id of a group -> its mean cost
        self._summary: list[SampledEstimate] | None = None

    @classmethod
    def of_estimator(
        cls, estimator: Estimator, calls: Iterable[PlannedCall], **options: int
    ) -> CallSampler:
        """A sampler fed ``calls`` with ``estimator``'s texts (its inputs, or a run's)."""
        sampler = cls(estimator.context, **options)
        for call in calls:
            sampler.add(call, estimator.texts(call))
        return sampler

    def add(self, call: PlannedCall, texts: CallTexts) -> None:
        """Count ``call`` (every planned call, in plan order), and maybe sample it."""
        key = (call.judge, *call.criteria)
        chars = self.chars(texts, call.criteria)
        if self.count(key, chars):
            self.take(key, call, texts, chars)

    def chars(self, texts: CallTexts, criteria: Sequence[str]) -> int:
        """The characters of ``texts`` a call with ``criteria`` fills into its prompt."""
        chars = len(texts.instruction) + len(texts.response) + len(texts.system_prompt)
        if self._reference:
            chars += len(texts.reference)
        if texts.response_b is not None and self._pairwise:
            chars += len(texts.response_b)
        if texts.rubrics:
            chars += rubric_chars(texts.rubrics, criteria)
        if texts.history:  # a conversation's earlier turns, and each model's answers
            chars += sum(len(t.user) for t in texts.history)
            if self._reference:
                chars += sum(len(t.reference) for t in texts.history)
            chars += sum(len(a) for a in texts.answers)
            if self._pairwise:
                chars += sum(len(a) for a in texts.answers_b)
        return chars

    def count(self, key: tuple[str, ...], chars: int) -> bool:
        """Count a call of ``key`` (its judge, then its criteria in order) whose texts
        have ``chars`` characters: :meth:`add` without the call. True when the sample
        takes it: then :meth:`take` it, before the next call is counted."""
        return (self._orders.get(key) or self._order(key)).count(chars)

    def counter(self, key: tuple[str, ...]) -> Callable[[int], bool]:
        """:meth:`count` for the calls of ``key``, without looking the key up each time."""
        return (self._orders.get(key) or self._order(key)).count

    def count_block(
        self,
        keys: Sequence[tuple[str, ...]],
        key_of: npt.NDArray[np.intp],
        chars: npt.NDArray[np.int64],
        make: Callable[[int], tuple[PlannedCall, CallTexts]],
    ) -> None:
        """:meth:`count` and :meth:`take` of a block of calls in plan order: call ``j`` is
        of ``keys[key_of[j]]`` with ``chars[j]`` characters, made by ``make(j)`` if the
        sample takes it. The counts and the sample of counting them one by one, with a
        Python step per call sampled rather than per call."""
        slots: dict[int, int] = {}  # id of a group -> its place in groups
        groups: list[Group] = []
        slot_of = np.zeros(len(keys), dtype=np.intp)
        per_key = np.bincount(key_of, minlength=len(keys))
        used, at = np.unique(key_of, return_index=True)
        for k in used[np.argsort(at)].tolist():  # in the order of their first calls
            order = self._orders.get(keys[k]) or self._order(keys[k])
            order.calls += int(per_key[k])
            slot_of[k] = slots.setdefault(id(order.group), len(groups))
            if slot_of[k] == len(groups):
                groups.append(order.group)
        group_of = slot_of[key_of]
        counts = np.bincount(group_of, minlength=len(groups)).tolist()
        sums = np.bincount(group_of, weights=chars, minlength=len(groups))  # exact < 2**53
        members = np.argsort(group_of, kind="stable")  # each group's calls, in order
        start = 0
        for group, m, total in zip(groups, counts, sums.tolist(), strict=True):
            mine, start = members[start : start + m], start + m
            group.chars += round(total)
            first, end = group.seen + 1, group.seen + m
            seen = first
            while seen <= end:  # the calls taken: the reservoir's first, then its turns
                if seen > group.size:
                    if group.next > end:
                        break
                    seen = group.next
                group.seen = seen
                j = int(mine[seen - first])
                call, texts = make(j)
                group.take(call, texts, int(chars[j]))
                seen += 1
            group.seen = end

    def take(self, key: tuple[str, ...], call: PlannedCall, texts: CallTexts, chars: int) -> None:
        """Sample the call just counted (:meth:`count` said so)."""
        self._orders[key].group.take(call, texts, chars)

    def sampled_calls(self) -> Iterator[PlannedCall]:
        """The calls the samples hold (to :meth:`fill` their texts)."""
        for group in self._groups.values():
            for call, _, _ in group.items:
                yield call

    def fill(self, texts_of: Callable[[PlannedCall, CallTexts], CallTexts]) -> None:
        """Replace each sampled call's texts by ``texts_of(call, texts)``: calls counted
        from the lengths of their texts (:meth:`count`), their texts read afterwards."""
        for group in self._groups.values():
            group.items = [(c, texts_of(c, t), x) for c, t, x in group.items]

    def _order(self, key: tuple[str, ...]) -> Order:
        """The first call of a judge with criteria in this order (``key``): its group is
        that of the judge and the set of criteria."""
        judge, criteria = key[0], key[1:]
        template = (judge, tuple(sorted(criteria)))
        group = self._groups.get(template)
        if group is None:
            rng = random.Random(f"{self.seed}:{template}")
            group = self._groups[template] = Group(judge, self.size, rng)
        order = self._orders[key] = Order(group, len(criteria))
        group.orders.append(order)
        return order

    def sample_size(self) -> int:
        """The sample per group: ``size``, or less so that at most ``budget`` calls are
        rendered in all (never under :data:`MIN_SIZE`); a group of no more calls is
        rendered wholly."""
        seen = [g.seen for g in self._groups.values()]

        def renders(k: int) -> int:
            return sum(min(s, k) for s in seen)

        low, high = MIN_SIZE, self.size
        if renders(high) <= self.budget or low >= high:
            return high
        while low < high:  # the largest k within the budget
            mid = (low + high + 1) // 2
            low, high = (mid, high) if renders(mid) <= self.budget else (low, mid - 1)
        return low

    def summarize(self, cache: AnswerCache | None = None) -> list[SampledEstimate]:
        """Per judge: jobs, calls, tokens and cost live, batched, batched + cached, like
        :meth:`Estimator.summarize`, sampled groups with their 95% margins; the answer
        cache is asked about the rendered calls only."""
        k = self.sample_size()
        self._costs.clear()
        exact = [g for g in self._groups.values() if g.seen <= k]
        sampled = [g for g in self._groups.values() if g.seen > k]
        ones = self._record(
            estimate_each(
                self.context, cache, ((call, texts) for g in exact for call, texts, _ in g.items)
            )
        )
        base = summarize_estimates(self.context, ones)
        for g in exact:
            self._means[id(g)] = fsum(self._costs[_key(c)] for c, _, _ in g.items) / g.seen
        out = {
            e.judge: SampledEstimate(**vars(e), groups=sum(g.judge == e.judge for g in exact))
            for e in base
        }
        variances: dict[str, list[float]] = {name: [0.0, 0.0, 0.0] for name in out}
        for index, g in enumerate(sampled):
            items = random.Random(f"{self.seed}:{k}:{index}").sample(g.items, k)
            est, var = out[g.judge], variances[g.judge]
            for i, v in enumerate(self._add_sampled(est, g, items, cache)):
                var[i] += v
            est.rendered = (est.rendered or 0) + len(items)
        for name, est in out.items():
            if est.rendered is not None:
                est.rendered += sum(g.seen for g in exact if g.judge == name)
                est.prompt_margin, est.cost_margin, est.cached_margin = (
                    Z95 * v**0.5 for v in variances[name]
                )
        self._summary = list(out.values())
        return self._summary

    def _record(self, ones: Iterable[CallEstimate]) -> Iterator[CallEstimate]:
        for one in ones:
            self._costs[_key(one.call)] = one.cost
            yield one

    def _add_sampled(
        self,
        est: SampledEstimate,
        group: Group,
        items: list[tuple[PlannedCall, CallTexts, int]],
        cache: AnswerCache | None,
    ) -> tuple[float, float, float]:
        """Add a sampled group's estimates to ``est``; the variances of its prompt
        tokens, live cost and answer-cache hits."""
        judge = self.context.judges[group.judge]
        ones = list(estimate_each(self.context, cache, ((c, t) for c, t, _ in items)))
        xs = [float(x) for _, _, x in items]
        paid = [0.0 if o.cached else 1.0 for o in ones]  # 1: a call paid for

        def total(ys: Iterable[float]) -> tuple[float, float]:
            return regression(list(ys), xs, group.seen, group.chars)

        prompt, prompt_var = total(o.prompt_tokens * p for o, p in zip(ones, paid, strict=True))
        completion, _ = total(o.completion_tokens * p for o, p in zip(ones, paid, strict=True))
        pictures, _ = total(o.image_tokens * p for o, p in zip(ones, paid, strict=True))
        live, live_var = total(
            judge.cost(o.prompt_tokens, o.completion_tokens) * p
            for o, p in zip(ones, paid, strict=True)
        )
        batch, _ = total(
            judge.cost(o.prompt_tokens, o.completion_tokens, batch=True) * p
            for o, p in zip(ones, paid, strict=True)
        )
        calls, calls_var = total(paid)
        self._means[id(group)] = total(o.cost for o in ones)[0] / group.seen
        est.calls += group.seen
        est.jobs += sum(o.calls * o.criteria for o in group.orders)
        est.cached += round(group.seen - calls)
        est.prompt_tokens += round(prompt)
        est.completion_tokens += round(completion)
        est.image_tokens += round(pictures)
        est.cost += live
        est.batch_cost += batch
        est.groups += 1
        est.sampled_groups += 1
        # the prefix the sample's paid calls share, read by every paid call of each
        # ordered group but the one that writes it
        renders = [as_rendered(o.messages) for o in ones if not o.cached]
        minimum = cache_minimum(judge.spec)
        prefix = PrefixGroup(renders[0], renders[0], minimum=minimum) if renders else None
        for rendered in renders:
            assert prefix is not None
            prefix.add(rendered, 0, 0)
        if prefix is not None:
            note_short_prefix(est, prefix)
        shared = prefix.prefix_tokens if prefix is not None else 0
        per_call = calls / group.seen
        reading = [o.calls * per_call - 1 for o in group.orders if o.calls * per_call >= 2]
        add_cache_cost(
            est,
            judge,
            round(prompt),
            round(completion),
            round(fsum(reading) * shared),
            shared * len(reading),
        )
        return prompt_var, live_var, calls_var

    def each(self, calls: Iterable[PlannedCall]) -> Iterator[CallEstimate]:
        """Each call's :meth:`cost_of`, as ``Estimator.each`` gives it (tokens and the
        answer cache per call are not known: the cache is in the group's mean)."""
        for call in calls:
            yield CallEstimate(call, 0, 0, False, self.cost_of(call))

    def cost_of(self, call: PlannedCall) -> float:
        """The estimated cost of ``call`` at the price it will be paid (its judge's batch
        price for a batch judge; 0 when the answer cache answers it), for ``--max-cost``
        at dispatch: a wholly rendered group's calls exactly (as ``Estimator.each``), a
        sampled group's at its estimated mean. The figures of the last :meth:`summarize`
        (call it once every call is added; made now, without the answer cache, if there
        was none); KeyError for a call never added."""
        if self._summary is None:
            self.summarize()
        known = self._costs.get(_key(call))
        if known is not None:
            return known
        return self._means[id(self._orders[(call.judge, *call.criteria)].group)]
