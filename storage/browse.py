"""Read-side SQL of the viewer (docs/design/viewer.md): runs, a run's ledger fingerprint
and cached views, pages of judgments under filters, one judgment in full, one instance's
judgments.

Every filter is SQL: a page reads at most ``limit + 1`` rows past its keyset (``id >
after``, ascending), whatever the run's size; no query loads a run into Python.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, delete, exists, func, or_, select
from sqlalchemy.engine import Connection

from flask_eval.core.errors import Status
from flask_eval.storage.models import (
    CALL,
    INSTANCE,
    INSTANCE_DOMAIN,
    JUDGMENT,
    REPORT_SNAPSHOT,
    RESPONSE,
    RUN,
    utcnow,
)
from flask_eval.storage.records import JobContext
from flask_eval.storage.sqlite_store import CONTEXTS
from flask_eval.storage.store import Store

J, C, INS, DOM, R, RN, SNAP = (
    JUDGMENT.c,
    CALL.c,
    INSTANCE.c,
    INSTANCE_DOMAIN.c,
    RESPONSE.c,
    RUN.c,
    REPORT_SNAPSHOT.c,
)

#: the status filter's value for a done judgment without a score
NA = "na"
#: characters of a rationale a list shows
SNIPPET = 160
#: judgments a text search outside a cell reads per page at most
SCAN_WINDOW = 20_000


@dataclass(frozen=True)
class RunLine:
    """One run of the runs list, with its judgments by status."""

    id: int
    name: str
    mode: str
    created_at: datetime
    config: dict[str, Any]
    counts: dict[str, int]


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


def runs(store: Store, limit: int = 500) -> list[RunLine]:
    """The newest ``limit`` runs, newest first, each with its judgments by status (one
    grouping of the ``ix_judgment_run_status`` index)."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(RN.id, RN.name, RN.mode, RN.created_at, RN.config)
            .order_by(RN.id.desc())
            .limit(limit)
        ).all()
        ids = [int(r[0]) for r in rows]
        counts: dict[int, dict[str, int]] = {i: {} for i in ids}
        if ids:
            for run_id, st, n in conn.execute(
                select(J.run_id, J.status, func.count())
                .where(J.run_id.in_(ids))
                .group_by(J.run_id, J.status)
            ):
                counts[int(run_id)][str(st)] = int(n)
    return [
        RunLine(int(r[0]), str(r[1]), str(r[2]), r[3], _json(r[4]), counts[int(r[0])]) for r in rows
    ]


