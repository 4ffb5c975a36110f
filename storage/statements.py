"""The worker's hot SQL statements, built once: only their parameters change per batch."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, bindparam, or_, select, update
from sqlalchemy.dialects import sqlite
from sqlalchemy.sql.elements import ColumnElement

from storage.models import CALL, INSTANCE, JUDGMENT, RESPONSE, Status

J, C, INS, R = JUDGMENT.c, CALL.c, INSTANCE.c, RESPONSE.c


def claimable(now: Any) -> ColumnElement[bool]:
    """A judgment still to judge: pending, or running on a lease expired before ``now``."""
    return or_(
        J.status == Status.PENDING.value,
        and_(J.status == Status.RUNNING.value, J.lease_until < now),
    )


CLAIM = (
    update(JUDGMENT)
    .where(
        J.id.in_(bindparam("ids", expanding=True)),
        claimable(bindparam("now")),
    )
    .values(
        status=Status.RUNNING.value,
        attempts=J.attempts + 1,
        lease_until=bindparam("until"),
        updated_at=bindparam("now"),
    )
    .returning(J.id)
)
EXTEND = (
    update(JUDGMENT)
    .where(J.id.in_(bindparam("ids", expanding=True)), J.status == Status.RUNNING.value)
    .values(lease_until=bindparam("until"))
)
CONTEXTS = (
    select(
        J.id,
        J.run_id,
        J.model,
        J.instance_id,
        J.skill,
        J.judge,
        INS.instruction,
        INS.answer,
        R.text,
    )
    .join(INSTANCE, and_(INS.run_id == J.run_id, INS.instance_id == J.instance_id))
    .join(RESPONSE, and_(R.run_id == J.run_id, R.model == J.model, R.instance_id == J.instance_id))
    .where(J.id.in_(bindparam("ids", expanding=True)))
    .order_by(J.id)
)
CACHED = select(
    C.cache_key, C.run_id, C.judge, C.raw, C.parsed,
    C.prompt_tokens, C.completion_tokens, C.cost, C.latency_ms,
).where(C.cache_key.in_(bindparam("keys", expanding=True)), C.parsed.is_(True))  # fmt: skip


def _sqlite_upsert_call() -> Any:
    ins = sqlite.insert(CALL)
    fields = (
        "raw",
        "parsed",
        "prompt_tokens",
        "completion_tokens",
        "latency_ms",
        "cost",
        "run_id",
        "judge",
    )
    return ins.on_conflict_do_update(
        index_elements=["cache_key"],
        set_={k: ins.excluded[k] for k in fields},
        where=C.parsed.is_(False),
    )


#: SQLite's write path, one statement per item (PostgreSQL's is storage/bulk.py):
#: store a paid answer once per cache key, a parsed answer replacing an unparsed one ...
SQLITE_UPSERT_CALL = _sqlite_upsert_call()
#: ... and end a judgment, never one already done
FINISH = (
    update(JUDGMENT)
    .where(J.id == bindparam("o_id"), J.status != Status.DONE.value)
    .values(
        status=bindparam("o_status"),
        score=bindparam("o_score"),
        rationale=bindparam("o_rationale"),
        reason=bindparam("o_reason"),
        detail=bindparam("o_detail"),
        call_key=bindparam("o_call_key"),
        lease_until=None,
        updated_at=bindparam("o_now"),
    )
)
