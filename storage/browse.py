"""Read-side SQL of the viewer (docs/design/viewer.md): runs, one judgment in full, one
instance's judgments, the inputs of a call's rows. A run's cached views are
storage/snapshots.py; pages of judgments under filters, storage/judgment_pages.py.

No query loads a run into Python.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select

from flask_eval.core.stored import StoredConfig
from flask_eval.storage import predicates, tally
from flask_eval.storage.models import CALL, INSTANCE, INSTANCE_DOMAIN, JUDGMENT, RESPONSE, RUN
from flask_eval.storage.records import JobContext
from flask_eval.storage.sqlite_store import CONTEXTS
from flask_eval.storage.store import Store

J, C, INS, DOM, R, RN = (
    JUDGMENT.c,
    CALL.c,
    INSTANCE.c,
    INSTANCE_DOMAIN.c,
    RESPONSE.c,
    RUN.c,
)


@dataclass(frozen=True)
class RunLine:
    """One run of the runs list, with its judgments by status."""

    id: int
    name: str
    mode: str
    created_at: datetime
    config: StoredConfig
    counts: dict[str, int]
    #: when a judgment of the run last changed (None: none has)
    last_update: datetime | None = None


def runs(store: Store, limit: int = 500) -> list[RunLine]:
    """The newest ``limit`` runs, newest first (not one being deleted), each with its
    judgments by status (PostgreSQL: the tallies; SQLite: one grouping of the
    ``ix_judgment_run_status`` index) and its last change (``ix_judgment_run_updated``)."""
    last = select(func.max(J.updated_at)).where(J.run_id == RN.id).scalar_subquery()
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(RN.id, RN.name, RN.mode, RN.created_at, RN.config, last)
            .where(predicates.visible())
            .order_by(RN.id.desc())
            .limit(limit)
        ).all()
        counts = tally.status_by_run(conn, [int(r[0]) for r in rows])
    return [
        RunLine(
            int(r[0]),
            str(r[1]),
            str(r[2]),
            r[3],
            StoredConfig.from_data(_json(r[4])),
            counts[int(r[0])],
            r[5],
        )
        for r in rows
    ]


def _json(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


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
    "usage_note",
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


def judgment_facets(store: Store, run_id: int) -> tuple[list[str], dict[str, int]]:
    """The run's judges, and its judgments' failure reasons with how many judgments each
    (PostgreSQL: the tallies; SQLite: one grouping of the run's rows)."""
    with store.engine.connect() as conn:
        counts = tally.judgment_counts(conn, run_id)
    reasons: dict[str, int] = {}
    for _, _, reason, n in counts:
        if reason:
            reasons[reason] = reasons.get(reason, 0) + n
    return sorted({j for j, _, _, _ in counts}), dict(sorted(reasons.items()))


def neighbour_instances(
    store: Store, run_id: int, instance_id: str
) -> tuple[str | None, str | None]:
    """The instances of the run before and after ``instance_id`` (by id, as
    :func:`run_instances` lists them); None at either end."""
    where = (INS.run_id == run_id,)
    with store.engine.connect() as conn:
        before = conn.execute(
            select(func.max(INS.instance_id)).where(*where, INS.instance_id < instance_id)
        ).scalar()
        after = conn.execute(
            select(func.min(INS.instance_id)).where(*where, INS.instance_id > instance_id)
        ).scalar()
    return before, after


@dataclass(frozen=True)
class Disagreement:
    """How far a run's judges are apart on one instance: over its items (model,
    criterion) scored by two judges or more, the largest and the mean spread (highest
    minus lowest score)."""

    instance_id: str
    largest: float
    mean: float
    items: int


def disagreements(
    store: Store, run_id: int, models: Sequence[str], limit: int = 20
) -> list[Disagreement]:
    """The ``limit`` instances where the judges disagree most on ``models``' responses
    (absolute grading; largest spread first, then mean spread), in SQL."""
    spread = (func.max(J.score) - func.min(J.score)).label("spread")
    items = (
        select(J.instance_id.label("instance_id"), spread)
        .where(
            J.run_id == run_id,
            J.model.in_(list(models)),
            J.model_b == "",
            J.status == "done",
            J.score.is_not(None),
        )
        .group_by(J.instance_id, J.model, J.criterion)
        .having(func.count(func.distinct(J.judge)) > 1)
    ).subquery()
    largest, mean = func.max(items.c.spread), func.avg(items.c.spread)
    stmt = (
        select(items.c.instance_id, largest, mean, func.count())
        .group_by(items.c.instance_id)
        .order_by(largest.desc(), mean.desc(), items.c.instance_id)
        .limit(limit)
    )
    with store.engine.connect() as conn:
        return [
            Disagreement(str(i), float(lg), float(mn), int(n))
            for i, lg, mn, n in conn.execute(stmt)
        ]
