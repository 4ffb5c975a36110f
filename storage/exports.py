"""The export of a run: one row per judgment, in id order, and the fields of those rows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import select

from flask_eval.storage.models import CALL, JUDGMENT
from flask_eval.storage.store import Store

C, J = CALL.c, JUDGMENT.c


EXPORT_FIELDS = (
    "run",
    "model",
    "judge",
    "instance_id",
    "skill",
    "status",
    "score",
    "reason",
    "detail",
    "rationale",
    "raw",
    "finish",
    "attempts",
    "requests",
    "claims",
)


#: the export of a pairwise run: ``model_b`` (the response shown second) after ``model``
#: (the one shown first); ``score`` is then the verdict (``core.types.VERDICT_*``)
PAIRWISE_EXPORT_FIELDS = (*EXPORT_FIELDS[:2], "model_b", *EXPORT_FIELDS[2:])


def export_fields(store: Store, run_id: int) -> tuple[str, ...]:
    """The fields of the run's export rows: :data:`EXPORT_FIELDS`, or
    :data:`PAIRWISE_EXPORT_FIELDS` when the run has a pairwise row."""
    stmt = select(J.id).where(J.run_id == run_id, J.model_b != "").limit(1)
    with store.engine.connect() as conn:
        pairwise = conn.execute(stmt).first() is not None
    return PAIRWISE_EXPORT_FIELDS if pairwise else EXPORT_FIELDS


def export_rows(
    store: Store, run_id: int, run_name: str, *, value: bool = False
) -> Iterator[dict[str, Any]]:
    """One row per judgment, streamed in id order.

    The row contract: the keys of :data:`EXPORT_FIELDS`, in that order; a pairwise row
    (its ``model_b`` non-empty) also has ``model_b`` right after ``model``
    (:data:`PAIRWISE_EXPORT_FIELDS`), so absolute exports are unchanged. With ``value``,
    each row also has ``value`` last (what a kind other than judgment read: for its
    export hook, ``rubrics.kind.Kind.export``).
    """
    stmt = (
        select(
            J.model,
            J.model_b,
            J.judge,
            J.instance_id,
            J.criterion,
            J.status,
            J.score,
            J.reason,
            J.detail,
            J.rationale,
            C.raw,
            C.finish,
            J.asks,
            J.requests,
            J.claims,
            *((J.value,) if value else ()),
        )
        .outerjoin(CALL, C.uid == J.call_uid)
        .where(J.run_id == run_id)
        .order_by(J.id)
    )
    with store.engine.connect() as conn:
        for model, model_b, *rest in conn.execution_options(yield_per=2000).execute(stmt):
            if value:
                fields = PAIRWISE_EXPORT_FIELDS if model_b else EXPORT_FIELDS
                both = (run_name, model, model_b) if model_b else (run_name, model)
                yield dict(zip((*fields, "value"), (*both, *rest), strict=True))
            elif model_b:
                yield dict(
                    zip(PAIRWISE_EXPORT_FIELDS, (run_name, model, model_b, *rest), strict=True)
                )
            else:
                yield dict(zip(EXPORT_FIELDS, (run_name, model, *rest), strict=True))
