"""Token and cost estimates before anything is spent (`--dry-run`, `--max-cost`).

A call's prompt tokens are estimated from its rendered messages (each judge's grading
protocol renders them exactly as the workers will: :meth:`RunContext.prompt`), its
completion tokens from the protocol's expected answer length. The texts come from the
inputs being planned, or, for `resume`, from the run's ledger.

A call whose answer is already in the answer cache (an :class:`AnswerCache`, given by the
caller: the cache's keys are the workers' business) costs nothing: it is counted apart,
and left out of the tokens and cost. A judge without a price has an unknown cost, said
as such (``Estimate.unknown``), never as $0.

Each judge's cost is estimated three ways: its calls made live, one by one (``cost``:
what a run pays today, and what ``--max-cost`` holds), through the provider's batch API
(``batch_cost``, at the judge's batch multiplier), and through the batch API with the
prompt prefix the calls share read from the provider's prompt cache (``cache_cost``).
For that last one, the calls of one judge with one set of criteria are taken to share
the longest common prefix of their rendered text (:func:`shared_prefix_tokens`), which
is written to the cache once (at the judge's cache-write price) and read by every other
call of the group (at its cached-input price). It is a conservative estimate: see
:func:`shared_prefix_tokens`; a cache entry's expiry (Anthropic's 5 minutes) is not
modelled, so a group whose calls are spread over hours may write its prefix more than
once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from math import floor, inf, log10
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

from flask_eval.core.models import model_info
from flask_eval.core.types import Instance, InstanceRubric, JudgeConfig
from flask_eval.producer.context import RunContext
from flask_eval.producer.inputs import Inputs
from flask_eval.producer.prefix import CACHE_STEP as CACHE_STEP
from flask_eval.producer.prefix import MIN_CACHED_PREFIX as MIN_CACHED_PREFIX
from flask_eval.producer.prefix import PrefixGroup, as_rendered, below_minimum, cache_minimum
from flask_eval.producer.prefix import shared_prefix_tokens as shared_prefix_tokens
from flask_eval.rubrics.kind import NO_MODEL
from flask_eval.rubrics.prompt import Message, estimate_tokens
from flask_eval.storage.records import PlannedCall, RunInfo
from flask_eval.storage.store import Store

#: calls rendered and looked up in the cache at a time (bounds the memory held)
CHUNK = 1000
_NO_RUBRICS: Mapping[str, InstanceRubric] = MappingProxyType({})


def add_cache_cost(
    est: Estimate, judge: JudgeConfig, prompt: int, completion: int, read: int, prefix: int
) -> None:
    """Add to ``est`` the batch + cache cost of calls of one prefix group: ``prompt`` and
    ``completion`` tokens in all, ``read`` of them served by the prompt cache, their shared
    ``prefix`` written to it once."""
    est.cache_read_tokens += read
    est.cache_cost += judge.cost(
        prompt, completion, cached_tokens=read, cache_write_tokens=prefix, batch=True
    )


class CallTexts(NamedTuple):
    """What rendering one call needs of the inputs: the instance's instruction, reference
    answer, system prompt and own rubrics, the response judged and, in a pairwise run, the
    second one (:func:`render_texts`). Immutable; a named tuple rather than a frozen
    dataclass, three times cheaper to make (one per planned call: 10 million on a big
    plan)."""

    instruction: str
    reference: str
    response: str
    response_b: str | None = None
    system_prompt: str = ""
    rubrics: Mapping[str, InstanceRubric] = _NO_RUBRICS


class CallCosts(Protocol):
    """What dispatch asks of an estimator: each call's cost, in the calls' order (the
    exact :class:`Estimator`, or ``producer.sampling.CallSampler``'s group means)."""

    def each(self, calls: Iterable[PlannedCall]) -> Iterator[CallEstimate]: ...


class AnswerCache(Protocol):
    """Which rendered calls the answer cache already holds an answer for."""

    def answered(
        self, asks: Sequence[tuple[JudgeConfig, list[Message], Mapping[str, Any] | None]]
    ) -> list[bool]:
        """For each (judge, messages, JSON schema or None): is its answer cached?"""
        ...


@dataclass
class Estimate:
    judge: str
    jobs: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: USD of the calls made live, one by one
    cost: float = 0.0
    #: calls the answer cache answers (free; not in the tokens and cost)
    cached: int = 0
    #: False: the judge has no price, so ``cost`` is unknown (not 0) unless the cache
    #: answers all its calls
    priced: bool = True
    #: USD of the same calls made through the provider's batch API
    batch_cost: float = 0.0
    #: USD of the same calls made through the batch API, their shared prompt prefix
    #: written to the provider's cache once and read from it by every other call
    cache_cost: float = 0.0
    #: of ``prompt_tokens``: those the prompt cache would serve (the batch + cache case)
    cache_read_tokens: int = 0
    #: the longest prefix calls of this judge share that its model does not cache (under
    #: its minimum, ``producer.prefix.cache_minimum``), and that minimum; 0: none
    short_prefix: int = 0
    cache_minimum: int = 0
    #: a reasoning model's completion budget per call (0: not one): its thinking, billed
    #: as completion tokens, is not in ``completion_tokens`` (it cannot be known before)
    thinking_budget: int = 0
    #: None: every call rendered (exact); else the calls rendered for a sampled estimate
    #: (``producer.sampling``), whose 95% half-widths follow: of ``prompt_tokens``, of
    #: ``cost`` (the batch costs' in proportion) and of ``cached``
    rendered: int | None = None
    prompt_margin: float = 0.0
    cost_margin: float = 0.0
    cached_margin: float = 0.0

    @property
    def unknown(self) -> bool:
        """Whether the cost is unknown: calls to pay for at no known price."""
        return not self.priced and self.calls > self.cached


@dataclass(frozen=True)
class CallEstimate:
    """One call's estimated tokens and cost (0 when the cache answers it, or its judge
    has no price)."""

    call: PlannedCall
    prompt_tokens: int
    completion_tokens: int
    cached: bool
    cost: float
    #: the call's rendered messages (what a prompt cache would see)
    messages: list[Message] = field(default_factory=list, compare=False, repr=False)


class Estimator:
    """Estimated tokens and cost of a call, from its rendered prompt."""

    def __init__(
        self,
        instances: Mapping[str, tuple[str, str]],
        responses: Mapping[tuple[str, str], str],
        context: RunContext,
        own: Mapping[str, Instance] | None = None,
        cache: AnswerCache | None = None,
    ) -> None:
        self.instances = instances  # id -> (instruction, reference)
        self.responses = responses  # (model, instance id) -> text
        self.context = context
        self.own = own or {}  # id -> the instance, for its system prompt and own rubrics
        self.cache = cache

    @classmethod
    def of_inputs(
        cls, inputs: Inputs, context: RunContext, cache: AnswerCache | None = None
    ) -> Estimator:
        return cls(
            {i.id: (i.instruction, i.answer) for i in inputs.instances},
            {(r.model, r.instance_id): r.text for rs in inputs.response_sets for r in rs.responses},
            context,
            {i.id: i for i in inputs.instances if i.rubrics or i.system_prompt},
            cache,
        )

    @classmethod
    def of_run(cls, store: Store, run: RunInfo, cache: AnswerCache | None = None) -> Estimator:
        """From the texts stored with the run (for `resume` and later runs)."""
        instances, responses = store.run_texts(run.id)
        own = {i.id: i for i in store.instances(run.id).values() if i.rubrics or i.system_prompt}
        return cls(instances, responses, RunContext.from_config(run.config), own, cache)

    def texts(self, call: PlannedCall) -> CallTexts:
        """What rendering ``call`` needs of the inputs."""
        instruction, reference = self.instances[call.instance_id]
        own = self.own.get(call.instance_id)
        return CallTexts(
            instruction,
            reference,
            # a row about an instance alone has no model and no response
            self.responses[(call.model, call.instance_id)] if call.model != NO_MODEL else "",
            self.responses.get((call.model_b, call.instance_id)) if call.model_b else None,
            own.system_prompt if own is not None else "",
            own.rubrics if own is not None else _NO_RUBRICS,
        )

    def render(self, call: PlannedCall) -> tuple[list[Message], Mapping[str, Any] | None, int]:
        """The call's messages and JSON schema, as the workers send them, and the
        expected completion tokens of its answer."""
        return render_texts(self.context, call, self.texts(call))

    def tokens(self, call: PlannedCall) -> tuple[int, int]:
        messages, _, completion = self.render(call)
        return estimate_tokens(messages), completion

    def each(self, calls: Iterable[PlannedCall]) -> Iterator[CallEstimate]:
        """Each call's estimate, lazily, rendered and looked up in the cache
        :data:`CHUNK` calls at a time."""
        return estimate_each(self.context, self.cache, ((c, self.texts(c)) for c in calls))

    def summarize(self, calls: Iterable[PlannedCall]) -> list[Estimate]:
        """Per judge: its jobs, calls, tokens and cost live, batched, batched + cached."""
        return summarize_estimates(self.context, self.each(calls))


def render_texts(
    context: RunContext, call: PlannedCall, texts: CallTexts
) -> tuple[list[Message], Mapping[str, Any] | None, int]:
    """``call``'s messages and JSON schema, as the workers send them, and the expected
    completion tokens of its answer, from ``texts``."""
    criteria = [context.criterion(c, texts.rubrics) for c in call.criteria]
    subject = context.subject(
        texts.instruction, texts.reference, texts.response, texts.system_prompt, texts.response_b
    )
    messages, schema = context.prompt(call.judge, subject, criteria)
    return messages, schema, context.protocol_for(call.judge).completion_tokens(criteria)


def estimate_each(
    context: RunContext,
    cache: AnswerCache | None,
    calls: Iterable[tuple[PlannedCall, CallTexts]],
) -> Iterator[CallEstimate]:
    """Each call's estimate, lazily, rendered from its texts and looked up in ``cache``
    :data:`CHUNK` calls at a time."""
    it = iter(calls)
    while chunk := list(islice(it, CHUNK)):
        rendered = [render_texts(context, call, texts) for call, texts in chunk]
        hits = (
            cache.answered(
                [
                    (context.judges[c.judge], m, s)
                    for (c, _), (m, s, _) in zip(chunk, rendered, strict=True)
                ]
            )
            if cache is not None
            else [False] * len(chunk)
        )
        for (call, _), (messages, _, completion), hit in zip(chunk, rendered, hits, strict=True):
            prompt = estimate_tokens(messages)
            judge = context.judges[call.judge]
            # at the price the call will be paid: a batch judge's through its batch API
            # (what --max-cost reserves when it dispatches the call)
            cost = 0.0 if hit else judge.cost(prompt, completion, batch=judge.batch)
            yield CallEstimate(call, prompt, completion, hit, cost, messages)


def summarize_estimates(context: RunContext, ones: Iterable[CallEstimate]) -> list[Estimate]:
    """Per judge of ``context``: the jobs, calls, tokens and cost live, batched, batched +
    cached of the calls estimated (``ones``)."""
    by_judge = {
        name: Estimate(name, priced=judge.price is not None, thinking_budget=thinking(judge))
        for name, judge in context.judges.items()
    }
    groups: dict[tuple[str, tuple[str, ...]], PrefixGroup] = {}
    for one in ones:
        est = by_judge[one.call.judge]
        est.jobs += len(one.call.criteria)
        est.calls += 1
        if one.cached:
            est.cached += 1
            continue
        est.prompt_tokens += one.prompt_tokens
        est.completion_tokens += one.completion_tokens
        judge = context.judges[one.call.judge]
        est.cost += judge.cost(one.prompt_tokens, one.completion_tokens)  # live
        est.batch_cost += judge.cost(one.prompt_tokens, one.completion_tokens, batch=True)
        rendered = as_rendered(one.messages)
        key = (one.call.judge, tuple(one.call.criteria))
        minimum = cache_minimum(judge.spec)
        group = groups.setdefault(key, PrefixGroup(rendered, rendered, minimum=minimum))
        group.add(rendered, one.prompt_tokens, one.completion_tokens)
    for (name, _), group in groups.items():
        note_short_prefix(by_judge[name], group)
        prefix = group.prefix_tokens
        add_cache_cost(
            by_judge[name],
            context.judges[name],
            group.prompt_tokens,
            group.completion_tokens,
            (group.calls - 1) * prefix,
            prefix,
        )
    return list(by_judge.values())


def thinking(judge: JudgeConfig) -> int:
    """The completion budget of a reasoning judge's calls, 0 for another judge."""
    model = model_info(judge.spec.partition("@")[0])
    return model.budget(judge.max_tokens) if model.reasoning else 0


def note_short_prefix(est: Estimate, group: PrefixGroup) -> None:
    """Remember on ``est`` a prefix ``group``'s calls share that the model won't cache."""
    if group.short_prefix > est.short_prefix:
        est.short_prefix, est.cache_minimum = group.short_prefix, group.minimum


def planned_calls(
    inputs: Inputs, context: RunContext, pairs: Sequence[tuple[str, str]] | None = None
) -> list[PlannedCall]:
    """Every call a fresh run would make, without touching the store (``pairs``: the
    ordered model pairs of a pairwise run)."""
    from flask_eval.producer.pairs import planned_pairwise_rows
    from flask_eval.producer.plan import group_calls
    from flask_eval.storage.records import OpenRow

    if pairs is not None:
        return group_calls(planned_pairwise_rows(inputs, pairs, list(context.judges)), context)
    criteria_of = {i.id: i.skills for i in inputs.instances}
    rows = [
        OpenRow(0, model, "", instance_id, criterion, judge)
        for judge in context.judges
        for model, answered in inputs.subjects()
        for instance_id in answered
        for criterion in criteria_of[instance_id]
    ]
    return group_calls(rows, context)


def _usd(e: Estimate, value: float, total: bool) -> str:
    if not e.unknown:
        return f"{value:.4f}"
    # the priced part, at least: "unknown" alone when nothing is priced
    return f">={value:.4f}" if total and value else "unknown"


def _share(margin: float, value: float) -> str:
    """``margin`` as a percentage of ``value``, to two significant digits."""
    share = 100 * margin / value if value else 0.0
    if not share or share == inf:
        return f"{share:.0f}%"
    return f"{share:.{max(0, 1 - floor(log10(share)))}f}%"


def _sampled(e: Estimate) -> str:
    """The line of a sampled estimate: its figures with their 95% margins."""
    margin = _share(e.prompt_margin, e.prompt_tokens)
    line = (
        f"{e.judge}: ~{e.prompt_tokens:,} prompt tokens (+-{margin}, 95%, from "
        f"{e.rendered:,} of {e.calls:,} calls rendered)"
    )
    if not e.unknown:
        line += f", ~{e.cost:.4f} USD live (+-{_share(e.cost_margin, e.cost)})"
    if e.cached_margin:
        line += f", ~{e.cached:,} calls from the answer cache (+-{e.cached_margin:,.0f})"
    return line


def format_estimates(estimates: Sequence[Estimate], worker: str = "judge") -> str:
    """The table `--dry-run` prints, one row per judge and a total: the cost of its calls
    made live, through the providers' batch APIs, and batched with their shared prompt
    prefix cached; with a note naming the judges without a price (their cost is unknown,
    not 0) and the calls the answer cache answers. ``worker``: who does the work, in the
    run's kind's words (``rubrics.kind.Words.worker``: a judge, a model, a critic)."""
    header = (
        f"{worker:<40} {'jobs':>8} {'calls':>8} {'ans.cache':>9} {'prompt tok':>12} "
        f"{'cache rd tok':>12} {'compl. tok':>11} {'live USD':>10} {'batch USD':>10} "
        f"{'+cache USD':>10}"
    )
    total = Estimate(
        "total",
        jobs=sum(e.jobs for e in estimates),
        calls=sum(e.calls for e in estimates),
        prompt_tokens=sum(e.prompt_tokens for e in estimates),
        completion_tokens=sum(e.completion_tokens for e in estimates),
        cost=sum(e.cost for e in estimates),
        cached=sum(e.cached for e in estimates),
        priced=not any(e.unknown for e in estimates),
        batch_cost=sum(e.batch_cost for e in estimates),
        cache_cost=sum(e.cache_cost for e in estimates),
        cache_read_tokens=sum(e.cache_read_tokens for e in estimates),
        rendered=sum(e.rendered if e.rendered is not None else e.calls for e in estimates)
        if any(e.rendered is not None for e in estimates)
        else None,
        prompt_margin=sum(e.prompt_margin**2 for e in estimates) ** 0.5,
        cost_margin=sum(e.cost_margin**2 for e in estimates) ** 0.5,
        cached_margin=sum(e.cached_margin**2 for e in estimates) ** 0.5,
    )
    lines = [header, "-" * len(header)]
    for e in [*estimates, total]:
        live, batch, cached = (_usd(e, v, e is total) for v in (e.cost, e.batch_cost, e.cache_cost))
        lines.append(
            f"{e.judge[:40]:<40} {e.jobs:>8} {e.calls:>8} {e.cached:>9} {e.prompt_tokens:>12} "
            f"{e.cache_read_tokens:>12} {e.completion_tokens:>11} {live:>10} {batch:>10} "
            f"{cached:>10}"
        )
    if total.rendered is not None:
        lines += [_sampled(e) for e in [*estimates, total] if e.rendered is not None]
        lines.append(
            "~: estimated from a uniform sample of the calls of each judge and criteria "
            "(docs/design/estimates.md), within +- the 95% margin; the +cache USD from the "
            "prefix the sample shares"
        )
    unpriced = [e.judge for e in estimates if e.unknown]
    if unpriced:
        their = "their calls is" if len(unpriced) > 1 else "its calls is"
        lines.append(
            f"no price for {', '.join(unpriced)}: the cost of {their} unknown (not 0); give "
            f"a {worker} `price: {{input: USD, output: USD}}` per million tokens in a "
            f"--{worker}s file (0 for a free local {worker})"
        )
    if total.cached:
        lines.append(
            f"{total.cached} of {total.calls} calls are answered from the answer cache (paid "
            "before, by this or another run): no tokens or cost counted for them"
        )
    if total.batch_cost != total.cost or total.cache_cost != total.batch_cost:
        lines.append(
            "live: each call on its own, at full price; batch: through the providers' batch "
            "APIs (each judge's batch price); +cache: batched, the prompt prefix the calls of "
            "a judge and criteria share written to the provider's cache once and read by the "
            "others (cache rd tok; a prefix under the model's minimum, 1,024 tokens for "
            "most, is not cached)"
        )
    lines += [
        below_minimum(e.judge, e.short_prefix, e.cache_minimum) for e in estimates if e.short_prefix
    ]
    lines += [
        f"{e.judge}: a reasoning model also thinks before it answers, billed as "
        f"completion tokens (answer and thinking up to {e.thinking_budget:,} a call): "
        "compl. tok and USD count the answers only"
        for e in estimates
        if e.thinking_budget and e.calls > e.cached
    ]
    return "\n".join(lines)
