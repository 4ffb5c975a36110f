"""A run's rows out of one store and into another: the SQL of portable runs
(``app/bundle.py`` writes and reads the file; docs/design/bundles.md).

Rows travel as JSON values (a datetime as ISO text) in the column order of
:func:`bundle_columns`. No row carries its own id nor its run's id: the store that imports
it gives new ones. A paid answer (``call``) carries ``paid`` instead of its ``run_id``:
whether the exported run paid for it (its cost is the run's) or another run did (an
answer the run found in the answer cache), so that the imported run's cost is the same.

Images (``image``: each image of the run once, by digest) travel as base64 text, right
after the run's row, so that the instances naming them come after them; bundles made
before schema version 14 hold no such table and no instance's ``images``, and read as
runs without images.

People's rating items (``rating_item``) do not travel: an import makes them again from
the run's people's rows (``storage.rating_plan.restore_items``); raters and their sessions
belong to a store, not to a run.

Export reads one snapshot (PostgreSQL: ``REPEATABLE READ``; SQLite: one transaction), so
that every answer a judgment points at is in the bundle even while workers write. Import
writes everything in one transaction: a bundle loads whole or not at all.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    DateTime,
    Float,
    Integer,
    LargeBinary,
    String,
    Table,
    insert,
    or_,
    select,
)
from sqlalchemy.engine import Connection
from sqlalchemy.types import TypeEngine

from flask_eval.core.errors import InputError, Status
from flask_eval.core.limits import MAX_INTEGER
from flask_eval.core.stored import StoredConfig
from flask_eval.core.text import text_problem
from flask_eval.storage.models import (
    CALL,
    IMAGE,
    INSTANCE,
    INSTANCE_DOMAIN,
    JUDGE_HALT,
    JUDGMENT,
    RESPONSE,
    RUN,
    utcnow,
)
from flask_eval.storage.rating_plan import restore_items
from flask_eval.storage.store import Store

J, C, RN = JUDGMENT.c, CALL.c, RUN.c

#: the tables of a run, in the order a bundle holds them (``run`` first, images before the
#: instances naming them, answers before the judgments that point at them); provider
#: batches are not moved (see the design note)
TABLES: dict[str, Table] = {
    "run": RUN,
    "image": IMAGE,
    "instance": INSTANCE,
    "instance_domain": INSTANCE_DOMAIN,
    "response": RESPONSE,
    "call": CALL,
    "judgment": JUDGMENT,
    "judge_halt": JUDGE_HALT,
}
#: the order each table's rows are read in (stable, so two exports of a run are alike)
_ORDER = {
    "image": ("sha256",),
    "instance": ("instance_id",),
    "instance_domain": ("instance_id", "domain"),
    "response": ("model", "instance_id"),
    "call": ("id",),
    "judgment": ("id",),
    "judge_halt": ("judge",),
}
#: the tables a bundle may lack: those of later schema versions (``image``: version 14)
OPTIONAL = frozenset({"image"})
CHUNK = 2_000
#: rows of ``image`` read at once (each holds an image's bytes, up to megabytes)
IMAGE_CHUNK = 4


def bundle_columns() -> dict[str, list[str]]:
    """Per table, the columns a bundle row holds, in order."""
    columns: dict[str, list[str]] = {}
    for name, table in TABLES.items():
        cols = [c.name for c in table.columns if c.name not in ("id", "run_id")]
        columns[name] = [*cols, "paid"] if name == "call" else cols
    return columns


def export_rows(store: Store, run_id: int) -> Iterator[tuple[str, list[Any]]]:
    """``(table, values)`` for every row of the run, table by table in :data:`TABLES`
    order, streamed from one snapshot; the answers are those the run paid for and those
    its judgments point at."""
    columns = bundle_columns()
    conn = store.engine.connect()
    if store.dialect == "postgresql":
        conn = conn.execution_options(isolation_level="REPEATABLE READ")
    try:
        with conn.begin():
            for name, table in TABLES.items():
                cols = [table.c[c] for c in columns[name] if c != "paid"]
                if name == "run":
                    stmt = select(*cols).where(RN.id == run_id)
                elif name == "call":
                    used = select(J.call_uid).where(J.run_id == run_id, J.call_uid.is_not(None))
                    paid = (C.run_id == run_id).label("paid")
                    stmt = select(*cols, paid).where(
                        or_(C.run_id == run_id, C.uid.in_(used.scalar_subquery()))
                    )
                else:
                    stmt = select(*cols).where(table.c.run_id == run_id)
                stmt = stmt.order_by(*(table.c[c] for c in _ORDER.get(name, ())))
                dates = [i for i, c in enumerate(cols) if _is_datetime(c.type)]
                blobs = [i for i, c in enumerate(cols) if isinstance(c.type, LargeBinary)]
                chunk = IMAGE_CHUNK if blobs else CHUNK
                for row in conn.execution_options(yield_per=chunk).execute(stmt):
                    values = list(row)
                    for i in dates:
                        if values[i] is not None:
                            values[i] = values[i].isoformat()
                    for i in blobs:
                        values[i] = base64.b64encode(bytes(values[i])).decode("ascii")
                    if name == "call":
                        values[-1] = bool(values[-1])
                    yield name, values
    finally:
        conn.close()


def run_exists(store: Store, name: str) -> bool:
    with store.engine.connect() as conn:
        return conn.execute(select(RN.id).where(RN.name == name)).first() is not None


def copy_uid(uid: str, run_name: str) -> str:
    """The uid of an answer's copy, when the importing store holds the answer already
    for the run it came from (a run imported into its own store under another name)."""
    return hashlib.sha256(f"{uid}\0{run_name}".encode()).hexdigest()[:32]


@dataclass
class Imported:
    """What an import wrote: the new run's id, rows per table, and the answers that the
    store held already (used as they are, or copied under a new uid)."""

    run_id: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    answers_found: int = 0
    answers_copied: int = 0


def _is_datetime(kind: TypeEngine[Any]) -> bool:
    return isinstance(kind, DateTime) or isinstance(getattr(kind, "impl", None), DateTime)


class _Decoder:
    """Bundle rows of one table -> insertable dicts of the target table."""

    def __init__(self, table: Table, columns: list[str]) -> None:
        unknown = [c for c in columns if c not in table.c and c != "paid"]
        if unknown:
            raise InputError(f"bundle table {table.name} has unknown columns {unknown}")
        self.columns = columns
        self.dates = {c for c in columns if c in table.c and _is_datetime(table.c[c].type)}
        self.blobs = {
            c for c in columns if c in table.c and isinstance(table.c[c].type, LargeBinary)
        }

    def row(self, values: list[Any]) -> dict[str, Any]:
        if len(values) != len(self.columns):
            raise InputError(f"a bundle row has {len(values)} values, expected {len(self.columns)}")
        row = dict(zip(self.columns, values, strict=True))
        for c in self.dates:
            if row[c] is not None:
                row[c] = datetime.fromisoformat(row[c])
        for c in self.blobs:
            row[c] = base64.b64decode(row[c], validate=True)
        return row


def import_rows(
    store: Store,
    name: str,
    columns: dict[str, list[str]],
    sections: Iterable[tuple[str, Iterable[list[Any]]]],
) -> Imported:
    """Load a bundle's rows (``sections``: consecutive rows of one table, in
    :data:`TABLES` order, ``run`` first) as the run ``name``, in one transaction: an
    error anywhere (a run called ``name`` exists, a row that does not fit, an exception
    of ``sections`` itself, such as a checksum found wrong at its end) writes nothing."""
    decoders = {t: _Decoder(TABLES[t], cols) for t, cols in columns.items() if t in TABLES}
    if not set(TABLES) - OPTIONAL <= set(decoders) or set(decoders) != set(columns):
        raise InputError(f"a bundle holds the tables {sorted(TABLES)}, got {sorted(columns)}")
    done = Imported()
    remap: dict[str, str] = {}  # only answers copied under a new uid: none in a new store
    with store.engine.begin() as conn:
        seen: list[str] = []
        for table, rows in sections:
            if table not in decoders or table in seen or (not seen and table != "run"):
                raise InputError(f"bundle rows out of order: {table!r} after {seen}")
            seen.append(table)
            decoded = (decoders[table].row(v) for v in rows)
            if table == "run":
                done.run_id = _insert_run(conn, name, decoded)
                n = 1
            elif table == "call":
                n = _insert_calls(conn, done, name, decoded, remap)
            elif table == "image":  # one at a time: an image may take megabytes
                n = _insert_images(conn, done.run_id, decoded)
            else:
                n = _insert_owned(store, conn, TABLES[table], done.run_id, decoded, remap)
            done.rows[table] = n
        if not seen:
            raise InputError("the bundle holds no run")
        # people's items do not travel: made again from their rows
        restore_items(conn, done.run_id, utcnow())
    store._after_bulk_load()
    return done


def column_check(table: Table, name: str) -> Callable[[Any], str | None]:
    """A check of a bundle value of ``table.name``: what is wrong with it, or None
    (``app.bundle_checks`` checks every row with it before the store is opened)."""
    if name not in table.c:  # call.paid
        return lambda value: None if isinstance(value, bool) else "is not true or false"
    return _type_check(table.c[name])


def _type_check(column: Any) -> Callable[[Any], str | None]:
    """A check of one value against the column's SQL type: the problem, or None."""
    kind = column.type
    kind = getattr(kind, "impl", kind) if not isinstance(kind, String | DateTime) else kind
    nullable = bool(column.nullable) and not column.primary_key

    def check(value: Any) -> str | None:
        if value is None:
            return None if nullable else "is empty (null)"
        if isinstance(kind, LargeBinary):  # bytes as base64 (checked by the table's checks)
            return None if isinstance(value, str) else "is not base64 text"
        if isinstance(kind, Boolean):
            return None if isinstance(value, bool) else "is not true or false"
        if isinstance(kind, Integer):
            ok = isinstance(value, int) and not isinstance(value, bool)
            if not ok:
                return "is not an integer"
            return None if -MAX_INTEGER <= value <= MAX_INTEGER else "is out of range"
        if isinstance(kind, Float):
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            return None if ok and math.isfinite(value) else "is not a finite number"
        if isinstance(kind, DateTime):
            try:
                datetime.fromisoformat(value)
            except (TypeError, ValueError):
                return "is not an ISO 8601 date and time"
            return None
        if isinstance(kind, String):  # Text and sqlmodel's AutoString too
            if not isinstance(value, str):
                return "is not text"
            problem = text_problem(value)  # NUL: PostgreSQL cannot store it
            if problem is not None:
                return problem
            length = getattr(kind, "length", None)
            return None if length is None or len(value) <= length else f"is longer than {length}"
        return None

    return check


