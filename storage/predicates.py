"""The ledger's row predicates, shared by the store, its dialects and its helpers: a
judgment still to judge (:func:`claimable`, :func:`open_rows_selects`), a run not
being deleted (:func:`visible`) and a person's row (:func:`person`)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, and_, exists, func, or_, select
from sqlalchemy.sql.elements import ColumnElement

from flask_eval.core.errors import Status
from flask_eval.core.people import PREFIX
from flask_eval.core.probes import PROBE_SEPARATOR
from flask_eval.storage.models import DELETED_RUN, JUDGMENT, RUN

J, RN, D = JUDGMENT.c, RUN.c, DELETED_RUN.c


def person(judge: Any) -> ColumnElement[bool]:
    """Whether the worker column ``judge`` names a person (``core.people.is_person``), to
    the letter on both dialects: SQLite's LIKE ignores case, so a judge called
    ``Human/x`` would pass for one."""
    return func.substr(judge, 1, len(PREFIX)) == PREFIX


def model_not_twin(model: Any) -> ColumnElement[bool]:
    """The ledger's or responses' ``model`` column names no probe's twin
    (``core.probes``: a twin's name holds ``~``, no model's does)."""
    twin: ColumnElement[bool] = model.contains(PROBE_SEPARATOR, autoescape=True)
    return ~twin


def claimable(now: Any) -> ColumnElement[bool]:
    """A judgment still to judge: pending, or running on a lease expired before ``now``."""
    return or_(
        J.status == Status.PENDING.value,
        and_(J.status == Status.RUNNING.value, J.lease_until < now),
    )


def open_rows_selects(
    run_id: int, after: int, limit: int | None, now: Any
) -> tuple[Select[Any], Select[Any]]:
    """A page of a run's pending rows and one of its running rows whose lease expired,
    each in id order from ``after`` along ``ix_judgment_run_status`` (an index entry
    holds its row's id: no sort of the run's rows, where one query with the OR of both
    would sort every remaining row for each page)."""
    columns = (J.id, J.model, J.model_b, J.instance_id, J.criterion, J.judge)
    pending = select(*columns).where(
        J.run_id == run_id, J.status == Status.PENDING.value, J.id > after
    )
    expired = select(*columns).where(
        J.run_id == run_id, J.status == Status.RUNNING.value, J.lease_until < now, J.id > after
    )
    return pending.order_by(J.id).limit(limit), expired.order_by(J.id).limit(limit)


def visible() -> ColumnElement[bool]:
    """A run not being deleted (no tombstone for it)."""
    return ~exists(select(D.run_id).where(D.run_id == RN.id))
