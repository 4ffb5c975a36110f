"""Read-side queries about the people of a run (``human/RATER`` ledger rows) and what
the run's judges said on the same items, in SQL: the subjects a rating may name, the
people's ratings and flags, the people's open items, and the judges' scores summed per
subject (the queue order ``app/people_order.py`` computes from them).

A person's rows are told from a judge's by the reserved prefix (``core.people.PREFIX``),
compared exactly (``substr``, not ``LIKE``: SQLite's is case-insensitive).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    and_,
    case,
    func,
    select,
)
from sqlalchemy.sql.elements import ColumnElement

from flask_eval.core.errors import FailureReason, Status
from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND, VERDICT_TIE
from flask_eval.storage.models import JUDGMENT, RATER, RUN
from flask_eval.storage.predicates import person
from flask_eval.storage.store import Store

J = JUDGMENT.c
#: instance ids per ``IN (...)`` list
IDS_PER_QUERY = 500

#: what a ledger subject is: (model, model_b, instance id, criterion)
Subject = tuple[str, str, str, str]


def _person() -> ColumnElement[bool]:
    return person(J.judge)


def _machine() -> ColumnElement[bool]:
    return ~person(J.judge)


def known_subjects(store: Store, run_id: int, instance_ids: Iterable[str]) -> set[Subject]:
    """The subjects of the run's ledger (any worker's row) about ``instance_ids``."""
    ids = sorted(set(instance_ids))
    found: set[Subject] = set()
    with store.engine.connect() as conn:
        for start in range(0, len(ids), IDS_PER_QUERY):
            stmt = (
                select(J.model, J.model_b, J.instance_id, J.criterion)
                .where(J.run_id == run_id, J.instance_id.in_(ids[start : start + IDS_PER_QUERY]))
                .distinct()
            )
            found.update((str(m), str(b), str(i), str(c)) for m, b, i, c in conn.execute(stmt))
    return found


@dataclass(frozen=True)
class PersonRow:
    """One ledger row of a person: a rating (status done), or a flag (failed, flagged;
    ``detail`` the rater's reason)."""

    judge: str
    model: str
    model_b: str
    instance_id: str
    criterion: str
    score: int | None
    rationale: str | None
    detail: str | None


def people_rows(store: Store, run_id: int, *, flagged: bool = False) -> list[PersonRow]:
    """The people's ratings of the run (``flagged``: their flags instead), unordered."""
    if flagged:
        state = and_(J.status == Status.FAILED.value, J.reason == FailureReason.FLAGGED.value)
    else:
        state = J.status == Status.DONE.value
    stmt = select(
        J.judge, J.model, J.model_b, J.instance_id, J.criterion, J.score, J.rationale, J.detail
    ).where(J.run_id == run_id, state, _person())
    with store.engine.connect() as conn:
        return [
            PersonRow(
                str(j),
                str(m),
                str(b),
                str(i),
                str(c),
                None if s is None else int(s),
                None if r is None else str(r),
                None if d is None else str(d),
            )
            for j, m, b, i, c, s, r, d in conn.execute(stmt)
        ]


#: a person's item: (judge, model, model_b, instance id)
Item = tuple[str, str, str, str]


def open_people_items(store: Store, run_id: int) -> list[Item]:
    """The people's items of the run still waiting for their rater (each once)."""
    stmt = (
        select(J.judge, J.model, J.model_b, J.instance_id)
        .where(J.run_id == run_id, J.status == Status.WAITING.value, _person())
        .distinct()
    )
    with store.engine.connect() as conn:
        return [(str(j), str(m), str(b), str(i)) for j, m, b, i in conn.execute(stmt)]


@dataclass(frozen=True)
class SubjectScores:
    """The judges' done scores of one subject (every sample; N/A left out): how many,
    their sum and sum of squares, and how many of each pairwise verdict."""

    n: int
    total: float
    squares: float
    first: int
    second: int
    tie: int


#: up to this many items, the judges' scores are read item by item (an index seek each,
#: ``uq_judgment``); more, in one grouping of the run's done rows
SEEK_ITEMS = 5_000


def judge_scores(
    store: Store, run_id: int, items: Iterable[tuple[str, str, str]] | None = None
) -> dict[Subject, SubjectScores]:
    """The judges' (not the people's) done scores of the run, summed per subject, of the
    ``items`` (model, model_b, instance id) or of all: a few items are sought through the
    ledger's unique index, many read in one grouping of the run's rows."""

    def count(verdict: int) -> Any:
        return func.sum(case((J.score == verdict, 1), else_=0))

    stmt = (
        select(
            J.model,
            J.model_b,
            J.instance_id,
            J.criterion,
            func.count(),
            func.sum(J.score),
            func.sum(J.score * J.score),
            count(VERDICT_FIRST),
            count(VERDICT_SECOND),
            count(VERDICT_TIE),
        )
        .where(
            J.run_id == run_id,
            J.status == Status.DONE.value,
            J.score.is_not(None),
            _machine(),
        )
        .group_by(J.model, J.model_b, J.instance_id, J.criterion)
    )
    wanted = None if items is None else set(items)
    if wanted is None or len(wanted) > SEEK_ITEMS:
        statements = [stmt]
    else:  # (run_id, model, model_b, instance_id IN ...): a seek in uq_judgment each
        by_pair: dict[tuple[str, str], list[str]] = {}
        for model, model_b, instance_id in sorted(wanted):
            by_pair.setdefault((model, model_b), []).append(instance_id)
        statements = [
            stmt.where(J.model == m, J.model_b == b, J.instance_id.in_(ids[s : s + IDS_PER_QUERY]))
            for (m, b), ids in by_pair.items()
            for s in range(0, len(ids), IDS_PER_QUERY)
        ]
    out: dict[Subject, SubjectScores] = {}
    with store.engine.connect() as conn:
        for statement in statements:
            for m, b, i, c, n, total, squares, first, second, tie in conn.execute(statement):
                out[(str(m), str(b), str(i), str(c))] = SubjectScores(
                    int(n),
                    float(total or 0),
                    float(squares or 0),
                    int(first or 0),
                    int(second or 0),
                    int(tie or 0),
                )
    return out


@dataclass(frozen=True)
class RaterLine:
    """A rater as listed: never their token nor its hash. ``run``: the name of the only
    run their token is for (None: every run; ``#ID`` for a run deleted since)."""

    name: str
    run: str | None
    may_view: bool
    created_at: datetime | None
    revoked_at: datetime | None


def rater_lines(store: Store) -> list[RaterLine]:
    """Every rater, by name."""
    R = RATER.c  # never its token's hash
    stmt = (
        select(R.name, R.run_id, RUN.c.name, R.may_view, R.created_at, R.revoked_at)
        .select_from(RATER.outerjoin(RUN, RUN.c.id == R.run_id))
        .order_by(R.name)
    )
    with store.engine.connect() as conn:
        rows = conn.execute(stmt).all()
    return sorted(
        (
            RaterLine(
                str(name),
                None if run_id is None else str(run_name or f"#{run_id}"),
                bool(may_view),
                created,
                revoked,
            )
            for name, run_id, run_name, may_view, created, revoked in rows
        ),
        key=lambda r: r.name,
    )