def _insert_run(conn: Connection, name: str, rows: Iterator[dict[str, Any]]) -> int:
    (run, *more) = list(rows)
    if more:
        raise InputError("a bundle holds one run")
    if conn.execute(select(RN.id).where(RN.name == name)).first() is not None:
        raise InputError(f"a run named {name!r} exists in this store; import it with --as NAME")
    # sent to no queue of this store: `resume` sends it
    config = StoredConfig.from_text(run["config"]).without_queue()
    run.update(name=name, config=config.to_text())
    return int(conn.execute(insert(RUN).values(**run).returning(RN.id)).scalar_one())


def _insert_images(conn: Connection, run_id: int, rows: Iterator[dict[str, Any]]) -> int:
    """Insert the images one at a time: one may take megabytes."""
    n = 0
    for n, row in enumerate(rows, start=1):  # noqa: B007  # the count
        conn.execute(insert(IMAGE).values(**row, run_id=run_id))
    return n


def _insert_calls(
    conn: Connection,
    done: Imported,
    name: str,
    rows: Iterator[dict[str, Any]],
    remap: dict[str, str],
) -> int:
    """Insert the answers chunk by chunk. An answer the store holds already (same uid) is
    the same answer: one another run paid for is used as it is; one the imported run paid
    for is copied under :func:`copy_uid`, so that the run's cost stays its own."""
    n = 0
    while chunk := list(itertools.islice(rows, CHUNK)):
        uids = [r["uid"] for r in chunk]
        held = set(conn.scalars(select(C.uid).where(C.uid.in_(uids))))
        copies = {r["uid"]: copy_uid(r["uid"], name) for r in chunk if r["uid"] in held}
        held_copies = set(conn.scalars(select(C.uid).where(C.uid.in_(list(copies.values())))))
        fresh = []
        for row in chunk:
            paid = bool(row.pop("paid"))
            row["run_id"] = done.run_id if paid else None
            if row["uid"] in held:
                if not paid:
                    done.answers_found += 1
                    continue
                row["uid"] = remap[row["uid"]] = copies[row["uid"]]
                if row["uid"] in held_copies:
                    done.answers_found += 1
                    continue
                done.answers_copied += 1
            fresh.append(row)
        if fresh:
            conn.execute(insert(CALL), fresh)
        n += len(chunk)
    return n


def _insert_owned(
    store: Store,
    conn: Connection,
    table: Table,
    run_id: int,
    rows: Iterator[dict[str, Any]],
    remap: dict[str, str],
) -> int:
    """Insert rows of the run through the dialect's bulk insert (COPY on PostgreSQL). A
    judgment still open in the source is pending here: no worker of this store holds it."""
    count = [0]

    def owned() -> Iterator[dict[str, Any]]:
        now = utcnow()
        for row in rows:
            row["run_id"] = run_id
            if table is JUDGMENT:
                if row.get("call_uid") in remap:
                    row["call_uid"] = remap[row["call_uid"]]
                if row.get("status") == Status.RUNNING.value:
                    row.update(status=Status.PENDING.value, lease_until=None, updated_at=now)
            count[0] += 1
            yield row

    store._insert_ignore(conn, table, owned())
    return count[0]
