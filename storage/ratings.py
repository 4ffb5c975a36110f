"""People's ratings: the items raters are served, and their ratings written exactly once
(docs/design/humans.md). Functions taking a :class:`Store`, on SQLite and PostgreSQL.

A rater's ledger rows (judge ``human/RATER``, one per criterion) wait in status
``waiting``; a ``rating_item`` groups those of one page. :func:`next_item` serves a rater
the item they hold, or claims the open item first in their queue whose lease is none or
over: a compare-and-set in one transaction (PostgreSQL: the candidate locked ``SKIP
LOCKED``; SQLite: one writer at a time), so two holders never share an item while a lease
is live. :func:`submit` and :func:`flag` end an item in one transaction, its rows only if
they all still wait: a second submit (another tab, a replay) changes nothing and says so.
The lease is advice: a submit is taken from whoever sends it for the item's rater.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Integer, Text, case, cast, func, or_, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from flask_eval.core.errors import FailureReason, Status
from flask_eval.storage.models import (
    ITEM_DONE,
    ITEM_FLAGGED,
    ITEM_OPEN,
    JUDGMENT,
    RATING_ITEM,
    utcnow,
)
from flask_eval.storage.raters import (
    Rater,
    Session,
    add_rater,
    aware,
    create_session,
    delete_expired_sessions,
    delete_session,
    get_session,
    list_raters,
    rater_by_name,
    rater_by_token,
    revoke_rater,
)
from flask_eval.storage.rating_plan import (
    ImportedRating,
    PlannedRating,
    import_ratings,
    plan_ratings,
    rows_of,
    set_ranks,
)
from flask_eval.storage.retry import transient_retry
from flask_eval.storage.store import Store

__all__ = [
    "MAX_FLAG_REASON",
    "ImportedRating",
    "PlannedRating",
    "Progress",
    "Rater",
    "RatingItem",
    "Session",
    "add_rater",
    "create_session",
    "delete_expired_sessions",
    "delete_session",
    "flag",
    "get_item",
    "get_session",
    "import_ratings",
    "list_raters",
    "next_item",
    "plan_ratings",
    "progress",
    "rater_by_name",
    "rater_by_token",
    "release",
    "revoke_rater",
    "set_ranks",
    "submit",
]

J, RI = JUDGMENT.c, RATING_ITEM.c
#: a flag's reason is kept up to this many characters
MAX_FLAG_REASON = 500
#: claims tried before :func:`next_item` gives up on a queue that others keep taking
CLAIM_ATTEMPTS = 20


@dataclass(frozen=True)
class RatingItem:
    """A page a rater rates: its ledger rows' criteria, in planned order."""

    id: int
    run_id: int
    judge: str
    model: str
    model_b: str
    instance_id: str
    criteria: tuple[str, ...]
    swapped: bool
    state: str
    holder: str | None
    lease_until: datetime | None
    served_at: datetime | None
    skips: int


@dataclass(frozen=True)
class Progress:
    """A rater's items (of one run, or of all): rated, flagged, still open."""

    done: int
    flagged: int
    open: int


_ITEM = (
    RI.id,
    RI.run_id,
    RI.judge,
    RI.model,
    RI.model_b,
    RI.instance_id,
    RI.swapped,
    RI.state,
    RI.holder,
    RI.lease_until,
    RI.served_at,
    RI.skips,
)


def _rows(conn: Connection, row: Any) -> list[tuple[int, str]]:
    """The item's ledger rows (id, criterion) in planned order (sorted here: ``ORDER BY
    id`` in SQL would lead SQLite to read every row of the rater's cell, not the item's)."""
    rows = conn.execute(select(J.id, J.criterion).where(rows_of(row))).all()
    return sorted((int(i), str(c)) for i, c in rows)


def _criteria(conn: Connection, row: Any) -> tuple[str, ...]:
    return tuple(c for _, c in _rows(conn, row))


