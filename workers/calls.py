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


def paid_record(
    call: Call, answer: Answer, output: JudgeOutput, parsed: bool, batch: bool = False
) -> CallRecord:
    """The call row of a paid answer, metered at the judge's price: its cached and
    cache-written prompt tokens at the cache prices, and at the batch multiplier when it
    came through the provider's batch API (``batch``)."""
    config = call.config
    return CallRecord(
        uid=answer.uid,
        cache_key=answer.key,
        run_id=call.rows[0].run_id,
        judge=config.name,
        raw=output.text,
        parsed=parsed,
        finish=output.finish,
        prompt_tokens=output.prompt_tokens,
        completion_tokens=output.completion_tokens,
        cost=config.cost(
            output.prompt_tokens,
            output.completion_tokens,
            cached_tokens=output.cached_tokens,
            cache_write_tokens=output.cache_write_tokens,
            batch=batch,
        ),
        latency_ms=answer.latency_ms,
        cached_tokens=output.cached_tokens,
        cache_write_tokens=output.cache_write_tokens,
        batch=batch,
    )


class Failure(JudgeError):
    """A failure that comes with an answer that was paid for (kept as the raw output)."""

    def __init__(self, reason: str, detail: str, uid: str) -> None:
        super().__init__(reason, detail)
        self.uid = uid


def done(rows: dict[str, JobContext], reading: Reading, uid: str) -> list[Outcome]:
    return [
        Outcome(rows[name].id, Status.DONE, score=score, rationale=reading.rationales.get(name),
                call_uid=uid, value=reading.values.get(name))
        for name, score in reading.scores.items()
    ]  # fmt: skip


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
