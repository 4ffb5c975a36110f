"""What one judge call is, while a worker runs it (data, no I/O): the rows it covers,
its rendered messages and what it has paid for, the answer it got, and the outcomes a
reading or an error gives its rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from flask_eval.core.errors import JudgeError, Status
from flask_eval.core.redact import redact
from flask_eval.core.types import JudgeConfig
from flask_eval.rubrics.grading import Criterion, Protocol
from flask_eval.rubrics.parse import Reading
from flask_eval.rubrics.prompt import Message
from flask_eval.storage.records import CallRecord, JobContext, Outcome
from flask_eval.workers.judge import GenerateConfig, Judge, JudgeOutput
from flask_eval.workers.leases import NotSent
from flask_eval.workers.usage import Request, checked_usage

#: how much of an error body or refusal a failed judgment keeps in its detail
DETAIL_LIMIT = 2000


def subject_texts(row: JobContext) -> tuple[str, ...]:
    """The texts a call judges (instruction, reference, responses, system prompt): what
    of its prompt is not the protocol's own words (``rubrics.echo``)."""
    return (row.instruction, row.reference, row.response, row.response_b, row.system_prompt)


@dataclass
class BatchSummary:
    done: int = 0
    failed: int = 0
    skipped: int = 0  # already done, owned by another live delivery, or of another run
    refused: int = 0  # rows whose message grouped them wrongly: given back unjudged
    calls: int = 0  # provider requests made (cache hits excluded)
    cache_hits: int = 0
    #: rows skipped because another delivery holds them under a live lease, and the seconds
    #: until the last of those leases runs out (the transport may look again then)
    leased: list[int] = field(default_factory=list)
    lease_wait: float = 0.0


@dataclass
class Call:
    """One judge call, ready to send: rows of one subject, judged by one judge."""

    rows: list[JobContext]
    config: JudgeConfig
    judge: Judge
    protocol: Protocol
    criteria: list[Criterion]
    messages: list[Message]
    generate: GenerateConfig
    key: str
    paid: list[CallRecord] = field(default_factory=list)
    begun: bool = False  # a first request was sent: later ones are urgent
    #: its first answer, already paid (a provider batch's): read instead of asking
    prepaid: Answer | None = None
    asks: dict[int, int] = field(default_factory=dict)  # row id -> answers asked
    requests: dict[int, int] = field(default_factory=dict)  # row id -> HTTP requests

    def count(self, rows: Sequence[JobContext], requests: int) -> None:
        for r in rows:
            self.asks[r.id] = self.asks.get(r.id, 0) + 1
            self.requests[r.id] = self.requests.get(r.id, 0) + requests


@dataclass(frozen=True)
class Answer:
    text: str
    finish: str
    uid: str
    output: JudgeOutput | None  # None: replayed from the cache
    latency_ms: float = 0.0
    key: str = ""  # the prompt's cache key
    batch: bool = False  # answered in a provider batch: costed at the batch price
    #: the request it answers, where not the call's own (a re-ask, a larger budget)
    messages: Sequence[Message] = ()
    max_tokens: int = 0


def paid_record(
    call: Call, answer: Answer, output: JudgeOutput, parsed: bool, batch: bool = False
) -> CallRecord:
    """The call row of a paid answer, metered at the judge's price: its cached and
    cache-written prompt tokens at the cache prices, and at the batch multiplier when it
    came through the provider's batch API (``batch``). Its usage is checked first
    (``workers.usage``): usage no request of ours can have is stored and costed at a
    safe estimate, with a note."""
    request = Request(
        answer.messages or call.messages,
        answer.max_tokens or call.generate.max_tokens,
        call.protocol.completion_tokens(call.criteria),
        call.generate.schema,
        call.config.spec.partition("/")[0],
    )
    keys = CallKeys(call.rows[0].run_id, answer.uid, answer.key)
    return answer_record(call.config, keys, output, parsed, request, batch, answer.latency_ms)


@dataclass(frozen=True)
class CallKeys:
    """What a call row is of: its run, the answer's ``uid`` and the prompt's cache key."""

    run_id: int
    uid: str
    key: str


def answer_record(
    config: JudgeConfig,
    keys: CallKeys,
    output: JudgeOutput,
    parsed: bool,
    request: Request,
    batch: bool = False,
    latency_ms: float = 0.0,
) -> CallRecord:
    """:func:`paid_record` of an answer known by its judge and run only (a duplicate
    batch result: workers/batch_lane.py), its usage checked against ``request``."""
    usage = checked_usage(output, request)
    return CallRecord(
        uid=keys.uid,
        cache_key=keys.key,
        run_id=keys.run_id,
        judge=config.name,
        raw=output.text,
        parsed=parsed,
        finish=output.finish,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cost=config.cost(
            usage.prompt_tokens,
            usage.completion_tokens,
            cached_tokens=usage.cached_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            batch=batch,
        ),
        latency_ms=latency_ms,
        cached_tokens=usage.cached_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        batch=batch,
        usage_note=usage.note,
    )


class Failure(JudgeError):
    """A failure that comes with an answer that was paid for (kept as the raw output)."""

    def __init__(self, reason: str, detail: str, uid: str) -> None:
        super().__init__(reason, detail)
        self.uid = uid


def done(rows: dict[str, JobContext], reading: Reading, uid: str) -> list[Outcome]:
    return [
        Outcome(
            rows[name].id,
            Status.DONE,
            score=score,
            rationale=reading.rationales.get(name),
            call_uid=uid,
            value=reading.values.get(name),
        )
        for name, score in reading.scores.items()
    ]


def failed(
    rows: Sequence[JobContext], err: JudgeError, call_uid: str | None = None
) -> list[Outcome]:
    if isinstance(err, NotSent):  # not this worker's to end (workers/leases.py)
        return []
    detail = err.detail
    if err.raw:  # an error body: kept with the reason (no paid answer holds it)
        detail += f" | body: {err.raw}"
    detail = redact(detail)[:DETAIL_LIMIT]
    uid = err.uid if isinstance(err, Failure) else call_uid
    return [
        Outcome(c.id, Status.FAILED, reason=str(err.reason), detail=detail, call_uid=uid)
        for c in rows
    ]
