"""Read-side SQL of the statistics: the judgments of a run as a pivot (one ``GROUP BY``).

The bootstrap needs per-instance partial sums for every (model, judge, key); ensembles
need every judge's verdict on a (model, instance, skill) cell; agreement needs the pairs
of judgments two judges made on the same cell. All three are served by one query that
groups the ledger by (model, instance, skill) and pivots the judges into columns::

    SELECT model, instance_id, skill, COUNT(*),
           MAX(CASE WHEN judge = :j1 THEN <code> END), ..., MAX(CASE WHEN judge = :jN ...)
    FROM judgment WHERE run_id = :run GROUP BY model, instance_id, skill

where ``<code>`` is the score (done), -1 (done, N/A), -2 (failed) or -3 (not finished).
That is the per (model, judge, instance, skill) information in 1/N of the rows (N
judges), read straight into numpy (:class:`Pivot`, which ``report.scores`` turns into its
score table); every sum, interval
and agreement statistic is then computed on whole arrays. On SQLite the grouping follows
the ``uq_judgment`` index (run_id, model, model_b, instance_id, criterion, judge) and
needs no sort.
Instance difficulty, capability, task, turn and domains come from two small queries.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Select, case, func, literal, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from flask_eval.core.errors import Status
from flask_eval.core.types import STATE_FAILED, STATE_NA, STATE_NONE, STATE_SCORED
from flask_eval.storage.models import INSTANCE, INSTANCE_DOMAIN, JUDGMENT, RESPONSE
from flask_eval.storage.pivot_copy import CellKeys, read_coded_parts
from flask_eval.storage.pivots import POSTGRES_WORK_MEM, Pivot
from flask_eval.storage.positions import call_scores, position_counts, positions_of_pivot
from flask_eval.storage.predicates import model_not_twin
from flask_eval.storage.store import Store

J, INS, DOM = JUDGMENT.c, INSTANCE.c, INSTANCE_DOMAIN.c

__all__ = [  # re-exported
    "POSTGRES_WORK_MEM",
    "Pivot",
    "call_scores",
    "position_counts",
    "positions_of_pivot",
]

#: Judges per pivot query; more judges take several passes (each reads only its judges).
JUDGES_PER_QUERY = 32

#: Codes of the pivot (scores are >= 0).
_NA, _FAILED, _OPEN = -1, -2, -3

#: PostgreSQL: parts of the report's pivot read at once, each by one backend, cut by model
#: (a run of fewer models is read in one). Two: this machine's cores. PostgreSQL's own
#: parallel grouping hashes every cell twice (in a worker, then in the leader, which
#: alone also codes and sends the cells); parts by model share no cell: each part is
#: grouped once and sent by its own backend, beside the others (10M judgments: ~0.5 s
#: less in psql; docs/design/ledger-scale.md).
POSTGRES_PARTS = 2


def run_judges(store: Store, run_id: int) -> list[str]:
    """Judges with at least one judgment in the run, sorted."""
    with store.engine.connect() as conn:
        rows = conn.execute(select(J.judge).where(J.run_id == run_id).group_by(J.judge)).all()
    return sorted(str(r[0]) for r in rows)


def _code() -> Any:
    return case(
        (J.status == Status.DONE.value, func.coalesce(J.score, literal(_NA))),
        (J.status == Status.FAILED.value, literal(_FAILED)),
        else_=literal(_OPEN),
    )


def _pivot(
    conn: Connection, run_id: int, judges: Sequence[str], calls: bool = False
) -> tuple[list[tuple[str, str, str]], np.ndarray, int, np.ndarray | None]:
    """(cells, codes (cells, judges) with NaN = no judgment, judgment rows in all, and with
    ``calls`` each judge's call columns (cells, 2 * judges): :func:`pivot_select`)."""
    result = conn.execute(pivot_select(run_id, judges, conn.dialect.name, calls=calls))
    rows = result.all()
    n = len(judges)
    cells = [(r[0], r[1], r[2]) for r in rows]
    total = sum(r[3] for r in rows)
    if not calls:
        codes = np.array([r[4:] for r in rows], dtype=np.float64).reshape(len(rows), n)
        return cells, codes, total, None
    values = np.array([r[4:] for r in rows], dtype=np.int64).reshape(len(rows), 2 * n)
    codes, keys = _unpack(n, values, calls)
    return cells, codes, total, keys


def pivot_select(
    run_id: int,
    judges: Sequence[str],
    dialect: str = "sqlite",
    calls: bool = False,
) -> Select[Any]:
    """The pivot's statement: (model, instance, criterion, rows, one code per judge) and,
    with ``calls`` (PostgreSQL), per judge its row's id and code packed in one integer
    (``id * 2^32 + 2^31 + code``; 0: no row), then per judge the hash of the row's call
    (``call_uid``'s 64-bit hash, made odd) when the row is finished and was read from a
    call (0 otherwise): what the position check needs (:func:`positions_of_pivot`), read
    in the same pass over the run."""
    code = _code()
    columns: list[Any] = [func.max(case((J.judge == j, code), else_=None)) for j in judges]
    if calls:  # (id << 32) + 2^31 + code (exact: id and code are 4-byte integers)
        called = J.call_uid.is_not(None) & J.status.in_((Status.DONE.value, Status.FAILED.value))
        packing = J.id * literal(2**32) + code + literal(2**31)
        hashed = func.hashtextextended(J.call_uid, 0).op("|")(1)  # odd: 0 is "no call"
        columns = [func.coalesce(func.max(packing).filter(J.judge == j), 0) for j in judges]
        columns += [
            func.coalesce(func.max(hashed).filter((J.judge == j) & called), 0) for j in judges
        ]
    # absolute grading (pairwise rows have a second model). SQLite: not ``model_b == ''``,
    # which its planner would fold into the grouping and then sort instead of walking the
    # uq_judgment index in order. PostgreSQL: ``model_b = ''``, whose selectivity it knows
    # (it guesses 0.5% for ``length(...) = 0``, then sorts the whole run to group it
    # instead of hashing: 4.0 s instead of 2.4 s for 1M judgments)
    absolute = J.model_b == "" if dialect == "postgresql" else func.length(J.model_b) == 0
    return (
        select(J.model, J.instance_id, J.criterion, func.count(), *columns)
        .where(J.run_id == run_id)
        .where(absolute)
        .group_by(J.model, J.model_b, J.instance_id, J.criterion)
    )


def _unpack(n: int, values: np.ndarray, calls: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """(codes, NaN = no row; and with ``calls`` (ids, -1 = no finished call; hashes)) of
    packed judge columns (:func:`pivot_select` with ``packed`` or ``calls``)."""
    packed = values[:, :n]
    codes = np.where(packed > 0, (packed & 0xFFFFFFFF) - 2**31, np.nan)
    if not calls:
        return codes, None
    hashes = values[:, n : 2 * n]
    ids = np.where(hashes != 0, packed >> 32, -1)  # rows read from a call, finished
    return codes, np.concatenate([ids, hashes], axis=1)


def _states(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    state = np.full(codes.shape, STATE_NONE, dtype=np.int8)
    state[codes >= 0] = STATE_SCORED
    state[codes == _NA] = STATE_NA
    state[codes == _FAILED] = STATE_FAILED
    score = np.where(state == STATE_SCORED, codes, np.nan)
    return state, score


_Read = tuple[CellKeys, np.ndarray, int, tuple[np.ndarray, np.ndarray] | None]


def pivot(store: Store, run_id: int, judges: Sequence[str] = (), calls: bool = False) -> Pivot:
    """Every judgment of run ``run_id``, grouped by cell, judges as columns.

    ``calls`` (PostgreSQL only; ignored on SQLite) also reads what the position check
    needs into :attr:`Pivot.calls` (:func:`positions_of_pivot`).

    ``judges`` are the columns, in that order (default: the run's judges, sorted); judges
    of the run missing from ``judges`` are found and appended, so nothing is dropped.
    Cells are the (model, instance, criterion) with at least one judgment row.
    """
    names = list(dict.fromkeys(judges)) or run_judges(store, run_id)
    calls = calls and store.dialect == "postgresql"
    with ExitStack() as stack:
        conn = stack.enter_context(_read_transaction(store))
        read = None
        if store.dialect == "postgresql" and 0 < len(names) <= JUDGES_PER_QUERY:
            read = _read_coded(stack, store, conn, run_id, names, calls)
        keys, codes, total, call_keys = read or _read_rows(conn, run_id, names, calls)
        facts = conn.execute(
            select(INS.instance_id, INS.difficulty, INS.capability, INS.task, INS.turn).where(
                INS.run_id == run_id
            )
        ).all()
        domains: dict[str, list[str]] = {}
        for iid, domain in conn.execute(
            select(DOM.instance_id, DOM.domain).where(DOM.run_id == run_id)
        ):
            domains.setdefault(str(iid), []).append(str(domain))
    # a cell has at most one row per judge: rows not in a column belong to other judges
    if total > np.count_nonzero(~np.isnan(codes)):
        extra = [j for j in run_judges(store, run_id) if j not in names]
        if extra:
            return pivot(store, run_id, [*names, *extra], calls)
    state, score = _states(codes)
    difficulty = {str(r[0]): (int(r[1]) if r[1] is not None else None) for r in facts}
    capability = {str(r[0]): (str(r[2]) if r[2] is not None else None) for r in facts}
    task = {str(r[0]): (str(r[3]) if r[3] is not None else None) for r in facts}
    turn: dict[str, int | None] = {str(r[0]): int(r[4]) for r in facts if r[4] is not None}
    return Pivot(
        keys, names, state, score, difficulty, domains, capability, task, call_keys, turn=turn
    )


@contextmanager
def _read_transaction(store: Store, snapshot: str | None = None) -> Iterator[Connection]:
    """A transaction to read in: on PostgreSQL one snapshot for all its statements
    (repeatable read; ``snapshot``: another transaction's, exported), memory to group
    ten million rows in; SQLite's transactions already read one snapshot."""
    if store.dialect != "postgresql":
        with store.engine.begin() as conn:
            yield conn
        return
    repeatable = store.engine.connect().execution_options(isolation_level="REPEATABLE READ")
    with repeatable as conn, conn.begin():
        if snapshot is not None:  # first in the transaction, or PostgreSQL refuses it
            if not re.fullmatch(r"[0-9A-Fa-f-]+", snapshot):  # a literal: SET takes no $1
                raise ValueError(f"not a snapshot id: {snapshot!r}")
            conn.exec_driver_sql(f"SET TRANSACTION SNAPSHOT '{snapshot}'")
        conn.exec_driver_sql(f"SET LOCAL work_mem = '{POSTGRES_WORK_MEM}'")
        yield conn


def _model_bounds(conn: Connection, run_id: int, parts: int) -> list[str]:
    """Models where a run's pivot is cut into ``parts`` of about as many models (byte
    order), from the run's responses (any cut reads every row: only the balance
    depends on it); none when it has fewer models than parts."""
    models = sorted(
        str(m)
        for (m,) in conn.execute(
            select(RESPONSE.c.model).where(RESPONSE.c.run_id == run_id).group_by(RESPONSE.c.model)
        )
    )
    if len(models) < parts:
        return []
    return [models[len(models) * k // parts] for k in range(1, parts)]


def _read_coded(
    stack: ExitStack, store: Store, conn: Connection, run_id: int, names: list[str], calls: bool
) -> _Read | None:
    """PostgreSQL: the pivot by binary COPY, cells as codes (``storage.pivot_copy``), in
    :data:`POSTGRES_PARTS` parts by model read at once, each on its own connection in
    ``conn``'s snapshot (transactions entered on ``stack``)."""
    bounds = _model_bounds(conn, run_id, POSTGRES_PARTS)
    conns = [conn]
    if bounds:
        snapshot = str(conn.exec_driver_sql("SELECT pg_export_snapshot()").scalar_one())
        try:
            conns += [stack.enter_context(_read_transaction(store, snapshot)) for _ in bounds]
        except (OperationalError, PoolTimeout):  # no connection to spare: in one part
            conns, bounds = [conn], []
        if len(conns) > 1:  # each part one backend: the parts are the parallelism
            for c in conns:
                c.exec_driver_sql("SET LOCAL max_parallel_workers_per_gather = 0")
    got = read_coded_parts(conns, run_id, names, _code(), bounds)
    if got is None:
        return None
    keys, counts, packed, hashes = got
    low = packed & 0xFFFFFFFF  # in place from here: ten million judgments are 80 MB a copy
    low -= 2**31
    codes = low.astype(np.float64)
    del low
    codes[packed <= 0] = np.nan
    call_keys = None
    if calls:
        ids = packed >> 32
        ids[hashes == 0] = -1
        call_keys = (ids, hashes)
    return keys, codes, int(counts.sum()), call_keys


def _read_rows(conn: Connection, run_id: int, names: list[str], calls: bool) -> _Read:
    """The pivot as rows, in passes of :data:`JUDGES_PER_QUERY` judges."""
    parts: list[tuple[list[tuple[str, str, str]], np.ndarray]] = []
    key_parts: list[tuple[list[tuple[str, str, str]], np.ndarray]] = []
    total = 0
    for start in range(0, max(len(names), 1), JUDGES_PER_QUERY):
        chunk = names[start : start + JUDGES_PER_QUERY]
        cells, codes, total, keys = _pivot(conn, run_id, chunk, calls)
        parts.append((cells, codes))
        if keys is not None:  # ids then hashes: merged as two column blocks
            key_parts += [(cells, keys[:, : len(chunk)]), (cells, keys[:, len(chunk) :])]
    cells, codes = _merge(parts)
    call_keys = None
    if calls:
        ids = _merge(key_parts[0::2], fill=-1)[1].astype(np.int64)
        hashes = _merge(key_parts[1::2], fill=0)[1].astype(np.int64)
        call_keys = (ids, hashes)
    return CellKeys.of(cells), codes, total, call_keys


def _merge(
    parts: list[tuple[list[tuple[str, str, str]], np.ndarray]], fill: float = np.nan
) -> tuple[list[tuple[str, str, str]], np.ndarray]:
    """Join the column chunks of several pivot passes on their cells."""
    if len(parts) == 1:
        return parts[0]
    cells = list(dict.fromkeys(c for chunk, _ in parts for c in chunk))
    index = {c: n for n, c in enumerate(cells)}
    blocks = []
    for chunk, codes in parts:
        block = np.full((len(cells), codes.shape[1]), fill, dtype=codes.dtype)
        block[[index[c] for c in chunk]] = codes
        blocks.append(block)
    return cells, np.concatenate(blocks, axis=1)


def instance_turns(store: Store, run_id: int) -> dict[str, int]:
    """Instance id -> its turn of a conversation, for the instances of the run that are
    turns of one."""
    stmt = select(INS.instance_id, INS.turn).where(INS.run_id == run_id, INS.turn.is_not(None))
    with store.engine.connect() as conn:
        return {str(iid): int(turn) for iid, turn in conn.execute(stmt)}


def instance_tasks(store: Store, run_id: int) -> dict[str, str]:
    """Instance id -> its task (BiGGen's task, an imported set's scenario or source), for
    the instances of the run that have one."""
    stmt = select(INS.instance_id, INS.task).where(INS.run_id == run_id, INS.task.is_not(None))
    with store.engine.connect() as conn:
        return {str(iid): str(task) for iid, task in conn.execute(stmt)}


@dataclass(frozen=True)
class PairwiseRows:
    """A pairwise run's judgments: every done row as (instance, first, second, criterion,
    judge, verdict), failed and unfinished rows counted per (judge, first, second,
    criterion), and the length (characters) of every response per (model, instance)."""

    done: list[tuple[str, str, str, str, str, int]]
    failed: dict[tuple[str, str, str, str], int]
    pending: dict[tuple[str, str, str, str], int]
    lengths: dict[tuple[str, str], int]


def pairwise_rows(store: Store, run_id: int, *, twins: bool = False) -> PairwiseRows:
    """The rows of run ``run_id`` whose ``model_b`` is set (pairwise comparisons).

    A done row without a score (which a pairwise protocol never writes) is left out; the
    rows come in the order of their subject (instance, models, criterion, judge). A
    probe's twin (``core.probes``) is no model: its comparisons are left out unless
    ``twins`` (the judge card's).
    """
    R = RESPONSE.c
    done: list[tuple[str, str, str, str, str, int]] = []
    failed: dict[tuple[str, str, str, str], int] = {}
    pending: dict[tuple[str, str, str, str], int] = {}
    with store.engine.connect() as conn:
        stmt = (
            select(J.instance_id, J.model, J.model_b, J.criterion, J.judge, J.status, J.score)
            .where(J.run_id == run_id)
            .where(J.model_b != "")
            .where(*(() if twins else (model_not_twin(J.model), model_not_twin(J.model_b))))
            # one order whatever order the rows finished in: the length-controlled win
            # rate's fit depends on the order of its rows
            .order_by(J.instance_id, J.model, J.model_b, J.criterion, J.judge)
        )
        for iid, first, second, crit, judge, status, score in conn.execute(stmt):
            key = (str(judge), str(first), str(second), str(crit))
            if status == Status.DONE.value:
                if score is not None:
                    done.append(
                        (str(iid), str(first), str(second), str(crit), str(judge), int(score))
                    )
            elif status == Status.FAILED.value:
                failed[key] = failed.get(key, 0) + 1
            else:
                pending[key] = pending.get(key, 0) + 1
        lengths = {
            (str(m), str(i)): int(n or 0)
            for m, i, n in conn.execute(
                select(R.model, R.instance_id, func.length(R.text)).where(R.run_id == run_id)
            )
        }
    return PairwiseRows(done, failed, pending, lengths)