def _held(conn: Connection, holder: str, mine: Any, now: datetime) -> int | None:
    """The open item ``holder`` holds under a live lease, among those ``mine`` selects.
    Found by holder alone (``ix_rating_item_holder``: a holder has a few items, an item
    that ends is held by none), checked here: the queue's index would be read instead."""
    stmt = select(RI.id, RI.judge, RI.run_id, RI.state, RI.lease_until, RI.rank)
    live = [
        (float(r.rank), int(r.id))
        for r in conn.execute(stmt.where(RI.holder == holder))
        if mine(r) and r.state == ITEM_OPEN and r.lease_until and aware(r.lease_until) > now
    ]
    return min(live)[1] if live else None


def _read(conn: Connection, item_id: int) -> RatingItem | None:
    row = conn.execute(select(*_ITEM).where(RI.id == item_id)).first()
    if row is None:
        return None
    when = [None if t is None else aware(t) for t in (row.lease_until, row.served_at)]
    return RatingItem(
        id=int(row.id),
        run_id=int(row.run_id),
        judge=str(row.judge),
        model=str(row.model),
        model_b=str(row.model_b),
        instance_id=str(row.instance_id),
        criteria=_criteria(conn, row),
        swapped=bool(row.swapped),
        state=str(row.state),
        holder=row.holder,
        lease_until=when[0],
        served_at=when[1],
        skips=int(row.skips),
    )


def _free(now: datetime) -> ColumnElement[bool]:
    """An open item no lease holds: never served, given back, or its lease over."""
    return (RI.state == ITEM_OPEN) & or_(RI.lease_until.is_(None), RI.lease_until <= now)


@transient_retry
def next_item(
    store: Store, judge: str, holder: str, lease: float, run_id: int | None = None
) -> RatingItem | None:
    """The item ``holder`` holds (its lease renewed), else the open item of ``judge``
    (of ``run_id``, if given) first in the queue that no live lease holds, claimed for
    ``lease`` seconds; None when there is none."""
    mine = [RI.judge == judge] + ([] if run_id is None else [RI.run_id == run_id])

    def ours(row: Any) -> bool:
        return bool(row.judge == judge and (run_id is None or row.run_id == run_id))

    for _ in range(CLAIM_ATTEMPTS):
        now = utcnow()
        until = now + timedelta(seconds=lease)
        with store.engine.begin() as conn:
            held = _held(conn, holder, ours, now)
            if held is not None:
                conn.execute(
                    update(RATING_ITEM)
                    .where(RI.id == held, RI.holder == holder)
                    .values(lease_until=until, updated_at=now)
                )
                return _read(conn, int(held))
            pick = select(RI.id).where(_free(now), *mine).order_by(RI.rank, RI.id).limit(1)
            if store.dialect == "postgresql":
                pick = pick.with_for_update(skip_locked=True)
            chosen = conn.execute(pick).scalar()
            if chosen is None:
                return None
            won = conn.execute(  # the compare-and-set: still free
                update(RATING_ITEM)
                .where(RI.id == chosen, _free(now))
                .values(holder=holder, lease_until=until, served_at=now, updated_at=now)
            ).rowcount
            if won:
                return _read(conn, int(chosen))
    return None


@transient_retry
def get_item(store: Store, item_id: int) -> RatingItem | None:
    with store.engine.connect() as conn:
        return _read(conn, item_id)


@transient_retry
def release(store: Store, item_id: int, judge: str, holder: str) -> bool:
    """Skip: ``holder`` gives the item back, behind every open item of ``judge`` (its
    skips counted); False if ``holder`` does not hold it (or it is no longer open)."""
    now = utcnow()
    with store.engine.begin() as conn:
        last = conn.execute(
            select(func.max(RI.rank)).where(RI.judge == judge, RI.state == ITEM_OPEN)
        ).scalar()
        moved = conn.execute(
            update(RATING_ITEM)
            .where(
                RI.id == item_id,
                RI.judge == judge,
                RI.holder == holder,
                RI.state == ITEM_OPEN,
            )
            .values(
                holder=None,
                lease_until=None,
                skips=RI.skips + 1,
                rank=float(last or 0.0) + 1.0,
                updated_at=now,
            )
        ).rowcount
    return bool(moved)


class _Lost(Exception):
    """An item's rows no longer all wait: its transaction is rolled back."""


