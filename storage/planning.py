"""A new run's rows: its inputs and its pending ledger, absolute or pairwise (no I/O but
the inserts :func:`insert_run_rows` makes through the store's dialect).

Absolute grading plans one row per (response, criterion of its instance, judge), with
``model_b = ''``. A pairwise run is planned from ordered model pairs ``(first, second)``
instead: one row per (instance answered by BOTH models, pair, criterion of the instance,
judge) with ``model = first`` (the response shown first) and ``model_b = second``; a
comparison judged in both orders is the two pairs ``(A, B)`` and ``(B, A)``, two rows.
An instance one of the two models did not answer has no row for that pair, and a
pairwise run has no absolute rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from flask_eval.core.errors import Status
from flask_eval.core.types import Instance, ResponseSet
from flask_eval.storage.models import INSTANCE, INSTANCE_DOMAIN, JUDGMENT, RESPONSE
from flask_eval.storage.records import instance_values

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from flask_eval.storage.store import Store

__all__ = ["Pair", "answered_pairs", "insert_run_rows", "ledger_rows"]

#: an ordered model pair: (the model shown first, the model shown second)
Pair = tuple[str, str]


def _pending(run_id: int, model: str, model_b: str, instance_id: str, criterion: str,
             judge: str, now: datetime) -> dict[str, Any]:  # fmt: skip
    return {"run_id": run_id, "model": model, "model_b": model_b, "instance_id": instance_id,
            "criterion": criterion, "judge": judge, "status": Status.PENDING.value,
            "claims": 0, "asks": 0, "requests": 0, "created_at": now,
            "updated_at": now}  # fmt: skip


def answered_pairs(
    instances: Sequence[Instance], response_sets: Sequence[ResponseSet], pairs: Sequence[Pair]
) -> Iterator[tuple[str, str, Instance]]:
    """``(first, second, instance)`` for every pair (in order, each once) and every
    instance (in order) that both models of the pair answered."""
    answered: dict[str, set[str]] = {}
    for rs in response_sets:
        answered.setdefault(rs.model, set()).update(r.instance_id for r in rs.responses)
    for first, second in dict.fromkeys(pairs):
        if first == second:
            raise ValueError(f"a pair compares two different models, got {first!r} twice")
        both = answered.get(first, set()) & answered.get(second, set())
        for instance in instances:
            if instance.id in both:
                yield first, second, instance


def ledger_rows(
    run_id: int,
    instances: Sequence[Instance],
    response_sets: Sequence[ResponseSet],
    judges: Sequence[str],
    now: datetime,
    pairs: Sequence[Pair] | None = None,
) -> Iterator[dict[str, Any]]:
    """The pending ``judgment`` rows of a new run (see the module docstring); ``pairs``
    None: absolute grading."""
    if pairs is None:
        by_id = {inst.id: inst for inst in instances}
        for rs in response_sets:
            for r in rs.responses:
                for judge in judges:
                    for criterion in by_id[r.instance_id].skills:
                        yield _pending(run_id, r.model, "", r.instance_id, criterion, judge, now)
        return
    for first, second, instance in answered_pairs(instances, response_sets, pairs):
        for judge in judges:
            for criterion in instance.skills:
                yield _pending(run_id, first, second, instance.id, criterion, judge, now)


def insert_run_rows(
    store: Store,
    conn: Connection,
    run_id: int,
    instances: Sequence[Instance],
    response_sets: Sequence[ResponseSet],
    judges: Sequence[str],
    now: datetime,
    pairs: Sequence[Pair] | None = None,
) -> None:
    """Insert a new run's instances, domains, responses and pending ledger (through the
    dialect's bulk insert: COPY on PostgreSQL), in the caller's transaction."""
    store._insert_ignore(conn, INSTANCE, (instance_values(run_id, i) for i in instances))
    store._insert_ignore(conn, INSTANCE_DOMAIN, (
        {"run_id": run_id, "instance_id": i.id, "domain": d}
        for i in instances
        for d in dict.fromkeys(i.domains)
    ))  # fmt: skip
    store._insert_ignore(conn, RESPONSE, (
        {"run_id": run_id, "model": r.model, "instance_id": r.instance_id, "text": r.text}
        for rs in response_sets
        for r in rs.responses
    ))  # fmt: skip
    store._insert_ignore(
        conn, JUDGMENT, ledger_rows(run_id, instances, response_sets, judges, now, pairs)
    )
