"""People's rows planned, ranked, imported and recreated (``storage.ratings`` is the API
and re-exports :func:`plan_ratings`, :func:`set_ranks` and :func:`import_ratings`).

A rater's rows are ``judgment`` rows of judge ``human/RATER``, planned ``waiting``, and
one ``rating_item`` per page the rater rates (the item's criteria are its rows). Planning
inserts what is missing and leaves what exists alone, so it may be repeated; importing
ratings stores each on a row still ``waiting`` and counts the others as there already.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Integer, and_, bindparam, case, exists, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from flask_eval.core.errors import FailureReason, Status
from flask_eval.core.people import PREFIX, is_person
from flask_eval.storage.models import (
    ITEM_DONE,
    ITEM_FLAGGED,
    ITEM_OPEN,
    JUDGMENT,
    RATING_ITEM,
    RUN,
    utcnow,
)
from flask_eval.storage.predicates import person, visible
from flask_eval.storage.retry import transient_retry

if TYPE_CHECKING:
    from flask_eval.storage.leasing import WorkerLedger
    from flask_eval.storage.store import Store

J, RI = JUDGMENT.c, RATING_ITEM.c
#: PostgreSQL: new items from which a plan or an import refreshes the planner's statistics
ANALYZE_AFTER = 1_000
#: imported items settled one statement each, up to this many (else one for all)
SETTLE_ONE_BY_ONE = 200
#: items inserted per statement
ITEM_CHUNK = 1_000
#: the key of an item: (judge, model, model_b, instance_id)
Key = tuple[str, str, str, str]


@dataclass(frozen=True)
class PlannedRating:
    """A page ``judge`` (``human/RATER``) is to rate: its criteria, its place in the
    rater's queue (``rank``, lower first) and whether model_b's response shows first."""

    judge: str
    model: str
    model_b: str
    instance_id: str
    criteria: tuple[str, ...]
    rank: float
    swapped: bool


@dataclass(frozen=True)
class ImportedRating:
    """A rating made elsewhere, for one ledger row: ``value`` is its JSON text."""

    judge: str
    model: str
    model_b: str
    instance_id: str
    criterion: str
    score: int | None
    rationale: str | None
    value: str


def _person(judge: str) -> None:
    if not is_person(judge):
        raise ValueError(f"{judge!r} is not a rater's ledger name ({PREFIX}RATER)")


def plan_rows(
    store: WorkerLedger,
    conn: Connection,
    run_id: int,
    items: Sequence[PlannedRating],
    now: datetime,
) -> int:
    """Insert the waiting rows and the items of ``items`` that are missing; the number of
    items inserted. LookupError if the run does not exist (or is being deleted: its
    items would outlive it)."""
    for item in items:
        _person(item.judge)
    if conn.execute(select(RUN.c.id).where(RUN.c.id == run_id, visible())).first() is None:
        raise LookupError(f"no run {run_id} (or it is being deleted)")

    def rows() -> Iterator[dict[str, Any]]:
        for item in items:
            for criterion in dict.fromkeys(item.criteria):
                yield {
                    "run_id": run_id,
                    "model": item.model,
                    "model_b": item.model_b,
                    "instance_id": item.instance_id,
                    "criterion": criterion,
                    "judge": item.judge,
                    "status": Status.WAITING.value,
                    "claims": 0,
                    "asks": 0,
                    "requests": 0,
                    "created_at": now,
                    "updated_at": now,
                }

    store._insert_ignore(conn, JUDGMENT, rows())
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(RATING_ITEM).on_conflict_do_nothing().returning(RI.id)
    new = 0
    for start in range(0, len(items), ITEM_CHUNK):
        chunk = [
            {
                "run_id": run_id,
                "judge": i.judge,
                "model": i.model,
                "model_b": i.model_b,
                "instance_id": i.instance_id,
                "swapped": i.swapped,
                "rank": float(i.rank),
                "state": ITEM_OPEN,
                "skips": 0,
                "created_at": now,
                "updated_at": now,
            }
            for i in items[start : start + ITEM_CHUNK]
        ]
        new += len(conn.execute(stmt, chunk).all())
    return new


#: PostgreSQL: store imported ratings on the rows still waiting, in one statement
_IMPORT_PG = f"""
    UPDATE judgment AS j SET
        status = '{Status.DONE.value}', score = v.score, rationale = v.rationale,
        value = v.value, reason = NULL, detail = NULL, lease_until = NULL,
        updated_at = %(now)b
    FROM unnest(
        CAST(%(judge)b AS varchar[]), CAST(%(model)b AS varchar[]),
        CAST(%(model_b)b AS varchar[]), CAST(%(instance_id)b AS varchar[]),
        CAST(%(criterion)b AS varchar[]), CAST(%(score)b AS integer[]),
        CAST(%(rationale)b AS text[]), CAST(%(value)b AS text[])
    ) AS v(judge, model, model_b, instance_id, criterion, score, rationale, value)
    WHERE j.run_id = %(run_id)b AND j.judge = v.judge AND j.model = v.model
      AND j.model_b = v.model_b AND j.instance_id = v.instance_id
      AND j.criterion = v.criterion AND j.status = '{Status.WAITING.value}'
