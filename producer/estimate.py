"""Token and cost estimates before anything is spent (`--dry-run`, `--max-cost`).

A call's prompt tokens are estimated from its rendered messages (each judge's grading
protocol renders them exactly as the workers will: :meth:`RunContext.prompt`), its
completion tokens from the protocol's expected answer length. The texts come from the
inputs being planned, or, for `resume`, from the run's ledger.

A call whose answer is already in the answer cache (an :class:`AnswerCache`, given by the
caller: the cache's keys are the workers' business) costs nothing: it is counted apart,
and left out of the tokens and cost. A judge without a price has an unknown cost, said
as such (``Estimate.unknown``), never as $0.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, Protocol

from flask_eval.core.types import Instance, JudgeConfig
from flask_eval.producer.context import RunContext
from flask_eval.producer.inputs import Inputs
from flask_eval.rubrics.prompt import Message, estimate_tokens
from flask_eval.storage.records import PlannedCall, RunInfo
from flask_eval.storage.store import Store

#: calls rendered and looked up in the cache at a time (bounds the memory held)
CHUNK = 1000


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
    cost: float = 0.0
    #: calls the answer cache answers (free; not in the tokens and cost)
    cached: int = 0
    #: False: the judge has no price, so ``cost`` is unknown (not 0) unless the cache
    #: answers all its calls
    priced: bool = True

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
        return cls(instances, responses, RunContext.from_config(run.config), None, cache)

    def render(self, call: PlannedCall) -> tuple[list[Message], Mapping[str, Any] | None, int]:
        """The call's messages and JSON schema, as the workers send them, and the
        expected completion tokens of its answer."""
        instruction, reference = self.instances[call.instance_id]
        own = self.own.get(call.instance_id)
        rubrics = own.rubrics if own is not None else {}
        criteria = [self.context.criterion(c, rubrics) for c in call.criteria]
        second = self.responses.get((call.model_b, call.instance_id)) if call.model_b else None
        subject = self.context.subject(
            instruction,
            reference,
            self.responses[(call.model, call.instance_id)],
            own.system_prompt if own is not None else "",
            second,
        )
        messages, schema = self.context.prompt(call.judge, subject, criteria)
        return messages, schema, self.context.protocol_for(call.judge).completion_tokens(criteria)

    def tokens(self, call: PlannedCall) -> tuple[int, int]:
        messages, _, completion = self.render(call)
        return estimate_tokens(messages), completion

    def each(self, calls: Iterable[PlannedCall]) -> Iterator[CallEstimate]:
        """Each call's estimate, lazily, rendered and looked up in the cache
        :data:`CHUNK` calls at a time."""
        it = iter(calls)
        while chunk := list(islice(it, CHUNK)):
            rendered = [self.render(call) for call in chunk]
            hits = (
                self.cache.answered([(self.context.judges[c.judge], m, s)
                                     for c, (m, s, _) in zip(chunk, rendered, strict=True)])
                if self.cache is not None else [False] * len(chunk)
            )  # fmt: skip
            for call, (messages, _, completion), hit in zip(chunk, rendered, hits, strict=True):
                prompt = estimate_tokens(messages)
                cost = 0.0 if hit else self.context.judges[call.judge].cost(prompt, completion)
                yield CallEstimate(call, prompt, completion, hit, cost)

    def summarize(self, calls: Iterable[PlannedCall]) -> list[Estimate]:
        by_judge = {
            name: Estimate(name, priced=judge.price is not None)
            for name, judge in self.context.judges.items()
        }
        for one in self.each(calls):
            est = by_judge[one.call.judge]
            est.jobs += len(one.call.criteria)
            est.calls += 1
            if one.cached:
                est.cached += 1
                continue
            est.prompt_tokens += one.prompt_tokens
            est.completion_tokens += one.completion_tokens
            est.cost += one.cost
        return list(by_judge.values())


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
        OpenRow(0, rs.model, "", r.instance_id, criterion, judge)
        for judge in context.judges
        for rs in inputs.response_sets
        for r in rs.responses
        for criterion in criteria_of[r.instance_id]
    ]
    return group_calls(rows, context)


def format_estimates(estimates: Sequence[Estimate]) -> str:
    """The table `--dry-run` prints, one row per judge and a total, with a note naming
    the judges without a price (their cost is unknown, not 0) and the calls the answer
    cache answers."""
    header = (
        f"{'judge':<40} {'jobs':>8} {'calls':>8} {'cached':>8} {'prompt tok':>12} "
        f"{'compl. tok':>11} {'cost USD':>10}"
    )
    total = Estimate(
        "total",
        sum(e.jobs for e in estimates),
        sum(e.calls for e in estimates),
        sum(e.prompt_tokens for e in estimates),
        sum(e.completion_tokens for e in estimates),
        sum(e.cost for e in estimates),
        sum(e.cached for e in estimates),
        not any(e.unknown for e in estimates),
    )
    lines = [header, "-" * len(header)]
    for e in [*estimates, total]:
        if not e.unknown:
            cost = f"{e.cost:.4f}"
        else:  # the priced part, at least: "unknown" alone when nothing is priced
            cost = f">={e.cost:.4f}" if e is total and e.cost else "unknown"
        lines.append(
            f"{e.judge[:40]:<40} {e.jobs:>8} {e.calls:>8} {e.cached:>8} {e.prompt_tokens:>12} "
            f"{e.completion_tokens:>11} {cost:>10}"
        )
    unpriced = [e.judge for e in estimates if e.unknown]
    if unpriced:
        their = "their calls is" if len(unpriced) > 1 else "its calls is"
        lines.append(
            f"no price for {', '.join(unpriced)}: the cost of {their} unknown (not 0); give "
            "a judge `price: {input: USD, output: USD}` per million tokens in a --judges "
            "file (0 for a free local judge)"
        )
    if total.cached:
        lines.append(
            f"{total.cached} of {total.calls} calls are answered from the answer cache (paid "
            "before, by this or another run): no tokens or cost counted for them"
        )
    return "\n".join(lines)
