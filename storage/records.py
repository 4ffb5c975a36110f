"""Plain records the store returns and takes (no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from storage.models import Status


@dataclass(frozen=True)
class RunInfo:
    id: int
    name: str
    fingerprint: str
    mode: str
    config: dict[str, Any]


@dataclass(frozen=True)
class JobContext:
    """What a worker needs to judge one ledger row."""

    id: int
    run_id: int
    model: str
    instance_id: str
    skill: str
    judge: str
    instruction: str
    reference: str
    response: str


@dataclass(frozen=True)
class CallRecord:
    """A paid judge answer: what the provider returned for one prompt."""

    cache_key: str
    run_id: int
    judge: str
    raw: str
    parsed: bool
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_ms: float = 0.0


@dataclass(frozen=True)
class Outcome:
    """The end of one ledger row: done (score None = N/A) or failed with a reason."""

    id: int
    status: Status
    score: int | None = None
    rationale: str | None = None
    reason: str | None = None
    detail: str | None = None
    call_key: str | None = None


@dataclass
class PlannedCall:
    """One judge call still to make: its ledger rows and what they are about."""

    ids: list[int]
    model: str
    instance_id: str
    judge: str
    skills: list[str] = field(default_factory=list)