"""
_FIELDS = ("judge", "model", "model_b", "instance_id", "criterion", "score", "rationale", "value")


def store_imported(
    conn: Connection, run_id: int, ratings: Sequence[ImportedRating], now: datetime
) -> int:
    """Store each of ``ratings`` on its row if still waiting (their rows planned); how
    many were stored. A row rated twice in ``ratings`` takes the first."""
    first: dict[tuple[str, ...], ImportedRating] = {}
    for r in ratings:
        _person(r.judge)
        first.setdefault((r.judge, r.model, r.model_b, r.instance_id, r.criterion), r)
    chosen = list(first.values())
    if conn.dialect.name == "postgresql":
        params: dict[str, Any] = {f: [getattr(r, f) for r in chosen] for f in _FIELDS}
        params.update(run_id=run_id, now=now)
        stored = int(conn.exec_driver_sql(_IMPORT_PG, params).rowcount) if chosen else 0
    else:
        stored = 0
        for r in chosen:
            stmt = (
                update(JUDGMENT)
                .where(
                    J.run_id == run_id,
                    J.model == r.model,
                    J.model_b == r.model_b,
                    J.instance_id == r.instance_id,
                    J.criterion == r.criterion,
                    J.judge == r.judge,
                    J.status == Status.WAITING.value,
                )
                .values(
                    status=Status.DONE.value,
                    score=r.score,
                    rationale=r.rationale,
                    value=r.value,
                    reason=None,
                    detail=None,
                    lease_until=None,
                    updated_at=now,
                )
            )
            stored += int(conn.execute(stmt).rowcount)
    keys = {(r.judge, r.model, r.model_b, r.instance_id) for r in chosen}
    settle_items(conn, run_id, keys, now)
    return stored


def rows_of(item: Any) -> ColumnElement[bool]:
    """The ledger rows of the rating item ``item``: a row read, or ``RATING_ITEM.c`` (a
    correlated condition)."""
    return and_(
        J.run_id == item.run_id,
        J.model == item.model,
        J.model_b == item.model_b,
        J.instance_id == item.instance_id,
        J.judge == item.judge,
    )


def settle_items(conn: Connection, run_id: int, keys: set[Key], now: datetime) -> None:
    """Mark done (or flagged) the open items among ``keys`` none of whose rows still
    waits: item by item when they are few, else in one statement over the open items of
    their raters in the run (a statement per item costs ~1 ms on PostgreSQL)."""
    waiting = exists(select(J.id).where(rows_of(RI), J.status == Status.WAITING.value))
    flagged = exists(
        select(J.id).where(
            rows_of(RI),
            J.status == Status.FAILED.value,
            J.reason == FailureReason.FLAGGED.value,
        )
    )
    stmt = (
        update(RATING_ITEM)
        .where(RI.run_id == run_id, RI.state == ITEM_OPEN, ~waiting)
        .values(
            state=case((flagged, ITEM_FLAGGED), else_=ITEM_DONE),
            holder=None,
            lease_until=None,
            updated_at=now,
        )
    )
    if len(keys) > SETTLE_ONE_BY_ONE:
        conn.execute(stmt.where(RI.judge.in_(sorted({k[0] for k in keys}))))
        return
    for judge, model, model_b, instance_id in sorted(keys):
        conn.execute(
            stmt.where(
                RI.judge == judge,
                RI.model == model,
                RI.model_b == model_b,
                RI.instance_id == instance_id,
            )
        )


def restore_items(conn: Connection, run_id: int, now: datetime) -> int:
    """The items of the run's people's rows, made again from the ledger (a run imported
    from a bundle, which carries no item): open while a row waits, else flagged if a row
    was flagged, else done; in the ledger's order (rank 0, model_b's response second).
    Items that exist are left alone; how many were made."""
    waits = func.sum(case((J.status == Status.WAITING.value, 1), else_=0)).cast(Integer)
    flags = func.sum(case((J.reason == FailureReason.FLAGGED.value, 1), else_=0)).cast(Integer)
    people = (
        select(
            J.judge,
            J.model,
            J.model_b,
            J.instance_id,
            case((waits > 0, ITEM_OPEN), (flags > 0, ITEM_FLAGGED), else_=ITEM_DONE),
            func.min(J.id),
        )
        .where(J.run_id == run_id, person(J.judge))
        .group_by(J.judge, J.model, J.model_b, J.instance_id)
        .order_by(func.min(J.id))
    )
    have = select(RI.judge, RI.model, RI.model_b, RI.instance_id).where(RI.run_id == run_id)
    held = {tuple(r) for r in conn.execute(have)}
    rows = [
        {
            "run_id": run_id,
            "judge": judge,
            "model": model,
            "model_b": model_b,
            "instance_id": instance_id,
            "swapped": False,
            "rank": 0.0,
            "state": state,
            "skips": 0,
            "created_at": now,
            "updated_at": now,
        }
        for judge, model, model_b, instance_id, state, _ in conn.execute(people)
        if (judge, model, model_b, instance_id) not in held
    ]
    for start in range(0, len(rows), ITEM_CHUNK):
        conn.execute(insert(RATING_ITEM), rows[start : start + ITEM_CHUNK])
    return len(rows)


def _analyze(store: Store, new: int) -> None:
    """PostgreSQL: after many people's rows, the statistics that let the planner read an
    item's rows by the ledger's key (without them it believes no row waits and reads a
    rater's whole cell, or every waiting row of the run: ~40 ms a rating at 1M rows)."""
    if store.dialect != "postgresql" or new < ANALYZE_AFTER:
        return
    with store.engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
            "ANALYZE judgment, rating_item"
        )


