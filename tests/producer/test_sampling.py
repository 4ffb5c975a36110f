"""Sampled estimates (producer/sampling.py): exact where a group is rendered wholly, else
within their stated 95% margin of the exact figures, for most seeds."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from flask_eval.core.types import Instance, InstanceRubric, JudgeConfig, Price
from flask_eval.producer.context import RunContext
from flask_eval.producer.estimate import Estimate, Estimator
from flask_eval.producer.estimate_format import format_estimates
from flask_eval.producer.sampling import CallSampler, SampledEstimate
from flask_eval.rubrics.messages import text_of
from flask_eval.rubrics.prompt import Message
from flask_eval.rubrics.skills import load_default
from flask_eval.storage.records import PlannedCall

SKILLS = load_default()
NAMES = SKILLS.names
PRICE = Price(2.0, 8.0, cached_input=0.5, batch=0.5)
JUDGES = {
    "a": JudgeConfig("a", "openai/a", price=PRICE),
    "b": JudgeConfig("b", "openai/b", price=Price(3.0, 15.0), batch=True),
}
WORDS = ["river", "stone", "graph", "theorem", "ledger", "vaccine", "orbit", "poem"]


def plan(
    n: int, context: RunContext, seed: int = 0, models: Sequence[str] = ("m1", "m2")
) -> tuple[Estimator, list[PlannedCall]]:
    """``n`` instances with responses of very different lengths, some with a system prompt
    or a rubric of their own (texts that change a prompt's template), judged by each
    judge: in instance mode on 1 or 2 skill sets, in skill mode on 3 skills."""
    rng = random.Random(seed)
    instances, responses, own = {}, {}, {}
    sets = [NAMES[:3], NAMES[3:6]]
    calls = []
    for i in range(n):
        iid = str(i)
        instances[iid] = (
            f"Explain {rng.choice(WORDS)} in case {i}.",
            " ".join(rng.choices(WORDS, k=rng.randint(0, 40))),
        )
        skills = sets[i % 2]
        if i % 7 == 0 or i % 11 == 0:
            rubric = {skills[0]: InstanceRubric("own " * rng.randint(1, 30), {1: "bad", 5: "good"})}
            system = "Be terse. " * rng.randint(1, 5) if i % 7 == 0 else ""
            own[iid] = Instance(
                iid,
                "",
                "",
                tuple(skills),
                system_prompt=system,
                rubrics=rubric if i % 11 == 0 else {},
            )
        for m in models:
            words = int(rng.lognormvariate(4, 1.2)) + 1  # 1 to thousands of words
            responses[(m, iid)] = " ".join(rng.choices(WORDS, k=words))
        for judge in context.judges:
            if context.pairwise:
                calls.append(PlannedCall([0], models[0], iid, judge, list(skills), models[1]))
                continue
            for m in models:
                parts = context.protocol_for(judge).calls(list(skills))
                calls += [PlannedCall([0], m, iid, judge, part) for part in parts]
    return Estimator(instances, responses, context, own), calls


def context(mode: str = "instance", pairwise: bool = False) -> RunContext:
    return RunContext(SKILLS, JUDGES, mode, pairwise=pairwise)


class MarkedCache:
    """Answers the calls whose prompt holds the word 'orbit' in the instruction."""

    def answered(
        self, asks: Sequence[tuple[JudgeConfig, list[Message], Mapping[str, Any] | None]]
    ) -> list[bool]:
        return ["Explain orbit" in "".join(text_of(m) for m in ms) for _, ms, _ in asks]


def sampler(est: Estimator, calls: list[PlannedCall], **options: int) -> CallSampler:
    return CallSampler.of_estimator(est, calls, **options)


def same(sampled: Sequence[Estimate], exact: Sequence[Estimate]) -> None:
    for s, e in zip(sampled, exact, strict=True):
        assert s.rendered is None and s.prompt_margin == 0 and s.cost_margin == 0
        assert (
            s.judge,
            s.jobs,
            s.calls,
            s.cached,
            s.prompt_tokens,
            s.completion_tokens,
            s.cache_read_tokens,
        ) == (
            e.judge,
            e.jobs,
            e.calls,
            e.cached,
            e.prompt_tokens,
            e.completion_tokens,
            e.cache_read_tokens,
        )
        assert (s.cost, s.batch_cost, s.cache_cost) == pytest.approx(
            (e.cost, e.batch_cost, e.cache_cost), rel=1e-9
        )


@pytest.mark.parametrize(
    ("mode", "pairwise", "cache"),
    [
        ("instance", False, None),
        ("skill", False, None),
        ("instance", True, None),
        ("instance", False, MarkedCache()),
    ],
)
def test_a_group_no_larger_than_its_sample_is_rendered_wholly_and_exact(
    mode: str, pairwise: bool, cache: MarkedCache | None
) -> None:
    ctx = context(mode, pairwise)
    est, calls = plan(60, ctx)
    est.cache = cache
    sampled = sampler(est, calls, size=100).summarize(cache)
    same(sampled, est.summarize(calls))
    assert all(isinstance(s, SampledEstimate) and s.sampled_groups == 0 for s in sampled)
    if cache is not None:
        assert sum(s.cached for s in sampled) > 0
    # printed as an exact estimate is: no sampled lines
    assert "~" not in format_estimates(sampled)


def covered(sampled: SampledEstimate, exact: Estimate) -> tuple[bool, bool, bool]:
    return (
        abs(sampled.prompt_tokens - exact.prompt_tokens) <= sampled.prompt_margin + 1,
        abs(sampled.cost - exact.cost) <= sampled.cost_margin + 1e-6,
        abs(sampled.cached - exact.cached) <= sampled.cached_margin + 1,
    )


@pytest.mark.parametrize(
    ("mode", "pairwise", "cache"),
    [
        ("instance", False, None),
        ("skill", False, None),
        ("instance", True, None),
        ("instance", False, MarkedCache()),
    ],
)
def test_a_sampled_estimate_falls_within_its_stated_margin_for_most_seeds(
    mode: str, pairwise: bool, cache: MarkedCache | None
) -> None:
    """12 seeds, 2 judges, a 95% margin: the exact figures fall within it 23 times of 24
    on average; at least 18 (a chance of fewer below 1 in 1,000 for a true 95% margin)."""
    ctx = context(mode, pairwise)
    est, calls = plan(300, ctx, seed=3)
    est.cache = cache
    exact = est.summarize(calls)
    hits: Counter[int] = Counter()
    for seed in range(12):
        sampled = sampler(est, calls, size=24, seed=seed).summarize(cache)
        for s, e in zip(sampled, exact, strict=True):
            assert s.rendered is not None and s.rendered < s.calls and s.sampled_groups > 0
            # counted exactly whatever the sample
            assert (s.calls, s.jobs) == (e.calls, e.jobs)
            if cache is None:
                assert (s.cached, s.completion_tokens) == (0, e.completion_tokens)
            assert s.prompt_margin > 0
            hits.update(i for i, ok in enumerate(covered(s, e)) if ok)
    runs = 12 * len(exact)
    assert min(hits[0], hits[1], hits[2]) >= runs * 3 // 4, (hits, runs)
    text = format_estimates(sampled)
    assert "prompt tokens (+-" in text and "95%, from " in text and "calls rendered)" in text


def test_the_sample_budget_caps_the_renders_in_all() -> None:
    est, calls = plan(300, context("skill"))
    s = sampler(est, calls, size=200, budget=1000)
    k = s.sample_size()
    assert 32 <= k < 200
    sampled = s.summarize()
    assert sum(e.rendered or e.calls for e in sampled) <= 1000


def test_the_reservoir_is_a_uniform_sample() -> None:
    """Each of the 100 calls of one group is sampled with the same probability (10 of 100)."""
    est, calls = plan(200, RunContext(SKILLS, {"a": JUDGES["a"]}), models=("m1",))
    group = [c for c in calls if c.criteria == list(NAMES[:3])]
    picks: Counter[int] = Counter()
    runs = 400
    for seed in range(runs):
        s = sampler(est, group, size=10, seed=seed)
        (g,) = s._groups.values()
        assert len(g.items) == 10 and g.seen == len(group)
        picks.update(int(c.instance_id) // 2 for c, _, _ in g.items)
    # each quarter of the stream: 1,000 of the 4,000 picks expected (sd 27)
    quarters = Counter(i * 4 // len(group) for i in picks.elements())
    assert all(abs(quarters[q] - runs * 10 / 4) < 150 for q in range(4)), quarters
    assert max(picks.values()) < 3 * runs * 10 / len(group)


def test_cost_of_a_call_is_exact_in_a_whole_group_and_the_mean_in_a_sampled_one() -> None:
    ctx = context()
    est, calls = plan(300, ctx)
    exact = {id(one.call): one.cost for one in est.each(calls)}
    whole = sampler(est, calls, size=1000)
    whole.summarize()
    assert [whole.cost_of(c) for c in calls] == pytest.approx([exact[id(c)] for c in calls])
    part = sampler(est, calls, size=40)
    part.summarize()
    costs = [part.cost_of(c) for c in calls]
    # the calls of a group at their mean: the group's total, as sampled
    assert len({round(x, 12) for x in costs}) <= 4
    assert sum(costs) == pytest.approx(sum(exact.values()), rel=0.05)


def test_counting_in_blocks_keeps_the_counts_and_the_sample_of_one_by_one() -> None:
    """count_block (a file's calls at once, issue 24) against count/take per call: the
    same groups in the same order, counts, characters and reservoir, whatever the blocks'
    boundaries (inside a group's reservoir filling, between its turns)."""
    rng = random.Random(5)
    keys = [("j", "a"), ("j", "b", "c"), ("j", "c", "b"), ("k", "a")]
    calls = [(rng.randrange(len(keys)), rng.randrange(50, 5000)) for _ in range(3_000)]
    texts = Estimator.texts  # any object: the sampler keeps what it is given
    one, blocks = CallSampler(context(), size=7), CallSampler(context(), size=7)
    for n, (k, chars) in enumerate(calls):
        if one.count(keys[k], chars):
            one.take(
                keys[k], PlannedCall([], "m", str(n), keys[k][0], list(keys[k][1:])), texts, chars
            )  # type: ignore[arg-type]
    start = 0
    while start < len(calls):
        block = calls[start : start + rng.randrange(1, 400)]
        key_of = np.array([k for k, _ in block], dtype=np.intp)
        chars_of = np.array([c for _, c in block], dtype=np.int64)

        def make(j: int, offset: int = start) -> tuple[PlannedCall, Any]:
            k = calls[offset + j][0]
            return PlannedCall([], "m", str(offset + j), keys[k][0], list(keys[k][1:])), texts

        blocks.count_block(keys, key_of, chars_of, make)
        start += len(block)

    def state(s: CallSampler) -> list[Any]:
        return [
            (
                template,
                g.seen,
                g.chars,
                [(c.instance_id, x) for c, _, x in g.items],
                [o.calls for o in g.orders],
            )
            for template, g in s._groups.items()
        ]

    assert state(blocks) == state(one)
    assert sum(g.seen for g in one._groups.values()) == len(calls)
