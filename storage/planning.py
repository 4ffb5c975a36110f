"""A new run's rows: its inputs and its pending ledger, absolute or pairwise (no I/O but
the inserts :func:`insert_run_rows` makes through the store's dialect).

Absolute grading plans one row per (response, criterion of its instance, judge), with
``model_b = ''``. A pairwise run is planned from ordered model pairs ``(first, second)``
instead: one row per (instance answered by BOTH models, pair, criterion of the instance,
judge) with ``model = first`` (the response shown first) and ``model_b = second``; a
comparison judged in both orders is the two pairs ``(A, B)`` and ``(B, A)``, two rows.
An instance one of the two models did not answer has no row for that pair, and a
pairwise run has no absolute rows. A kind whose rows are about an instance alone
(generation, annotation: ``about_instances``) plans one row per (instance, criterion,
worker) with ``model = ''`` (``rubrics.kind.NO_MODEL``: none) and stores no response.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from flask_eval.core.errors import Status
from flask_eval.core.images import Image
from flask_eval.core.types import Instance, ResponseSet
from flask_eval.rubrics.kind import NO_MODEL
from flask_eval.storage.models import IMAGE, INSTANCE, INSTANCE_DOMAIN, JUDGMENT, RESPONSE
from flask_eval.storage.records import IMAGE_COLUMNS, answers_text, image_values, instance_values

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from flask_eval.storage.leasing import WorkerLedger

__all__ = [
    "LEDGER_COLUMNS",
    "Pair",
    "RunRows",
    "Subject",
    "answered_pairs",
    "insert_run_rows",
    "ledger_rows",
    "ledger_subjects",
]

#: an ordered model pair: (the model shown first, the model shown second)
Pair = tuple[str, str]


#: the columns of a pending ``judgment`` row, as :func:`ledger_rows` yields them
LEDGER_COLUMNS = (
    "run_id",
    "model",
    "model_b",
    "instance_id",
    "criterion",
    "judge",
    "status",
    "claims",
    "asks",
    "requests",
    "created_at",
    "updated_at",
)


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


#: one subject of a new run's ledger: (model, model_b, instance id, judge, criteria), its
#: rows being one per criterion, in that order
Subject = tuple[str, str, str, str, tuple[str, ...]]


def ledger_subjects(
    instances: Sequence[Instance],
    response_sets: Sequence[ResponseSet],
    judges: Sequence[str],
    pairs: Sequence[Pair] | None = None,
    *,
    about_instances: bool = False,
) -> Iterator[Subject]:
    """The subjects of a new run's ledger in the order its rows are written (see the
    module docstring; ``pairs`` None: absolute grading). Absolute grading goes by model,
    then instance id (both sorted), then judge: the order of the ledger's unique index,
    which PostgreSQL then extends at its right edge instead of searching it from the root
    for every row (a million rows went in 3 s faster). A subject's criteria keep their
    instance's order: the order a judge prompt lists them in. Made from the instance ids
    each model answered: no response text is read. ``about_instances``: every instance,
    with no model (``response_sets`` is then empty)."""
    if about_instances:
        for instance in sorted(instances, key=lambda i: i.id):
            criteria = tuple(instance.skills)
            for judge in judges:
                yield NO_MODEL, "", instance.id, judge, criteria
        return
    if pairs is None:
        skills = {inst.id: tuple(inst.skills) for inst in instances}
        for rs in sorted(response_sets, key=lambda rs: rs.model):
            model = rs.model
            for instance_id in sorted(rs.instance_ids()):
                criteria = skills[instance_id]
                for judge in judges:
                    yield model, "", instance_id, judge, criteria
        return
    for first, second, instance in answered_pairs(instances, response_sets, pairs):
        criteria = tuple(instance.skills)
        for judge in judges:
            yield first, second, instance.id, judge, criteria


def ledger_rows(
    run_id: int,
    subjects: Iterable[Subject],
    now: datetime,
) -> Iterator[tuple[Any, ...]]:
    """The pending ``judgment`` rows (:data:`LEDGER_COLUMNS`) of ``subjects``, a
    subject's criteria next to each other."""
    pending = Status.PENDING.value
    for model, model_b, instance_id, judge, criteria in subjects:
        for criterion in criteria:
            yield (
                run_id,
                model,
                model_b,
                instance_id,
                criterion,
                judge,
                pending,
                0,
                0,
                0,
                now,
                now,
            )


_INSTANCE_COLUMNS = (
    "run_id",
    "instance_id",
    "instruction",
    "answer",
    "skills",
    "difficulty",
    "system_prompt",
    "rubrics",
    "capability",
    "task",
    "turn",
    "conversation",
    "history",
    "images",
)


@dataclass(frozen=True)
class RunRows:
    """What a new run's rows are made of: its instances, the responses judged (none for
    a kind about an instance alone), its workers and, for a pairwise run, its pairs."""

    instances: Sequence[Instance]
    response_sets: Sequence[ResponseSet]
    judges: Sequence[str]
    pairs: Sequence[Pair] | None = None
    about_instances: bool = False
    #: the bytes of the images the instances name (``core.images``), each once
    images: Sequence[Image] = ()


def insert_run_rows(
    store: WorkerLedger, conn: Connection, run_id: int, made_of: RunRows, now: datetime
) -> range | None:
    """Insert a new run's instances, domains, responses and pending ledger, streamed
    through the dialect's bulk load (COPY on PostgreSQL) in the caller's transaction:
    each response's text is read from its file once, here, and none is held. The ledger
    goes first: PostgreSQL's work more than this process's, which meanwhile has time for
    other threads (``app.plan.Plan.fingerprint_soon``). Returns the ids the ledger rows
    took, in :func:`ledger_subjects` order, when the store can tell that they are one
    unbroken range (no other writer took an id in between); else None (the caller reads
    them back from the ledger)."""
    instances, response_sets = made_of.instances, made_of.response_sets
    rows = 0

    def counted(subjects: Iterable[Subject]) -> Iterator[Subject]:
        nonlocal rows
        for subject in subjects:
            rows += len(subject[4])
            yield subject

    before = store._ledger_id(conn, before=True)
    subjects = counted(
        ledger_subjects(
            instances,
            response_sets,
            made_of.judges,
            made_of.pairs,
            about_instances=made_of.about_instances,
        )
    )
    store._bulk_load(conn, JUDGMENT, LEDGER_COLUMNS, ledger_rows(run_id, subjects, now))
    after = store._ledger_id(conn, before=False)
    store._bulk_load(
        conn,
        INSTANCE,
        _INSTANCE_COLUMNS,
        (
            tuple(values[c] for c in _INSTANCE_COLUMNS)
            for values in (instance_values(run_id, i) for i in instances)
        ),
    )
    store._bulk_load(
        conn,
        INSTANCE_DOMAIN,
        ("run_id", "instance_id", "domain"),
        ((run_id, i.id, d) for i in instances for d in dict.fromkeys(i.domains)),
    )
    store._bulk_load(
        conn,
        RESPONSE,
        ("run_id", "model", "instance_id", "text", "history"),
        (
            (run_id, r.model, r.instance_id, r.text, answers_text(r.history))
            for rs in response_sets
            for r in rs.responses
        ),
    )
    store._bulk_load(
        conn,
        IMAGE,
        IMAGE_COLUMNS,
        (
            image_values(run_id, image)
            for image in {i.ref.sha256: i for i in made_of.images}.values()
        ),
    )
    return range(before + 1, after + 1) if after - before == rows else None