def _end(
    store: Store,
    item_id: int,
    judge: str,
    state: str,
    check: Callable[[tuple[str, ...]], None],
    values: Callable[[tuple[str, ...]], dict[str, Any]],
) -> bool:
    """End the item in ``state`` and its waiting rows with ``values(criteria)``, all in
    one transaction and only if every row still waits."""
    now = utcnow()
    try:
        with store.engine.begin() as conn:
            row = conn.execute(select(*_ITEM).where(RI.id == item_id)).first()
            if row is None:
                raise LookupError(f"no rating item {item_id}")
            if row.judge != judge:
                raise PermissionError(f"rating item {item_id} is not {judge}'s")
            rows = _rows(conn, row)
            criteria = tuple(c for _, c in rows)
            check(criteria)
            won = conn.execute(
                update(RATING_ITEM)
                .where(RI.id == item_id, RI.state == ITEM_OPEN)
                .values(state=state, holder=None, lease_until=None, updated_at=now)
            ).rowcount
            if not won:
                return False
            ended = conn.execute(
                update(JUDGMENT)
                .where(J.id.in_([i for i, _ in rows]), J.status == Status.WAITING.value)
                .values(lease_until=None, updated_at=now, **values(criteria))
            ).rowcount
            if ended != len(criteria):
                raise _Lost
    except _Lost:
        return False
    return True


@transient_retry
def submit(
    store: Store,
    item_id: int,
    judge: str,
    scores: Mapping[str, int | None],
    rationales: Mapping[str, str],
    value: str,
) -> bool:
    """Store ``judge``'s rating of the item: every criterion's score (None: N/A), the
    rationales given, ``value`` (JSON text) on each row; the item done. Exactly once:
    False, nothing changed, if the item was rated or flagged already. ValueError for a
    criterion the item does not have or one without a score; PermissionError if the item
    is not ``judge``'s; LookupError if there is no such item."""

    def check(criteria: tuple[str, ...]) -> None:
        unknown = sorted((set(scores) | set(rationales)) - set(criteria))
        if unknown:
            raise ValueError(f"rating item {item_id} has no criteria {unknown}")
        missing = [c for c in criteria if c not in scores]
        if missing:
            raise ValueError(f"no score (or N/A) given for {missing}")

    def values(criteria: tuple[str, ...]) -> dict[str, Any]:
        score = {c: scores[c] for c in criteria if scores[c] is not None}
        said = {c: rationales[c] for c in criteria if rationales.get(c) is not None}
        return {
            "status": Status.DONE.value,
            "score": cast(case(score, value=J.criterion, else_=None), Integer) if score else None,
            "rationale": cast(case(said, value=J.criterion, else_=None), Text) if said else None,
            "value": value,
            "reason": None,
            "detail": None,
        }

    return _end(store, item_id, judge, ITEM_DONE, check, values)


@transient_retry
def flag(store: Store, item_id: int, judge: str, reason: str, value: str) -> bool:
    """``judge`` cannot judge the item: its rows failed (reason ``flagged``, detail: the
    first :data:`MAX_FLAG_REASON` characters of ``reason``), the item flagged. The rules
    of :func:`submit`."""

    def values(criteria: tuple[str, ...]) -> dict[str, Any]:
        return {
            "status": Status.FAILED.value,
            "score": None,
            "rationale": None,
            "value": value,
            "reason": FailureReason.FLAGGED.value,
            "detail": reason[:MAX_FLAG_REASON],
        }

    return _end(store, item_id, judge, ITEM_FLAGGED, lambda criteria: None, values)


@transient_retry
def progress(store: Store, judge: str, run_id: int | None = None) -> Progress:
    """``judge``'s items by state (of ``run_id``, if given)."""
    stmt = select(RI.state, func.count()).where(RI.judge == judge).group_by(RI.state)
    if run_id is not None:
        stmt = stmt.where(RI.run_id == run_id)
    with store.engine.connect() as conn:
        counts = {str(s): int(n) for s, n in conn.execute(stmt)}
    return Progress(counts.get(ITEM_DONE, 0), counts.get(ITEM_FLAGGED, 0), counts.get(ITEM_OPEN, 0))
