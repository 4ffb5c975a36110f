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
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

from flask_eval.core.conversations import Turn
from flask_eval.core.image_tokens import image_tokens
from flask_eval.core.images import ImageRef
from flask_eval.core.models import model_info
from flask_eval.core.types import Instance, InstanceRubric, JudgeConfig
from flask_eval.producer.context import Conversation, RunContext
from flask_eval.producer.inputs import Inputs
from flask_eval.producer.prefix import CACHE_STEP as CACHE_STEP
from flask_eval.producer.prefix import MIN_CACHED_PREFIX as MIN_CACHED_PREFIX
from flask_eval.producer.prefix import PrefixGroup, as_rendered, cache_minimum
from flask_eval.producer.prefix import shared_prefix_tokens as shared_prefix_tokens
from flask_eval.rubrics.kind import NO_MODEL
from flask_eval.rubrics.kinds import GENERATION
from flask_eval.rubrics.prompt import Message, estimate_tokens
from flask_eval.storage.records import PlannedCall, RunInfo
from flask_eval.storage.response_history import response_histories
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
    answer, system prompt, own rubrics and images, the response judged and, in a pairwise
    run, the second one, and a conversation's earlier turns: the user's (``history``) and
    each model's answers to them (``answers``, ``answers_b``) (:func:`render_texts`).
    Immutable; a named tuple rather than a frozen dataclass, three times cheaper to make
    (one per planned call: 10 million on a big plan)."""

    instruction: str
    reference: str
    response: str
    response_b: str | None = None
    system_prompt: str = ""
    rubrics: Mapping[str, InstanceRubric] = _NO_RUBRICS
    images: tuple[ImageRef, ...] = ()
    history: tuple[Turn, ...] = ()
    answers: tuple[str, ...] = ()
    answers_b: tuple[str, ...] = ()


def instance_texts(i: Instance) -> CallTexts:
    """What rendering a call needs of instance ``i`` alone (no response yet)."""
    return CallTexts(
        i.instruction, i.answer, "", None, i.system_prompt, i.rubrics, i.images, i.history
    )


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
    #: of ``prompt_tokens``: the images', by the judge's provider's rule (core/image_tokens.py)
    image_tokens: int = 0

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
    #: of ``prompt_tokens``: the instance's images'
    image_tokens: int = 0


class Estimator:
    """Estimated tokens and cost of a call, from its rendered prompt."""

    def __init__(
        self,
        instances: Mapping[str, tuple[str, str]],
        responses: Mapping[tuple[str, str], str],
        context: RunContext,
        own: Mapping[str, Instance] | None = None,
        cache: AnswerCache | None = None,
        histories: Mapping[tuple[str, str], tuple[str, ...]] | None = None,
    ) -> None:
        self.instances = instances  # id -> (instruction, reference)
        self.responses = responses  # (model, instance id) -> text
        self.context = context
        # id -> the instance, for its system prompt, own rubrics, images and earlier turns
        self.own = own or {}
        self.cache = cache
        # (model, instance id) -> the model's earlier answers (a conversation's turn)
        self.histories = histories or {}

    @classmethod
    def of_inputs(
        cls, inputs: Inputs, context: RunContext, cache: AnswerCache | None = None
    ) -> Estimator:
        return cls(
            {i.id: (i.instruction, i.answer) for i in inputs.instances},
            {(r.model, r.instance_id): r.text for rs in inputs.response_sets for r in rs.responses},
            context,
            {i.id: i for i in inputs.instances if _own(i)},
            cache,
            {
                (r.model, r.instance_id): r.history
                for rs in inputs.response_sets
                for r in rs.responses
                if r.history
            },
        )

    @classmethod
    def of_run(cls, store: Store, run: RunInfo, cache: AnswerCache | None = None) -> Estimator:
        """From the texts stored with the run (for `resume` and later runs)."""
        instances, responses = store.run_texts(run.id)
        own = {i.id: i for i in store.instances(run.id).values() if _own(i)}
        context = RunContext.from_config(run.config)
        return cls(instances, responses, context, own, cache, response_histories(store, run.id))

    def texts(self, call: PlannedCall) -> CallTexts:
        """What rendering ``call`` needs of the inputs."""
        instruction, reference = self.instances[call.instance_id]
        own = self.own.get(call.instance_id)
        iid = call.instance_id
        return CallTexts(
            instruction,
            reference,
            # a row about an instance alone has no model and no response
            self.responses[(call.model, iid)] if call.model != NO_MODEL else "",
            self.responses.get((call.model_b, iid)) if call.model_b else None,
            own.system_prompt if own is not None else "",
            own.rubrics if own is not None else _NO_RUBRICS,
            own.images if own is not None else (),
            own.history if own is not None else (),
            self.histories.get((call.model, iid), ()),
            self.histories.get((call.model_b, iid), ()) if call.model_b else (),
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
    completion tokens of its answer, from ``texts``: a conversation's turn with the turns
    before it (the images are counted apart: :func:`images_tokens`).

    A generation's turn k (k >= 2) is estimated before the model's answers to the turns
    before it exist (its round, app/turns.py, is planned after them): each missing answer
    stands in as a text of the protocol's expected answer length."""
    criteria = [context.criterion(c, texts.rubrics) for c in call.criteria]
    protocol = context.protocol_for(call.judge)
    completion = protocol.completion_tokens(criteria)
    answers = texts.answers
    if context.kind == GENERATION and len(answers) < len(texts.history):
        stand_in = "x" * (4 * completion)  # estimate_tokens: about 4 characters a token
        answers = (*answers, *(stand_in,) * (len(texts.history) - len(answers)))
    subject = context.subject(
        texts.instruction,
        texts.reference,
        texts.response,
        texts.system_prompt,
        texts.response_b,
        call.model,
        Conversation(texts.history, answers, texts.answers_b),
    )
    messages, schema = context.prompt(call.judge, subject, criteria)
    return messages, schema, completion


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
        for (call, texts), (messages, _, completion), hit in zip(
            chunk, rendered, hits, strict=True
        ):
            judge = context.judges[call.judge]
            pictures = images_tokens(judge, texts.images)
            prompt = estimate_tokens(messages) + pictures
            # at the price the call will be paid: a batch judge's through its batch API
            # (what --max-cost reserves when it dispatches the call)
            cost = 0.0 if hit else judge.cost(prompt, completion, batch=judge.batch)
            yield CallEstimate(call, prompt, completion, hit, cost, messages, pictures)


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
        est.image_tokens += one.image_tokens
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


def _own(i: Instance) -> bool:
    """Whether rendering a call of ``i`` needs more of it than its texts."""
    return bool(i.rubrics or i.system_prompt or i.images or i.history)


def images_tokens(judge: JudgeConfig, images: Sequence[ImageRef]) -> int:
    """The prompt tokens ``images`` cost a call of ``judge``, by its provider's rule
    (``core.image_tokens``: OpenAI's at the default detail, auto)."""
    if not images:
        return 0
    provider, _, model = judge.spec.partition("@")[0].partition("/")
    return sum(image_tokens(provider, model, i.width, i.height) for i in images)


def thinking(judge: JudgeConfig) -> int:
    """The completion budget of a reasoning judge's calls, 0 for another judge."""
    model = model_info(judge.spec.partition("@")[0])
    return model.budget(judge.max_tokens) if model.reasoning else 0


def note_short_prefix(est: Estimate, group: PrefixGroup) -> None:
    """Remember on ``est`` a prefix ``group``'s calls share that the model won't cache."""
    if group.short_prefix > est.short_prefix:
        est.short_prefix, est.cache_minimum = group.short_prefix, group.minimum
