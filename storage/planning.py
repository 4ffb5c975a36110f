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

__all__ = ["LEDGER_COLUMNS", "Pair", "answered_pairs", "insert_run_rows", "ledger_rows"]

#: an ordered model pair: (the model shown first, the model shown second)
Pair = tuple[str, str]


#: the columns of a pending ``judgment`` row, as :func:`ledger_rows` yields them
LEDGER_COLUMNS = ("run_id", "model", "model_b", "instance_id", "criterion", "judge", "status",
                  "claims", "asks", "requests", "created_at", "updated_at")  # fmt: skip


def answered_pairs(
    instances: Sequence[Instance], response_sets: Sequence[ResponseSet], pairs: Sequence[Pair]
) -> Iterator[tuple[str, str, Instance]]:
    """``(first, second, instance)`` for every pair (in order, each once) and every
    instance (in order) that both models of the pair answered."""
    answered: dict[str, set[str]] = {}
    for rs in response_sets:
        answered.setdefault(rs.model, set()).update(rs.instance_ids())
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
) -> Iterator[tuple[Any, ...]]:
    """The pending ``judgment`` rows of a new run (:data:`LEDGER_COLUMNS`; see the module
    docstring), a subject's criteria next to each other; ``pairs`` None: absolute
    grading. Made from the instance ids each model answered: no response text is read."""
    pending = Status.PENDING.value
    if pairs is None:
        skills = {inst.id: inst.skills for inst in instances}
        for rs in response_sets:
            model = rs.model
            for instance_id in rs.instance_ids():
                criteria = skills[instance_id]
                for judge in judges:
                    for criterion in criteria:
                        yield (run_id, model, "", instance_id, criterion, judge, pending,
                               0, 0, 0, now, now)  # fmt: skip
        return
    for first, second, instance in answered_pairs(instances, response_sets, pairs):
        for judge in judges:
            for criterion in instance.skills:
                yield (run_id, first, second, instance.id, criterion, judge, pending,
                       0, 0, 0, now, now)  # fmt: skip


_INSTANCE_COLUMNS = ("run_id", "instance_id", "instruction", "answer", "skills", "difficulty",
                     "system_prompt", "rubrics", "capability", "task")  # fmt: skip


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
    """Insert a new run's instances, domains, responses and pending ledger, streamed
    through the dialect's bulk load (COPY on PostgreSQL) in the caller's transaction:
    each response's text is read from its file once, here, and none is held."""
    store._bulk_load(conn, INSTANCE, _INSTANCE_COLUMNS, (
        tuple(values[c] for c in _INSTANCE_COLUMNS)
        for values in (instance_values(run_id, i) for i in instances)
    ))  # fmt: skip
    store._bulk_load(conn, INSTANCE_DOMAIN, ("run_id", "instance_id", "domain"), (
        (run_id, i.id, d) for i in instances for d in dict.fromkeys(i.domains)
    ))  # fmt: skip
    store._bulk_load(conn, RESPONSE, ("run_id", "model", "instance_id", "text"), (
        (run_id, r.model, r.instance_id, r.text) for rs in response_sets for r in rs.responses
    ))  # fmt: skip
    store._bulk_load(conn, JUDGMENT, LEDGER_COLUMNS,
                     ledger_rows(run_id, instances, response_sets, judges, now, pairs))  # fmt: skip
