"""SQLModel tables: runs, their inputs, the judgment ledger and every paid judge call.

Schema version 14 adds conversations and images: an instance's ``turn``,
``conversation``, ``history`` (the user's earlier turns) and ``images`` (digests), a
response's ``history`` (the model's earlier answers), and the table ``image`` (each image
of a run once, by SHA-256, with its bytes).
Schema version 13 adds people's ratings (``rating_item``, ``rater``, ``rater_session``).
Schema version 6 (``storage/migrations``; version 5 added the provider batches:
``batch``, ``batch_call``, ``lane_lease``; version 6 ``judgment.value``, what a generation or
an annotation read): the ledger names what is judged generically
(a ``criterion``, and ``model_b`` for the second response of a pairwise comparison, ``''``
for absolute grading), and every answer a provider returned is its own ``call`` row,
never overwritten; a judgment points at the answer it was read from (``call_uid``).
An instance keeps what the model under test was told (``system_prompt``), its own rubrics
(``rubrics``, JSON: criterion -> ``InstanceRubric.to_data()``) and the groups a report
breaks it down by (``capability``, ``task``; NULL when the instance has none).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import cast

from sqlalchemy import Column, Index, LargeBinary, Table, Text, UniqueConstraint, text
from sqlmodel import Field, SQLModel

from flask_eval.core.errors import Status
from flask_eval.core.limits import (
    MAX_CRITERION_NAME,
    MAX_DOMAIN,
    MAX_INSTANCE_ID,
    MAX_JUDGE_NAME,
    MAX_MODEL_NAME,
    MAX_RUN_NAME,
)

#: the judgments answered from the answer cache (``ix_judgment_replayed``'s rows)
REPLAYED = "requests = 0 AND call_uid IS NOT NULL"
#: the calls whose usage was not trusted (``ix_call_untrusted``'s rows)
UNTRUSTED = "usage_note IS NOT NULL"


def utcnow() -> datetime:
    return datetime.now(UTC)


class Run(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, index=True, max_length=MAX_RUN_NAME)
    fingerprint: str = Field(max_length=64)
    mode: str = Field(max_length=16)  # "instance" or "skill"
    config: str = Field(default="{}", sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


class InstanceRow(SQLModel, table=True):
    __tablename__ = "instance"
    run_id: int = Field(foreign_key="run.id", primary_key=True)
    instance_id: str = Field(primary_key=True, max_length=MAX_INSTANCE_ID)
    instruction: str = Field(sa_column=Column(Text, nullable=False))
    answer: str = Field(sa_column=Column(Text, nullable=False))
    skills: str = Field(sa_column=Column(Text, nullable=False))  # JSON list
    difficulty: int | None = None
    system_prompt: str = Field(
        default="", sa_column=Column(Text, nullable=False, server_default="")
    )
    #: JSON object: criterion name -> ``InstanceRubric.to_data()`` (``{}``: none)
    rubrics: str = Field(default="{}", sa_column=Column(Text, nullable=False, server_default="{}"))
    capability: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    task: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    #: version 14: the turn of a conversation (NULL: a one-shot instruction), the
    #: conversation's id, the user's earlier turns (JSON list of ``Turn.to_data()``) and
    #: the instruction's images (JSON list of ``ImageRef.to_data()``)
    turn: int | None = None
    conversation: str | None = Field(default=None, max_length=MAX_INSTANCE_ID)
    history: str = Field(default="[]", sa_column=Column(Text, nullable=False, server_default="[]"))
    images: str = Field(default="[]", sa_column=Column(Text, nullable=False, server_default="[]"))


class InstanceDomain(SQLModel, table=True):
    __tablename__ = "instance_domain"
    run_id: int = Field(foreign_key="run.id", primary_key=True)
    instance_id: str = Field(primary_key=True, max_length=MAX_INSTANCE_ID)
    domain: str = Field(primary_key=True, max_length=MAX_DOMAIN)


class ResponseRow(SQLModel, table=True):
    __tablename__ = "response"
    run_id: int = Field(foreign_key="run.id", primary_key=True)
    model: str = Field(primary_key=True, max_length=MAX_MODEL_NAME)
    instance_id: str = Field(primary_key=True, max_length=MAX_INSTANCE_ID)
    text: str = Field(sa_column=Column(Text, nullable=False))
    #: version 14: the model's answers to a conversation's earlier turns (JSON list)
    history: str = Field(default="[]", sa_column=Column(Text, nullable=False, server_default="[]"))


class Call(SQLModel, table=True):
    """One answer a judge provider returned and billed, kept for good.

    ``uid`` makes a replayed write idempotent; ``cache_key`` identifies the rendered
    prompt, judge and sampling parameters (several calls may share it: a re-asked
    prompt, or two workers racing). ``parsed`` says whether the answer was read (wholly or
    in part), so the answer cache may replay it; ``finish`` is why the provider stopped
    (``stop``, ``length``, ``refusal``).
    """

    __table_args__ = (
        Index("ix_call_run_created", "run_id", "created_at"),  # version 9
        # the calls whose usage was not trusted (version 11)
        Index(
            "ix_call_untrusted",
            "run_id",
            postgresql_where=text(UNTRUSTED),
            sqlite_where=text(UNTRUSTED),
        ),
    )
    id: int | None = Field(default=None, primary_key=True)
    uid: str = Field(unique=True, max_length=64)
    cache_key: str = Field(index=True, max_length=64)
    #: the run that paid for it (None once that run was deleted and others use the answer)
    run_id: int | None = Field(default=None, foreign_key="run.id", index=True)
    judge: str = Field(max_length=MAX_JUDGE_NAME)
    raw: str = Field(sa_column=Column(Text, nullable=False))
    parsed: bool = False
    finish: str = Field(default="stop", max_length=16)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0  # USD, from the judge's configured price
    latency_ms: float = 0.0
    created_at: datetime = Field(default_factory=utcnow)
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    batch: bool = False
    #: why the provider's usage was not trusted, with the usage as given (version 11)
    usage_note: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class Judgment(SQLModel, table=True):
    """The ledger: one row per planned (run, model, model_b, instance, criterion, judge)."""

    __table_args__ = (
        UniqueConstraint(
            "run_id", "model", "model_b", "instance_id", "criterion", "judge", name="uq_judgment"
        ),
        Index("ix_judgment_run_status", "run_id", "status"),
        # the viewer's pages of a cell (model x judge), in id order (docs/design/viewer.md)
        Index("ix_judgment_cell", "run_id", "model", "judge", "id"),
        # the live view's "finished in the last minute" (version 9)
        Index("ix_judgment_run_updated", "run_id", "updated_at"),
        # the judgments answered from the answer cache (version 9)
        Index(
            "ix_judgment_replayed",
            "run_id",
            "call_uid",
            postgresql_where=text(REPLAYED),
            sqlite_where=text(REPLAYED),
        ),
    )
    id: int | None = Field(default=None, primary_key=True)
    #: no foreign key (schema version 10): one per ledger row cost PostgreSQL a query
    #: per inserted row; the ledger is written with its run and deleted before it
    run_id: int
    model: str = Field(max_length=MAX_MODEL_NAME)
    #: the second response's model in a pairwise comparison; '' for absolute grading
    model_b: str = Field(default="", max_length=MAX_MODEL_NAME)
    instance_id: str = Field(max_length=MAX_INSTANCE_ID)
    criterion: str = Field(max_length=MAX_CRITERION_NAME)
    judge: str = Field(max_length=MAX_JUDGE_NAME)
    status: str = Field(default=Status.PENDING, max_length=16)
    score: int | None = None  # None with status done means N/A
    rationale: str | None = Field(default=None, sa_column=Column(Text))
    reason: str | None = Field(default=None, max_length=32)
    detail: str | None = Field(default=None, sa_column=Column(Text))
    call_uid: str | None = Field(default=None, max_length=64)  # the answer: call.uid
    #: what a kind of work other than judgment read (a response, labels as JSON); NULL
    #: for a judgment (docs/design/job-kinds.md)
    value: str | None = Field(default=None, sa_column=Column(Text))
    claims: int = 0  # times a worker took the row
    asks: int = 0  # answers asked of the judge for it (a format reminder is a second)
    requests: int = 0  # HTTP requests sent for it (retries included; 0: from the cache)
    lease_until: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class JudgeHalt(SQLModel, table=True):
    """A judge of a run stopped after its first calls all failed for the same reason."""

    __tablename__ = "judge_halt"
    run_id: int = Field(foreign_key="run.id", primary_key=True)
    judge: str = Field(primary_key=True, max_length=MAX_JUDGE_NAME)
    reason: str = Field(max_length=32)
    detail: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


class WorkerBeat(SQLModel, table=True):
    """A worker process announcing itself: the producer reads these to tell "no worker"
    from "workers that use another database"."""

    __tablename__ = "worker"
    name: str = Field(primary_key=True, max_length=200)
    queue: str = Field(max_length=200)
    started_at: datetime = Field(default_factory=utcnow)
    seen_at: datetime = Field(default_factory=utcnow)
    #: where it runs, and what it said at its last beat (the live view reads them)
    host: str = Field(default="", max_length=200, sa_column_kwargs={"server_default": ""})
    pid: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    in_flight: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    calls: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    metrics_url: str | None = Field(default=None, max_length=300)


class DeletedRun(SQLModel, table=True):
    """A tombstone: messages still queued for a deleted run are dropped, not retried."""

    __tablename__ = "deleted_run"
    run_id: int = Field(primary_key=True)
    name: str = Field(max_length=MAX_RUN_NAME)
    deleted_at: datetime = Field(default_factory=utcnow)


class BatchRow(SQLModel, table=True):
    """A provider batch of one judge of a run (docs/design/batches.md).

    Written (state ``created``, with our ``uid``: the tag the provider keeps) *before* it
    is submitted, so that a batch the provider accepted but whose id was never recorded
    is found again by its tag instead of being submitted twice. ``state``: ``created`` ->
    ``submitted`` (``provider_id`` recorded) -> ``collected`` (every result written), or
    ``failed`` (the provider refused or lost it: its calls were planned again).
    """

    __tablename__ = "batch"
    id: int | None = Field(default=None, primary_key=True)
    uid: str = Field(unique=True, max_length=64)
    run_id: int = Field(foreign_key="run.id", index=True)
    judge: str = Field(max_length=MAX_JUDGE_NAME)
    provider: str = Field(max_length=32)
    provider_id: str | None = Field(default=None, max_length=200)
    state: str = Field(default="created", max_length=16, index=True)
    #: the provider's own word for its state (``in_progress``, ``ended``, ...)
    provider_state: str = Field(default="", max_length=40)
    size: int = 0  # requests in it
    succeeded: int = 0
    failed: int = 0
    expires_at: datetime | None = None
    #: JSON object of provider file ids (OpenAI: input, output, error)
    files: str = Field(default="{}", sa_column=Column(Text, nullable=False, server_default="{}"))
    detail: str | None = Field(default=None, sa_column=Column(Text))
    created_at: datetime = Field(default_factory=utcnow)
    submitted_at: datetime | None = None
    ended_at: datetime | None = None


class BatchCall(SQLModel, table=True):
    """One judge call of a batch judge, from the moment it is parked to its collection.

    ``uid`` is the request's ``custom_id`` (and the uid of the paid answer it becomes, so a
    collection replayed after a crash writes it once). ``rows``: JSON list of the judgment
    ids it covers (they stay ``running`` under a long lease while the call is open);
    ``request``: JSON of its rendered messages and sampling settings. ``state``:
    ``planned`` (waiting for a batch) -> ``submitted`` (in batch ``batch_uid``) ->
    ``collected``, or back to ``planned`` after its batch failed or expired (``tries``
    counts that), or ``failed`` for good.
    """

    __tablename__ = "batch_call"
    __table_args__ = (Index("ix_batch_call_open", "state", "run_id", "judge"),)
    id: int | None = Field(default=None, primary_key=True)
    uid: str = Field(unique=True, max_length=64)
    run_id: int = Field(foreign_key="run.id")
    judge: str = Field(max_length=MAX_JUDGE_NAME)
    state: str = Field(default="planned", max_length=16)
    batch_uid: str | None = Field(default=None, max_length=64, index=True)
    rows: str = Field(sa_column=Column(Text, nullable=False))
    cache_key: str = Field(max_length=64)
    request: str = Field(sa_column=Column(Text, nullable=False))
    tokens: int = 0  # estimated prompt tokens (the batch-queue token limit)
    tries: int = 0  # batches it was in that failed or expired before answering it
    detail: str | None = Field(default=None, sa_column=Column(Text))
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class LaneLease(SQLModel, table=True):
    """Who runs a periodic duty (the batch lane's sweep) until when: one worker at a time,
    any worker once the holder's lease has run out."""

    __tablename__ = "lane_lease"
    name: str = Field(primary_key=True, max_length=64)
    holder: str = Field(max_length=200)
    until: datetime = Field(default_factory=utcnow)


class ReportSnapshot(SQLModel, table=True):
    """A read side's cached view of a run (the viewer's run page), valid while the
    ledger's fingerprint ``token`` is unchanged (docs/design/viewer.md; version 8).

    ``run_id`` is no foreign key: a deleted run's snapshot stays unread (its token names
    the run's creation time, which a new run reusing the id does not share)."""

    __tablename__ = "report_snapshot"
    run_id: int = Field(primary_key=True)
    name: str = Field(primary_key=True, max_length=32)  # whose view: "viewer"
    token: str = Field(max_length=64)
    body: str = Field(sa_column=Column(Text, nullable=False))  # JSON, gzip+base64
    created_at: datetime = Field(default_factory=utcnow)


class JudgmentTally(SQLModel, table=True):
    """PostgreSQL: a run's judgments counted per (judge, status, reason), kept by triggers
    (``storage.tally``; version 9). ``reason`` is ``''`` for none."""

    __tablename__ = "judgment_tally"
    run_id: int = Field(primary_key=True)
    judge: str = Field(primary_key=True, max_length=MAX_JUDGE_NAME)
    status: str = Field(primary_key=True, max_length=16)
    reason: str = Field(primary_key=True, max_length=32)
    n: int = 0


class CallTally(SQLModel, table=True):
    """PostgreSQL: a run's paid calls per judge, summed, kept by triggers (version 9)."""

    __tablename__ = "call_tally"
    run_id: int = Field(primary_key=True)
    judge: str = Field(primary_key=True, max_length=MAX_JUDGE_NAME)
    calls: int = 0
    batch_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float = 0.0


#: the states of a rating item (``rating_item.state``)
ITEM_OPEN, ITEM_DONE, ITEM_FLAGGED = "open", "done", "flagged"
#: the longest rater name (``core.people.RATER_PATTERN``), a session's public id, a sha256
MAX_RATER_NAME, MAX_HOLDER, HASH_HEX = 40, 100, 64


class RatingItem(SQLModel, table=True):
    """One page a rater rates (version 13): the (run, rater, model, model_b, instance)
    whose ledger rows (one per criterion, judge ``human/RATER``) one submit answers.

    ``id`` is the only thing a URL names; ``rank`` orders the rater's queue (lower
    first); ``holder`` and ``lease_until`` say who was served it until when (advice: a
    submit is taken whoever holds it). ``run_id`` is no foreign key, like the ledger's."""

    __tablename__ = "rating_item"
    __table_args__ = (
        UniqueConstraint(
            "run_id", "judge", "model", "model_b", "instance_id", name="uq_rating_item"
        ),
        # a rater's next item: the open ones in queue order (the id breaks ties)
        Index("ix_rating_item_next", "judge", "state", "rank", "id"),
        # ... of one run, and a rater's counts in a run (progress)
        Index("ix_rating_item_run_next", "judge", "run_id", "state", "rank", "id"),
        Index("ix_rating_item_holder", "holder"),
    )
    id: int | None = Field(default=None, primary_key=True)
    run_id: int
    judge: str = Field(max_length=MAX_JUDGE_NAME)
    model: str = Field(max_length=MAX_MODEL_NAME)
    model_b: str = Field(default="", max_length=MAX_MODEL_NAME)
    instance_id: str = Field(max_length=MAX_INSTANCE_ID)
    #: show model_b's response first (pairwise)
    swapped: bool = False
    rank: float = 0.0
    state: str = Field(default=ITEM_OPEN, max_length=16)
    holder: str | None = Field(default=None, max_length=MAX_HOLDER)
    lease_until: datetime | None = None
    served_at: datetime | None = None
    skips: int = 0
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class Rater(SQLModel, table=True):
    """A person who rates (version 13): the sha256 of their token, the run it is for
    (None: any), whether they may read the read-only pages, and when it was revoked."""

    __tablename__ = "rater"
    name: str = Field(primary_key=True, max_length=MAX_RATER_NAME)
    token_hash: str = Field(index=True, max_length=HASH_HEX)
    run_id: int | None = None
    may_view: bool = False
    created_at: datetime = Field(default_factory=utcnow)
    revoked_at: datetime | None = None


class RaterSession(SQLModel, table=True):
    """A rater signed in (version 13): the sha256 of the session cookie's value, the
    form token of the session and when it ends."""

    __tablename__ = "rater_session"
    id_hash: str = Field(primary_key=True, max_length=HASH_HEX)
    rater: str = Field(index=True, max_length=MAX_RATER_NAME)
    csrf: str = Field(max_length=200)
    created_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime = Field(default_factory=utcnow)


class ImageRow(SQLModel, table=True):
    """An image of a run (version 14), once per SHA-256 of its bytes: its checked media
    type, its size in pixels and bytes, and the bytes."""

    __tablename__ = "image"
    run_id: int = Field(primary_key=True)
    sha256: str = Field(primary_key=True, max_length=HASH_HEX)
    media_type: str = Field(max_length=32)
    width: int
    height: int
    size: int
    data: bytes = Field(sa_column=Column(LargeBinary, nullable=False))


def _table(model: type[SQLModel]) -> Table:
    return cast(Table, model.__table__)  # type: ignore[attr-defined]


#: Core tables, for typed SQL expressions (``JUDGMENT.c.status == ...``).
RUN = _table(Run)
INSTANCE = _table(InstanceRow)
INSTANCE_DOMAIN = _table(InstanceDomain)
RESPONSE = _table(ResponseRow)
IMAGE = _table(ImageRow)
CALL = _table(Call)
JUDGMENT = _table(Judgment)
JUDGE_HALT = _table(JudgeHalt)
WORKER = _table(WorkerBeat)
DELETED_RUN = _table(DeletedRun)
BATCH = _table(BatchRow)
BATCH_CALL = _table(BatchCall)
LANE_LEASE = _table(LaneLease)
REPORT_SNAPSHOT = _table(ReportSnapshot)
JUDGMENT_TALLY = _table(JudgmentTally)
CALL_TALLY = _table(CallTally)
RATING_ITEM = _table(RatingItem)
RATER = _table(Rater)
RATER_SESSION = _table(RaterSession)
