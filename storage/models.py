"""SQLModel tables: runs, their inputs, the judgment ledger and the paid judge calls."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import cast

from sqlalchemy import Column, Index, Table, Text, UniqueConstraint
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    return datetime.now(UTC)


class Status(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class FailureReason(StrEnum):
    """Why a judgment failed; a fixed set so `status` can count by reason."""

    PROVIDER_ERROR = "provider_error"  # 5xx, connection errors, after retries
    RATE_LIMITED = "rate_limited"  # 429s until the retry budget ran out
    TIMEOUT = "timeout"  # no answer before the client gave up
    UNPARSEABLE = "unparseable"  # an answer without scores in our format, twice
    REFUSED = "refused"  # the provider refused the request (content filter, 400)
    AUTH = "auth"  # bad or missing credentials; a configuration problem
    INTERNAL = "internal"  # a bug or an unexpected exception in flask-eval


class Run(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, index=True, max_length=200)
    fingerprint: str = Field(max_length=64)
    mode: str = Field(max_length=16)  # "instance" or "skill"
    config: str = Field(default="{}", sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


class InstanceRow(SQLModel, table=True):
    __tablename__ = "instance"
    run_id: int = Field(foreign_key="run.id", primary_key=True)
    instance_id: str = Field(primary_key=True, max_length=200)
    instruction: str = Field(sa_column=Column(Text, nullable=False))
    answer: str = Field(sa_column=Column(Text, nullable=False))
    skills: str = Field(sa_column=Column(Text, nullable=False))  # JSON list
    difficulty: int | None = None


class InstanceDomain(SQLModel, table=True):
    __tablename__ = "instance_domain"
    run_id: int = Field(foreign_key="run.id", primary_key=True)
    instance_id: str = Field(primary_key=True, max_length=200)
    domain: str = Field(primary_key=True, max_length=100)


class ResponseRow(SQLModel, table=True):
    __tablename__ = "response"
    run_id: int = Field(foreign_key="run.id", primary_key=True)
    model: str = Field(primary_key=True, max_length=100)
    instance_id: str = Field(primary_key=True, max_length=200)
    text: str = Field(sa_column=Column(Text, nullable=False))


class Call(SQLModel, table=True):
    """One answer a judge provider returned (and billed). ``cache_key`` identifies the
    rendered prompt, judge model and sampling parameters, so an answer is paid once."""

    id: int | None = Field(default=None, primary_key=True)
    cache_key: str = Field(unique=True, max_length=64)
    run_id: int = Field(foreign_key="run.id", index=True)
    judge: str = Field(max_length=300)
    raw: str = Field(sa_column=Column(Text, nullable=False))
    parsed: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0  # USD, from the judge's configured price
    latency_ms: float = 0.0
    created_at: datetime = Field(default_factory=utcnow)


class Judgment(SQLModel, table=True):
    """The ledger: one row per planned (run, model, instance, skill, judge)."""

    __table_args__ = (
        UniqueConstraint("run_id", "model", "instance_id", "skill", "judge", name="uq_judgment"),
        Index("ix_judgment_run_status", "run_id", "status"),
    )
    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="run.id")
    model: str = Field(max_length=100)
    instance_id: str = Field(max_length=200)
    skill: str = Field(max_length=100)
    judge: str = Field(max_length=300)
    status: str = Field(default=Status.PENDING, max_length=16)
    score: int | None = None  # None with status done means N/A
    rationale: str | None = Field(default=None, sa_column=Column(Text))
    reason: str | None = Field(default=None, max_length=32)
    detail: str | None = Field(default=None, sa_column=Column(Text))
    call_key: str | None = Field(default=None, max_length=64)  # the answer: call.cache_key
    attempts: int = 0
    lease_until: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


def _table(model: type[SQLModel]) -> Table:
    return cast(Table, model.__table__)  # type: ignore[attr-defined]


#: Core tables, for typed SQL expressions (``JUDGMENT.c.status == ...``).
RUN = _table(Run)
INSTANCE = _table(InstanceRow)
INSTANCE_DOMAIN = _table(InstanceDomain)
RESPONSE = _table(ResponseRow)
CALL = _table(Call)
JUDGMENT = _table(Judgment)
