"""The rows of the batch tables as values: the call and batch states, the parked call, the
open call and the batch as the ledger hands them out (:class:`storage.batches.BatchLedger`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from flask_eval.storage.models import BATCH, BATCH_CALL, utcnow

B, BC = BATCH.c, BATCH_CALL.c

#: call states
PLANNED, SUBMITTED, COLLECTED, FAILED = "planned", "submitted", "collected", "failed"
#: batch states (``failed`` as above)
CREATED, COLLECTED_BATCH = "created", "collected"
#: the ``finish`` of a paid call that is a provider's second answer to one batch request
#: (stored, counted in the cost, never read: :meth:`storage.batches.BatchLedger.duplicates`)
DUPLICATE = "duplicate"
OPEN_BATCH_STATES = (CREATED, SUBMITTED)


def _aware(moment: datetime | None) -> datetime | None:
    """SQLite hands timestamps back without their zone (they were stored in UTC)."""
    if moment is None:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Parked:
    """A rendered call handed to the batch lane: ``uid`` becomes its ``custom_id``."""

    uid: str
    run_id: int
    judge: str
    rows: Sequence[int]
    cache_key: str
    request: Mapping[str, Any]
    tokens: int


@dataclass(frozen=True)
class OpenCall:
    id: int
    uid: str
    run_id: int
    judge: str
    state: str
    rows: list[int]
    request: dict[str, Any]
    tokens: int
    tries: int
    created_at: datetime
    cache_key: str = ""


@dataclass(frozen=True)
class BatchInfo:
    uid: str
    run_id: int
    judge: str
    provider: str
    provider_id: str | None
    state: str
    provider_state: str
    size: int
    succeeded: int
    failed: int
    created_at: datetime
    expires_at: datetime | None


def open_call(row: Any) -> OpenCall:
    return OpenCall(
        int(row.id),
        str(row.uid),
        int(row.run_id),
        str(row.judge),
        str(row.state),
        [int(i) for i in json.loads(row.rows)],
        json.loads(row.request),
        int(row.tokens),
        int(row.tries),
        _aware(row.created_at) or utcnow(),
        str(row.cache_key),
    )


def batch_row(row: Any) -> BatchInfo:
    return BatchInfo(
        str(row.uid),
        int(row.run_id),
        str(row.judge),
        str(row.provider),
        row.provider_id,
        str(row.state),
        str(row.provider_state),
        int(row.size),
        int(row.succeeded),
        int(row.failed),
        _aware(row.created_at) or utcnow(),
        _aware(row.expires_at),
    )


CALL_COLUMNS = (
    BC.id,
    BC.uid,
    BC.run_id,
    BC.judge,
    BC.state,
    BC.rows,
    BC.request,
    BC.tokens,
    BC.tries,
    BC.created_at,
    BC.cache_key,
)
BATCH_COLUMNS = (
    B.uid,
    B.run_id,
    B.judge,
    B.provider,
    B.provider_id,
    B.state,
    B.provider_state,
    B.size,
    B.succeeded,
    B.failed,
    B.created_at,
    B.expires_at,
)