def _json(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def status_counts(conn: Connection, run_id: int) -> dict[str, int]:
    """The run's judgments by status (index-only on ``ix_judgment_run_status``)."""
    rows = conn.execute(
        select(J.status, func.count()).where(J.run_id == run_id).group_by(J.status)
    ).all()
    return {str(s): int(n) for s, n in rows}


@dataclass(frozen=True)
class Fingerprint:
    """What the ledger's state of a run is, cheaply: when the run was made, its judgments
    by status and the newest answer it paid for."""

    created_at: datetime | None
    counts: dict[str, int]
    last_call: int


def fingerprint(store: Store, run_id: int) -> Fingerprint:
    """The run's :class:`Fingerprint`: ``ix_judgment_run_status`` (index-only) and
    ``max(call.id)`` on ``ix_call_run_id``."""
    with store.engine.connect() as conn:
        created = conn.execute(select(RN.created_at).where(RN.id == run_id)).scalar()
        counts = status_counts(conn, run_id)
        last = conn.execute(select(func.max(C.id)).where(C.run_id == run_id)).scalar()
    return Fingerprint(created, counts, int(last or 0))


class Snapshot(NamedTuple):
    """A run's cached view: the ledger state it is of, its data and when it was made."""

    token: str
    body: Any
    made_at: str  # ISO, UTC, to the second


def snapshot(store: Store, run_id: int, name: str) -> Snapshot | None:
    """The run's cached view ``name``, or None."""
    with store.engine.connect() as conn:
        row = conn.execute(
            select(SNAP.token, SNAP.body, SNAP.created_at).where(
                SNAP.run_id == run_id, SNAP.name == name
            )
        ).first()
    if row is None:
        return None
    try:
        body = json.loads(gzip.decompress(base64.b64decode(row[1])))
    except (ValueError, OSError):
        return None  # unreadable: recomputed and replaced
    made = row[2].isoformat(timespec="seconds") if row[2] is not None else ""
    return Snapshot(str(row[0]), body, made)


def put_snapshots(store: Store, run_id: int, token: str, parts: Mapping[str, Any]) -> None:
    """Replace the run's cached views ``parts`` (name -> JSON data), all valid for
    ``token``, in one transaction (readers see all of the old ones or all of the new)."""
    rows = [
        {
            "run_id": run_id,
            "name": name,
            "token": token,
            "created_at": utcnow(),
            "body": base64.b64encode(gzip.compress(json.dumps(body).encode(), 6)).decode(),
        }
        for name, body in parts.items()
    ]
    with store.engine.begin() as conn:
        conn.execute(
            delete(REPORT_SNAPSHOT).where(SNAP.run_id == run_id, SNAP.name.in_(list(parts)))
        )
        if rows:
            conn.execute(REPORT_SNAPSHOT.insert(), rows)


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
                func.substr(func.coalesce(J.rationale, J.detail, ""), 1, SNIPPET),
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


@dataclass(frozen=True)
class JudgmentRecord:
    """One judgment in full, with its instance, responses and the answer it read."""

    row: dict[str, Any]
    instance: dict[str, Any]
    domains: list[str]
    responses: dict[str, str]  # model -> text
    call: dict[str, Any] | None  # the call row it points at (raw answer and metering)
    call_rows: list[tuple[int, str]]  # (id, criterion) of the rows read from that answer
    subject_rows: list[tuple[int, str, str | None]]  # (id, criterion, call_uid) of its subject


_ROW = (
    "id",
    "run_id",
    "model",
    "model_b",
    "instance_id",
    "criterion",
    "judge",
    "status",
    "score",
    "rationale",
    "reason",
    "detail",
    "call_uid",
    "value",
    "claims",
    "asks",
    "requests",
    "created_at",
    "updated_at",
)
_INSTANCE = (
    "instruction",
    "answer",
    "system_prompt",
    "difficulty",
    "capability",
    "task",
    "rubrics",
    "skills",
)
_CALL = (
    "id",
    "uid",
    "cache_key",
    "judge",
    "raw",
    "parsed",
    "finish",
    "prompt_tokens",
    "completion_tokens",
    "cost",
    "latency_ms",
    "created_at",
    "batch",
)


def judgment(store: Store, run_id: int, judgment_id: int) -> JudgmentRecord | None:
    """The judgment ``judgment_id`` of the run, or None."""
    with store.engine.connect() as conn:
        row = conn.execute(
            select(*(J[f] for f in _ROW)).where(J.id == judgment_id, J.run_id == run_id)
        ).first()
        if row is None:
            return None
        data = dict(zip(_ROW, row, strict=True))
        inst = conn.execute(
            select(*(INS[f] for f in _INSTANCE)).where(
                INS.run_id == run_id, INS.instance_id == data["instance_id"]
            )
        ).first()
        domains = conn.execute(
            select(DOM.domain).where(DOM.run_id == run_id, DOM.instance_id == data["instance_id"])
        ).scalars()
        models = [m for m in (data["model"], data["model_b"]) if m]
        texts = dict(
            conn.execute(
                select(R.model, R.text).where(
                    R.run_id == run_id, R.instance_id == data["instance_id"], R.model.in_(models)
                )
            ).all()
        )
        call = None
        call_rows: list[tuple[int, str]] = []
        if data["call_uid"]:
            found = conn.execute(
                select(*(C[f] for f in _CALL)).where(C.uid == data["call_uid"])
            ).first()
            call = dict(zip(_CALL, found, strict=True)) if found is not None else None
            call_rows = [
                (int(i), str(c))
                for i, c in conn.execute(
                    select(J.id, J.criterion)
                    .where(
                        J.run_id == run_id,
                        J.call_uid == data["call_uid"],
                        J.model == data["model"],
                        J.judge == data["judge"],
                        J.instance_id == data["instance_id"],
                    )
                    .order_by(J.id)
                )
            ]
        subject = conn.execute(
            select(J.id, J.criterion, J.call_uid)
            .where(
                J.run_id == run_id,
                J.model == data["model"],
                J.model_b == data["model_b"],
                J.instance_id == data["instance_id"],
                J.judge == data["judge"],
            )
            .order_by(J.id)
        ).all()
        domain_list = [str(d) for d in domains]
    return JudgmentRecord(
        row=data,
        instance=dict(zip(_INSTANCE, inst, strict=True)) if inst is not None else {},
        domains=domain_list,
        responses={str(k): str(v) for k, v in texts.items()},
        call=call,
        call_rows=call_rows,
        subject_rows=[(int(i), str(c), u) for i, c, u in subject],
    )


def answer_text(store: Store, cache_key: str) -> str | None:
    """The text of the first answer stored for ``cache_key`` (``ix_call_cache_key``)."""
    with store.engine.connect() as conn:
        return conn.execute(
            select(C.raw).where(C.cache_key == cache_key).order_by(C.id).limit(1)
        ).scalar()


def job_contexts(store: Store, ids: Sequence[int]) -> list[JobContext]:
    """What a worker reads to judge the rows ``ids`` (the claim's own columns), by id."""
    if not ids:
        return []
    with store.engine.connect() as conn:
        return [
            JobContext.of_row(r[:-1], r[-1]) for r in conn.execute(CONTEXTS, {"ids": list(ids)})
        ]


@dataclass(frozen=True)
class InstanceView:
    instance: dict[str, Any]
    domains: list[str]
    responses: dict[str, str]
    rows: list[dict[str, Any]]  # judgments of the models (absolute grading), by id


def instance_judgments(
    store: Store, run_id: int, instance_id: str, models: Sequence[str]
) -> InstanceView | None:
    """One instance of the run with the responses of ``models`` and every judgment of
    them on it (``uq_judgment``: run, model, model_b, instance)."""
    with store.engine.connect() as conn:
        inst = conn.execute(
            select(*(INS[f] for f in _INSTANCE)).where(
                INS.run_id == run_id, INS.instance_id == instance_id
            )
        ).first()
        if inst is None:
            return None
        domains = [
            str(d)
            for d in conn.execute(
                select(DOM.domain).where(DOM.run_id == run_id, DOM.instance_id == instance_id)
            ).scalars()
        ]
        texts = dict(
            conn.execute(
                select(R.model, R.text).where(
                    R.run_id == run_id, R.instance_id == instance_id, R.model.in_(list(models))
                )
            ).all()
        )
        rows = conn.execute(
            select(
                J.id,
                J.model,
                J.model_b,
                J.criterion,
                J.judge,
                J.status,
                J.score,
                J.rationale,
                J.reason,
            )
            .where(
                J.run_id == run_id,
                J.instance_id == instance_id,
                J.model.in_(list(models)),
                J.model_b == "",
            )
            .order_by(J.id)
        ).all()
    keys = (
        "id",
        "model",
        "model_b",
        "criterion",
        "judge",
        "status",
        "score",
        "rationale",
        "reason",
    )
    return InstanceView(
        instance=dict(zip(_INSTANCE, inst, strict=True)),
        domains=domains,
        responses={str(k): str(v) for k, v in texts.items()},
        rows=[dict(zip(keys, r, strict=True)) for r in rows],
    )


def run_instances(store: Store, run_id: int, limit: int = 1) -> list[str]:
    """The first ``limit`` instance ids of the run (by id)."""
    with store.engine.connect() as conn:
        return [
            str(i)
            for i in conn.execute(
                select(INS.instance_id)
                .where(INS.run_id == run_id)
                .order_by(INS.instance_id)
                .limit(limit)
            ).scalars()
        ]


def run_models(store: Store, run_id: int) -> list[str]:
    """Models with responses in the run (the ``response`` table's primary key)."""
    with store.engine.connect() as conn:
        return sorted(
            str(m)
            for m in conn.execute(
                select(R.model).where(R.run_id == run_id).group_by(R.model)
            ).scalars()
        )
