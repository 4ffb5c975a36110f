"""PostgreSQL: the report's pivot read with one binary ``COPY``, its cells as integer codes.

The pivot (``storage.analytics.pivot_select``) has one row per (model, instance,
criterion) cell: 667,000 rows of ~34 numbers at 10M judgments. Fetched as Python tuples
they took ~4 s, and numbering their three strings in numpy (``report.scores.build``)
~3 s more. Here the same grouping is wrapped in a statement that numbers each key in SQL
(its distinct values ranked in byte order, ``COLLATE "C"``: the order of Python's
``sorted``) and sends each dictionary once, after the cells::

    WITH p AS (<the pivot>), dm AS (model -> rank), di AS (...), dc AS (...)
    SELECT 0, dm.k, di.k, dc.k, p.<rows>, p.<judge columns>, NULL FROM p JOIN dm ... JOIN dc
    UNION ALL SELECT 1, k, 0, ..., v FROM dm UNION ALL ... di ... UNION ALL ... dc

Every cell row is then a fixed run of 8-byte integers, so the ``COPY ... (FORMAT BINARY)``
stream is read by ``numpy.frombuffer`` as one array (no Python object per cell); the few
thousand dictionary rows after them are read one by one. A stream that does not have
that shape (a dictionary row before a cell) is refused (None) and the caller reads the
pivot as rows instead.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg import ClientCursor, pq
from sqlalchemy import (
    BigInteger,
    Select,
    Text,
    case,
    cast,
    func,
    literal,
    literal_column,
    null,
    select,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY, BIT
from sqlalchemy.engine import Connection

from flask_eval.core.errors import Status
from flask_eval.storage.models import JUDGMENT

J = JUDGMENT.c

_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
_KINDS = 3  # model, instance, criterion


@dataclass(frozen=True)
class CellKeys:
    """The pivot's cells as codes: ``model[k]`` indexes ``models`` (and so on), each
    label list sorted (Python's order) and each label used by a cell."""

    models: tuple[str, ...]
    instances: tuple[str, ...]
    criteria: tuple[str, ...]
    model: np.ndarray
    instance: np.ndarray
    criterion: np.ndarray

    def __len__(self) -> int:
        return len(self.model)

    def cells(self) -> list[tuple[str, str, str]]:
        """The cells as (model, instance, criterion) strings."""
        m, i, c = self.models, self.instances, self.criteria
        return [
            (m[a], i[b], c[d])
            for a, b, d in zip(
                self.model.tolist(), self.instance.tolist(), self.criterion.tolist(), strict=True
            )
        ]

    @classmethod
    def of(cls, cells: list[tuple[str, str, str]]) -> CellKeys:
        """Codes of string cells (each label list sorted, as ``numpy.unique`` sorts)."""
        parts = []
        for k in range(_KINDS):
            values = np.array([c[k] for c in cells], dtype=object).astype(str)
            labels, inverse = np.unique(values, return_inverse=True)
            parts.append((tuple(str(v) for v in labels), inverse.astype(np.int64).reshape(-1)))
        (ms, m), (ins, i), (cs, c) = parts
        return cls(ms, ins, cs, m, i, c)


def grouped_select(run_id: int, judges: Sequence[str], code: Any) -> Select[Any]:
    """The pivot of the absolute judgments of run ``run_id`` with each cell's judge
    columns in one bit string: per judge (in ``judges``' order) 128 bits, the row's id
    and ``code`` packed as in ``analytics.pivot_select`` (``id * 2^32 + 2^31 + code``,
    0: no row), then its call's hash (``hashtextextended(call_uid)``, made odd; 0: not
    read from a call, or not finished). One ``bit_or`` per cell, each row's 128 bits
    shifted to its judge's place, instead of two aggregates per judge each testing every
    row's judge (10M judgments: ~30% less time grouping). A row of another judge adds
    nothing (NULL), but is counted in the cell's rows."""
    width = 128 * len(judges)
    finished = J.status.in_((Status.DONE.value, Status.FAILED.value))
    packed = J.id * literal(2**32) + code + literal(2**31)
    hashed = case((J.call_uid.is_not(None) & finished,
                   func.hashtextextended(J.call_uid, 0).op("|")(1)), else_=literal(0))  # fmt: skip
    place = func.array_position(cast(literal(list(judges), ARRAY(Text)), ARRAY(Text)), J.judge)
    row = cast(packed, BIT(64)).op("||")(cast(hashed, BIT(64)))
    bits = row.op("||")(_zeros(width - 128)).op(">>")(literal(128) * (place - 1))
    return (
        select(J.model, J.instance_id, J.criterion, func.count(),
               func.coalesce(func.bit_or(bits), _zeros(width)))
        .where(J.run_id == run_id, J.model_b == "")
        .group_by(J.model, J.instance_id, J.criterion)
    )  # fmt: skip


def _zeros(bits: int) -> Any:
    return cast(literal_column("B'0'"), BIT(bits)) if bits else literal_column("B''")


def coded_select(grouped: Select[Any]) -> Select[Any]:
    """The statement above around ``grouped`` (:func:`grouped_select`)."""
    p = grouped.cte("p")
    columns = list(p.c)
    keys, (rows, bits) = columns[:_KINDS], columns[_KINDS:]
    dictionaries = []
    for n, key in enumerate(keys):
        distinct = select(key.label("v")).distinct().subquery(f"x{n}")
        rank = func.row_number().over(order_by=distinct.c.v.collate("C")) - 1
        dictionaries.append(select(distinct.c.v, rank.label("k")).cte(f"d{n}"))
    joined = p
    for key, d in zip(keys, dictionaries, strict=True):
        joined = joined.join(d, d.c.v == key)  # type: ignore[assignment]
    zero, text = cast(literal(0), BigInteger), cast(null(), Text)
    cells = select(
        zero, *(cast(d.c.k, BigInteger) for d in dictionaries), cast(rows, BigInteger),
        bits, text,
    ).select_from(joined)  # fmt: skip
    parts: list[Any] = [cells]
    for n, d in enumerate(dictionaries):
        label = cast(d.c.v, Text)
        parts.append(select(cast(literal(n + 1), BigInteger), cast(d.c.k, BigInteger),
                            *[zero] * _KINDS, null(), label))  # fmt: skip
    return union_all(*parts)  # type: ignore[return-value]


def read_coded(
    conn: Connection, run_id: int, judges: Sequence[str], code: Any
) -> tuple[CellKeys, np.ndarray, np.ndarray, np.ndarray] | None:
    """(cell keys, each cell's row count, its packed columns, its hash columns: each
    (cells, judges) int64) of the pivot (:func:`grouped_select`), or None when the stream
    is not as expected."""
    stmt = coded_select(grouped_select(run_id, judges, code))
    compiled = stmt.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    raw = conn.connection.driver_connection
    assert raw is not None
    query = ClientCursor(raw).mogrify(str(compiled), compiled.params)
    data = _copy_out(raw.pgconn, f"COPY ({query}) TO STDOUT (FORMAT BINARY)")
    return _parse(data, len(judges))


def _copy_out(pgconn: Any, query: str) -> bytes:
    """The data of ``COPY ... TO STDOUT``, read straight from libpq: psycopg's Copy object
    costs ~4 us a row in Python (2.7 s for the pivot of 10M judgments)."""
    pgconn.send_query(query.encode())
    result = pgconn.get_result()
    if result is None or result.status != pq.ExecStatus.COPY_OUT:
        while result is not None:
            error = result.error_message
            result = pgconn.get_result()
        raise psycopg.OperationalError(f"COPY of the pivot failed: {error!r}")
    chunks = []
    while True:
        n, chunk = pgconn.get_copy_data(0)  # blocking
        if n < 0:
            break
        chunks.append(chunk)
    failed = None
    while (result := pgconn.get_result()) is not None:
        if result.status != pq.ExecStatus.COMMAND_OK:
            failed = result.error_message
    if failed is not None:
        raise psycopg.OperationalError(f"COPY of the pivot failed: {failed!r}")
    return b"".join(chunks)


def _parse(
    data: bytes, n_judges: int
) -> tuple[CellKeys, np.ndarray, np.ndarray, np.ndarray] | None:
    if not data.startswith(_SIGNATURE):
        return None
    start = len(_SIGNATURE) + 8 + struct.unpack_from(">i", data, len(_SIGNATURE) + 4)[0]
    fields = 1 + _KINDS + 1  # kind, codes, rows; then the bits and the label
    layout: list[tuple[Any, ...]] = [("fields", ">i2")]
    for n in range(fields):
        layout += [(f"l{n}", ">i4"), (f"v{n}", ">i8")]
    layout += [("bytes", ">i4"), ("bits", ">i4"), ("judges", ">i8", (2 * n_judges,))]
    row = np.dtype([*layout, ("null", ">i4")])
    count = (len(data) - start) // row.itemsize
    rows = np.frombuffer(data, dtype=row, count=count, offset=start)
    ok = (rows["fields"] == fields + 2) & (rows["l0"] == 8) & (rows["v0"] == 0)
    ok &= (rows["bits"] == 128 * n_judges) & (rows["null"] == -1)
    n_cells = int(np.argmin(ok)) if not ok.all() else count
    rows = rows[:n_cells]
    labels: list[dict[int, str]] = [{} for _ in range(_KINDS)]
    at = start + n_cells * row.itemsize
    while True:  # the dictionaries: (kind, code, zeros, NULL, label)
        (n,) = struct.unpack_from(">h", data, at)
        at += 2
        if n == -1:
            break
        if n != fields + 2:
            return None
        kind, code = struct.unpack_from(">4xq4xq", data, at)
        at += 12 * fields
        bits, length = struct.unpack_from(">ii", data, at)
        if not 1 <= kind <= _KINDS or bits != -1 or length < 0:
            return None
        labels[kind - 1][code] = data[at + 8 : at + 8 + length].decode()
        at += 8 + length
    names = []
    for k in range(_KINDS):
        if sorted(labels[k]) != list(range(len(labels[k]))):
            return None
        names.append(tuple(labels[k][n] for n in range(len(labels[k]))))
        if list(names[k]) != sorted(names[k]):  # "C" is Python's order: never, but check
            return None
    codes = [rows[f"v{n + 1}"].astype(np.int64) for n in range(_KINDS)]
    if any(len(c) and (c.min() < 0 or c.max() >= len(names[k])) for k, c in enumerate(codes)):
        return None
    keys = CellKeys(names[0], names[1], names[2], codes[0], codes[1], codes[2])
    counts = rows[f"v{_KINDS + 1}"].astype(np.int64)
    both = rows["judges"].astype(np.int64)
    return keys, counts, both[:, 0::2], both[:, 1::2]
