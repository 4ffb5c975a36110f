"""Pages of a run's judgments under the viewer's filters (docs/design/viewer.md).

Every filter is SQL: a page reads at most ``limit + 1`` rows past its keyset (``id >
after``, ascending), whatever the run's size; no query loads a run into Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, exists, func, or_, select
from sqlalchemy.engine import Connection

from flask_eval.core.errors import Status
from flask_eval.storage.models import INSTANCE, INSTANCE_DOMAIN, JUDGMENT, RESPONSE
from flask_eval.storage.store import Store

J, INS, DOM, R = JUDGMENT.c, INSTANCE.c, INSTANCE_DOMAIN.c, RESPONSE.c

#: the status filter's value for a done judgment without a score
NA = "na"
#: characters of a rationale a list shows
SNIPPET = 160
#: judgments a text search outside a cell reads per page at most
SCAN_WINDOW = 20_000


@dataclass(frozen=True)
class JudgmentQuery:
    """Which judgments of a run a page shows (None or '': any)."""

    model: str | None = None
    model_b: str | None = None
    judge: str | None = None
    criterion: str | None = None
    domain: str | None = None
    difficulty: int | None = None
    capability: str | None = None
    task: str | None = None
    instance_id: str | None = None
    status: str | None = None  # a Status value, or NA
    reason: str | None = None
    search: str | None = None  # in the instruction, a response or the rationale
    criteria: tuple[str, ...] = ()  # any of these (an ability's skills)
    either_order: bool = False  # model and model_b in either order (a pair of a pairwise run)


@dataclass(frozen=True)
class JudgmentLine:
    id: int
    model: str
    model_b: str
    instance_id: str
    criterion: str
    judge: str
    status: str
    score: int | None
    reason: str | None
    snippet: str


def _like(column: Any, term: str) -> ColumnElement[bool]:
    return func.lower(column).contains(term.lower(), autoescape=True)


def _instance_has(*conditions: ColumnElement[bool]) -> ColumnElement[bool]:
    return exists().where(INS.run_id == J.run_id, INS.instance_id == J.instance_id, *conditions)


def _conditions(q: JudgmentQuery) -> list[ColumnElement[bool]]:
    out: list[ColumnElement[bool]] = []
    pair = q.either_order and q.model and q.model_b
    if pair:
        out.append(
            or_(
                (J.model == q.model) & (J.model_b == q.model_b),
                (J.model == q.model_b) & (J.model_b == q.model),
            )
        )
    if q.criteria:
        out.append(J.criterion.in_(list(q.criteria)))
    for column, value in (
        (J.model, None if pair else q.model),
        (J.model_b, None if pair else q.model_b),
        (J.judge, q.judge),
        (J.criterion, q.criterion),
        (J.instance_id, q.instance_id),
        (J.reason, q.reason),
    ):
        if value is not None and value != "":
            out.append(column == value)
    if q.status == NA:
        out += [J.status == Status.DONE.value, J.score.is_(None)]
    elif q.status:
        out.append(J.status == q.status)
    if q.domain:
        out.append(
            exists().where(
                DOM.run_id == J.run_id, DOM.instance_id == J.instance_id, DOM.domain == q.domain
            )
        )
    if q.difficulty is not None:
        out.append(_instance_has(INS.difficulty == q.difficulty))
    if q.capability:
        out.append(_instance_has(INS.capability == q.capability))
    if q.task:
        out.append(_instance_has(INS.task == q.task))
    if q.search:
        response = exists().where(
            R.run_id == J.run_id,
            R.instance_id == J.instance_id,
            or_(R.model == J.model, R.model == J.model_b),
            _like(R.text, q.search),
        )
        out.append(
            or_(
                _like(J.rationale, q.search),
                _instance_has(_like(INS.instruction, q.search)),
                response,
            )
        )
    return out


@dataclass(frozen=True)
class Page:
    lines: list[JudgmentLine]
    #: where the next page starts (``after``), None at the end
    next_after: int | None
    #: the page stopped at the end of its scan window, not at ``limit`` matches
    scanned_to: int | None = None


def _window(conn: Connection, run_id: int, after: int) -> int | None:
    """The id of the run's ``SCAN_WINDOW``-th judgment after ``after`` (None: fewer)."""
    ids = select(J.id).where(J.run_id == run_id, J.id > after).order_by(J.id).limit(SCAN_WINDOW)
    sub = ids.subquery()
    count, top = conn.execute(select(func.count(), func.max(sub.c.id))).one()
    return int(top) if count == SCAN_WINDOW else None


def judgment_page(
    store: Store, run_id: int, q: JudgmentQuery, after: int = 0, limit: int = 50
) -> Page:
    """Up to ``limit`` judgments of the run matching ``q`` with ``id > after``, by id.

    A text search outside a cell (no model, no judge) reads at most ``SCAN_WINDOW`` of the
    run's judgments per page: a rare term would otherwise read the whole run for one
    page. Such a page may show fewer matches than ``limit`` and still have a next page."""
    bounded = bool(q.search) and not (q.model or q.judge)
    with store.engine.connect() as conn:
        top = _window(conn, run_id, after) if bounded else None
        stmt = (
            select(
                J.id,
                J.model,
                J.model_b,
                J.instance_id,
                J.criterion,
                J.judge,
                J.status,
                J.score,
                J.reason,
                func.substr(func.coalesce(J.rationale, J.value, J.detail, ""), 1, SNIPPET),
            )
            .where(
                J.run_id == run_id,
                J.id > after,
                *_conditions(q),
                *((J.id <= top,) if top is not None else ()),
            )
            .order_by(J.id)
            .limit(limit + 1)
        )
        rows = conn.execute(stmt).all()
    lines = [
        JudgmentLine(
            int(r[0]),
            str(r[1]),
            str(r[2]),
            str(r[3]),
            str(r[4]),
            str(r[5]),
            str(r[6]),
            r[7],
            r[8],
            str(r[9] or ""),
        )
        for r in rows[:limit]
    ]
    if len(rows) > limit:
        return Page(lines, lines[-1].id)
    if top is not None:
        return Page(lines, top, scanned_to=top)
    return Page(lines, None)


def page_statement(run_id: int, q: JudgmentQuery, after: int = 0, limit: int = 50) -> Any:
    """The page's statement without its columns (for EXPLAIN in the benchmark)."""
    return (
        select(J.id)
        .where(J.run_id == run_id, J.id > after, *_conditions(q))
        .order_by(J.id)
        .limit(limit + 1)
    )
