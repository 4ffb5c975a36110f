"""Plain records the store returns and takes (no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.errors import Status


@dataclass(frozen=True)
class RunInfo:
    id: int
    name: str
    fingerprint: str
    mode: str
    config: dict[str, Any]


@dataclass(frozen=True)
class JobContext:
    """What a worker needs to judge one ledger row, as the ledger says it."""

    id: int
    run_id: int
    model: str
    model_b: str
    instance_id: str
    criterion: str
    judge: str
    instruction: str
    reference: str
    response: str

    @property
    def subject_key(self) -> tuple[int, str, str, str, str]:
        """What the rows of one judge call must share: run, models, instance and judge."""
        return (self.run_id, self.model, self.model_b, self.instance_id, self.judge)


@dataclass(frozen=True)
class CallRecord:
    """A paid judge answer: what the provider returned for one request, kept for good.

    ``uid`` identifies this answer (a replayed write stores it once); ``cache_key``
    identifies the prompt, judge and sampling parameters it answered.
    """

    uid: str
    cache_key: str
    run_id: int
    judge: str
    raw: str
    parsed: bool
    finish: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_ms: float = 0.0


@dataclass(frozen=True)
class Outcome:
    """The end of one ledger row: done (score None = N/A) or failed with a reason.

    ``asks`` and ``requests`` are added to the row's counters: answers asked of the
    judge for it, and HTTP requests sent for it (retries included).
    """

    id: int
    status: Status
    score: int | None = None
    rationale: str | None = None
    reason: str | None = None
    detail: str | None = None
    call_uid: str | None = None
    asks: int = 0
    requests: int = 0


@dataclass(frozen=True)
class OpenRow:
    """A ledger row still to judge (pending, or running on an expired lease)."""

    id: int
    model: str
    model_b: str
    instance_id: str
    criterion: str
    judge: str


@dataclass
class PlannedCall:
    """One judge call still to make: its ledger rows and what they are about."""

    ids: list[int]
    model: str
    instance_id: str
    judge: str
    criteria: list[str] = field(default_factory=list)
    model_b: str = ""


@dataclass(frozen=True)
class Halt:
    """A judge of a run halted after its first calls all failed alike."""

    judge: str
    reason: str
    detail: str
