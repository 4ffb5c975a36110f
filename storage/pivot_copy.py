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

The statement may be cut by model into parts, each sent on its own connection and read as
its rows come (:func:`read_coded_parts`): each PostgreSQL backend then groups and sends
its own cells, beside the others, and their dictionaries are joined here.
"""

from __future__ import annotations

import select as io_select
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
from sqlalchemy.dialects.postgresql import BIT
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


def grouped_select(run_id: int, judges: Sequence[str], code: Any, *where: Any) -> Select[Any]:
    """The pivot of the absolute judgments of run ``run_id`` with each cell's judge
    columns in one bit string: per judge (in ``judges``' order) 128 bits, the row's id
    and ``code`` packed as in ``analytics.pivot_select`` (``id * 2^32 + 2^31 + code``,
    0: no row), then its call's hash (``hashtextextended(call_uid)``, made odd; 0: not
    read from a call, or not finished). One ``bit_or`` per cell, each row's 128 bits
    shifted to its judge's place, instead of two aggregates per judge each testing every
    row's judge (10M judgments: ~30% less time grouping). A row of another judge adds
    nothing (NULL), but is counted in the cell's rows. ``where``: further conditions
    (a range of models: :func:`read_coded_parts`)."""
    width = 128 * len(judges)
    finished = J.status.in_((Status.DONE.value, Status.FAILED.value))
    packed = J.id * literal(2**32) + code + literal(2**31)
    hashed = case(
        (J.call_uid.is_not(None) & finished, func.hashtextextended(J.call_uid, 0).op("|")(1)),
        else_=literal(0),
    )
    # the judge's place by CASE (NULL for another judge): array_position over the names
    # compared each row's judge through the array's generic iteration (~0.3 s at 10M)
    place = case({judge: literal(n) for n, judge in enumerate(judges)}, value=J.judge)
    row = cast(packed, BIT(64)).op("||")(cast(hashed, BIT(64)))
    bits = row.op("||")(_zeros(width - 128)).op(">>")(literal(128) * place)
    return (
        select(
            J.model,
            J.instance_id,
            J.criterion,
            func.count(),
            func.coalesce(func.bit_or(bits), _zeros(width)),
        )
        .where(J.run_id == run_id, J.model_b == "", *where)
        .group_by(J.model, J.instance_id, J.criterion)
    )


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
        zero,
        *(cast(d.c.k, BigInteger) for d in dictionaries),
        cast(rows, BigInteger),
        bits,
        text,
    ).select_from(joined)
    parts: list[Any] = [cells]
    for n, d in enumerate(dictionaries):
        label = cast(d.c.v, Text)
        parts.append(
            select(
                cast(literal(n + 1), BigInteger),
                cast(d.c.k, BigInteger),
                *[zero] * _KINDS,
                null(),
                label,
            )
        )
    return union_all(*parts)  # type: ignore[return-value]


Coded = tuple[CellKeys, np.ndarray, np.ndarray, np.ndarray]


def read_coded_parts(
    conns: Sequence[Connection],
    run_id: int,
    judges: Sequence[str],
    code: Any,
    bounds: Sequence[str],
) -> Coded | None:
    """(cell keys, each cell's row count, its packed columns, its hash columns: each
    (cells, judges) int64) of the pivot (:func:`grouped_select`), or None when a stream
    is not as expected; read in ``len(conns)`` parts at once, one per connection (in one
    snapshot: the caller's): part k the models from ``bounds[k - 1]`` (included) to
    ``bounds[k]`` (excluded) in byte order, the first and last open-ended. Each part is
    one PostgreSQL backend grouping its models (scanning the run, keeping its rows),
    beside the others; their cells are disjoint and are joined here."""
    if len(bounds) != len(conns) - 1:
        raise ValueError("one bound between each two parts")
    model = J.model.collate("C")
    queries = []
    for k, conn in enumerate(conns):
        where = [model >= bounds[k - 1]] if k else []
        where += [model < bounds[k]] if k < len(bounds) else []
        stmt = coded_select(grouped_select(run_id, judges, code, *where))
        compiled = stmt.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
        raw = conn.connection.driver_connection
        assert raw is not None
        query = ClientCursor(raw).mogrify(str(compiled), compiled.params)
        queries.append((raw.pgconn, f"COPY ({query}) TO STDOUT (FORMAT BINARY)"))
    parts = [_parse(data, len(judges)) for data in _copy_out(queries)]
    if any(p is None for p in parts):
        return None
    return _joined([p for p in parts if p is not None])


def _joined(parts: list[Coded]) -> Coded:
    """The cells of parts with disjoint cells, as one: each label list the sorted union of
    the parts' (Python's order, as each part's), each part's codes renumbered into it, the
    columns native int64 (``_parse`` leaves them as the stream's big-endian views)."""
    if len(parts) == 1:
        keys, counts, packed, hashes = parts[0]
        return keys, counts, packed.astype(np.int64), hashes.astype(np.int64)
    names: list[tuple[str, ...]] = []
    codes: list[np.ndarray] = []
    for kind, plural in (("model", "models"), ("instance", "instances"), ("criterion", "criteria")):
        labels = [getattr(p[0], plural) for p in parts]
        union = tuple(sorted(set().union(*labels)))
        position = {label: n for n, label in enumerate(union)}
        names.append(union)
        codes.append(
            np.concatenate(
                [
                    np.array([position[x] for x in own], dtype=np.int64)[getattr(p[0], kind)]
                    if len(own)
                    else np.zeros(0, dtype=np.int64)
                    for p, own in zip(parts, labels, strict=True)
                ]
            )
        )
    keys = CellKeys(names[0], names[1], names[2], codes[0], codes[1], codes[2])
    # one pass each: the parts' big-endian columns made native as they are joined
    counts = np.concatenate([p[1] for p in parts], dtype=np.int64)
    packed = np.concatenate([p[2] for p in parts], dtype=np.int64)
    hashes = np.concatenate([p[3] for p in parts], dtype=np.int64)
    return keys, counts, packed, hashes


def _copy_out(queries: Sequence[tuple[Any, str]]) -> list[bytes]:
    """The data of each ``COPY ... TO STDOUT`` (libpq connection, statement), all sent at
    once and read as they come, straight from libpq without blocking on any one: psycopg's
    Copy object costs ~4 us a row in Python (2.7 s for the pivot of 10M judgments), and
    a blocking read of one would leave the others' backends waiting on a full socket."""
    chunks: list[list[bytes]] = [[] for _ in queries]
    for pgconn, query in queries:
        pgconn.send_query(query.encode())
    state = ["start"] * len(queries)  # start -> copy -> end -> done
    errors: list[str] = []
    while any(s != "done" for s in state):
        waiting = [q[0].socket for q, s in zip(queries, state, strict=True) if s != "done"]
        io_select.select(waiting, [], [])
        for k, (pgconn, _) in enumerate(queries):
            if state[k] == "done":
                continue
            pgconn.consume_input()
            if state[k] == "start" and not pgconn.is_busy():
                result = pgconn.get_result()
                if result is not None and result.status == pq.ExecStatus.COPY_OUT:
                    state[k] = "copy"
                else:
                    errors.append(_message(result))
                    state[k] = "end"
            while state[k] == "copy":
                n, data = pgconn.get_copy_data(1)  # 1: without waiting
                if n > 0:
                    chunks[k].append(data)
                elif n == 0:
                    break
                else:
                    state[k] = "end"
            while state[k] == "end" and not pgconn.is_busy():
                result = pgconn.get_result()
                if result is None:
                    state[k] = "done"
                elif result.status not in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.COPY_OUT):
                    errors.append(_message(result))
    if errors:
        raise psycopg.OperationalError(f"COPY of the pivot failed: {errors[0]!r}")
    return [b"".join(c) for c in chunks]


def _message(result: Any) -> str:
    return "no result" if result is None else str(result.error_message.decode(errors="replace"))


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
    both = rows["judges"]  # big-endian views: made native when the parts are joined
    return keys, counts, both[:, 0::2], both[:, 1::2]