@transient_retry
def plan_ratings(store: Store, run_id: int, items: Sequence[PlannedRating]) -> int:
    """Insert the waiting rows (one per criterion) and the items of ``items`` that are
    missing, in one transaction; what exists is left alone. The number of new items."""
    with store.engine.begin() as conn:
        new = plan_rows(store, conn, run_id, items, utcnow())
    _analyze(store, new)
    return new


@transient_retry
def set_ranks(store: Store, run_id: int, ranks: Mapping[tuple[str, str, str, str], float]) -> None:
    """Reorder raters' queues: (judge, model, model_b, instance_id) -> rank (lower first);
    only open items change."""
    if not ranks:
        return
    stmt = (
        update(RATING_ITEM)
        .where(
            RI.run_id == run_id,
            RI.judge == bindparam("k_judge"),
            RI.model == bindparam("k_model"),
            RI.model_b == bindparam("k_model_b"),
            RI.instance_id == bindparam("k_instance"),
            RI.state == ITEM_OPEN,
        )
        .values(rank=bindparam("k_rank"), updated_at=bindparam("k_now"))
    )
    now = utcnow()
    params = [
        {
            "k_judge": j,
            "k_model": m,
            "k_model_b": mb,
            "k_instance": i,
            "k_rank": float(r),
            "k_now": now,
        }
        for (j, m, mb, i), r in ranks.items()
    ]
    with store.engine.begin() as conn:
        conn.execute(stmt, params)


@transient_retry
def import_ratings(store: Store, run_id: int, rows: Sequence[ImportedRating]) -> tuple[int, int]:
    """Store ratings made elsewhere (``rows``), in one transaction: the rows and items missing are
    planned (waiting; rank 0, not swapped), then each rating is stored on its row if the
    row still waits. Returns (stored, already): a row rated, flagged or given twice is
    counted as there already and never overwritten. ValueError for a judge that is not
    a rater's."""
    groups: dict[tuple[str, str, str, str], dict[str, None]] = {}
    for r in rows:
        groups.setdefault((r.judge, r.model, r.model_b, r.instance_id), {})[r.criterion] = None
    planned = [PlannedRating(*key, tuple(c), 0.0, False) for key, c in groups.items()]
    now = utcnow()
    with store.engine.begin() as conn:
        new = plan_rows(store, conn, run_id, planned, now)
        stored = store_imported(conn, run_id, rows, now)
    _analyze(store, new)
    return stored, len(rows) - stored
