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
Instance difficulty, capability, task and domains come from two small queries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import Select, case, func, literal, select
from sqlalchemy.engine import Connection

from flask_eval.core.errors import Status
from flask_eval.core.types import STATE_FAILED, STATE_NA, STATE_NONE, STATE_SCORED
from flask_eval.storage.models import INSTANCE, INSTANCE_DOMAIN, JUDGMENT, RESPONSE
from flask_eval.storage.store import Store

J, INS, DOM = JUDGMENT.c, INSTANCE.c, INSTANCE_DOMAIN.c

#: Judges per pivot query; more judges take several passes (each reads only its judges).
JUDGES_PER_QUERY = 32

#: Codes of the pivot (scores are >= 0).
_NA, _FAILED, _OPEN = -1, -2, -3

#: PostgreSQL: memory for the grouping, so that ten million rows (670,000 cells) group in
#: memory, hashed in parallel: at 128 MB the planner sorted them on disk instead (19.4 s
#: for the pivot of 10M judgments instead of 7.0 s; docs/design/ledger-scale.md).
POSTGRES_WORK_MEM = "512MB"


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
    packed, hashes = values[:, :n], values[:, n:]
    codes = np.where(packed > 0, (packed & 0xFFFFFFFF) - 2**31, np.nan)
    ids = np.where(hashes != 0, packed >> 32, -1)  # rows read from a call, finished
    return cells, codes, total, np.concatenate([ids, hashes], axis=1)


def pivot_select(
    run_id: int, judges: Sequence[str], dialect: str = "sqlite", calls: bool = False
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
        packed = J.id * literal(2**32) + code + literal(2**31)
        hashed = func.hashtextextended(J.call_uid, 0).op("|")(1)  # odd: 0 is "no call"
        columns = [func.coalesce(func.max(packed).filter(J.judge == j), 0) for j in judges]
        columns += [func.coalesce(func.max(hashed).filter((J.judge == j) & called), 0)
                    for j in judges]  # fmt: skip
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


def _states(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    state = np.full(codes.shape, STATE_NONE, dtype=np.int8)
    state[codes >= 0] = STATE_SCORED
    state[codes == _NA] = STATE_NA
    state[codes == _FAILED] = STATE_FAILED
    score = np.where(state == STATE_SCORED, codes, np.nan)
    return state, score


@dataclass(frozen=True)
class Pivot:
    """Every judgment of a run, one row per (model, instance, criterion) cell and one column
    per judge: ``state`` (``core.types.STATE_*``) and ``score`` (NaN unless scored), with
    each instance's difficulty (None: unknown), domains, capability and task (BiGGen
    Bench's groups; None: the instance has none). ``report.scores.build`` turns it into the
    report's score table."""

    cells: list[tuple[str, str, str]]
    judges: list[str]
    state: np.ndarray
    score: np.ndarray
    difficulty: dict[str, int | None]
    domains: dict[str, list[str]]
    capability: dict[str, str | None] = field(default_factory=dict)
    task: dict[str, str | None] = field(default_factory=dict)
    #: (row ids, call hashes), each (cells, judges), when read (``pivot(calls=True)``)
    calls: tuple[np.ndarray, np.ndarray] | None = None


def pivot(store: Store, run_id: int, judges: Sequence[str] = (), calls: bool = False) -> Pivot:
    """Every judgment of run ``run_id``, grouped by cell, judges as columns.

    ``calls`` (PostgreSQL only; ignored on SQLite) also reads what the position check
    needs into :attr:`Pivot.calls` (:func:`positions_of_pivot`).

    ``judges`` are the columns, in that order (default: the run's judges, sorted); judges
    of the run missing from ``judges`` are found and appended, so nothing is dropped.
    Cells are the (model, instance, criterion) with at least one judgment row.
    """
    names = list(dict.fromkeys(judges)) or run_judges(store, run_id)
    with store.engine.begin() as conn:
        if store.dialect == "postgresql":
            conn.exec_driver_sql(f"SET LOCAL work_mem = '{POSTGRES_WORK_MEM}'")
        calls = calls and store.dialect == "postgresql"
        parts: list[tuple[list[tuple[str, str, str]], np.ndarray]] = []
        key_parts: list[tuple[list[tuple[str, str, str]], np.ndarray]] = []
        total = 0
        for start in range(0, max(len(names), 1), JUDGES_PER_QUERY):
            chunk = names[start : start + JUDGES_PER_QUERY]
            cells, codes, total, keys = _pivot(conn, run_id, chunk, calls)
            parts.append((cells, codes))
            if keys is not None:  # ids then hashes: merged as two column blocks
                key_parts += [(cells, keys[:, : len(chunk)]), (cells, keys[:, len(chunk) :])]
        facts = conn.execute(
            select(INS.instance_id, INS.difficulty, INS.capability, INS.task).where(
                INS.run_id == run_id
            )
        ).all()
        domains: dict[str, list[str]] = {}
        for iid, domain in conn.execute(
            select(DOM.instance_id, DOM.domain).where(DOM.run_id == run_id)
        ):
            domains.setdefault(str(iid), []).append(str(domain))
    cells, codes = _merge(parts)
    # a cell has at most one row per judge: rows not in a column belong to other judges
    if total > np.count_nonzero(~np.isnan(codes)):
        extra = [j for j in run_judges(store, run_id) if j not in names]
        if extra:
            return pivot(store, run_id, [*names, *extra], calls)
    call_keys = None
    if calls:
        ids = _merge(key_parts[0::2], fill=-1)[1].astype(np.int64)
        hashes = _merge(key_parts[1::2], fill=0)[1].astype(np.int64)
        call_keys = (ids, hashes)
    state, score = _states(codes)
    difficulty = {str(r[0]): (int(r[1]) if r[1] is not None else None) for r in facts}
    capability = {str(r[0]): (str(r[2]) if r[2] is not None else None) for r in facts}
    task = {str(r[0]): (str(r[3]) if r[3] is not None else None) for r in facts}
    return Pivot(cells, names, state, score, difficulty, domains, capability, task, call_keys)


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


def call_scores(store: Store, run_id: int) -> list[tuple[str, str, float | None]]:
    """``(judge, call, score)`` of every finished absolute judgment read from an answer
    (score None: N/A or failed), a call's rows together in the order the call asked for
    their criteria (the ledger's order: a call's criteria are its open rows by id). A
    call is one answer for one response (``call_uid`` and the response: two responses
    with the same text may share a cached answer)."""
    stmt = (
        select(J.judge, J.call_uid, J.model, J.instance_id, J.score, J.status)
        .where(J.run_id == run_id, J.call_uid.is_not(None), func.length(J.model_b) == 0)
        .where(J.status.in_((Status.DONE.value, Status.FAILED.value)))
        .order_by(J.judge, J.call_uid, J.model, J.instance_id, J.id)
    )
    with store.engine.connect() as conn:
        rows = conn.execute(stmt).all()
    done = Status.DONE.value
    return [
        (str(judge), f"{call}|{model}|{instance}",
         float(score) if score is not None and status == done else None)
        for judge, call, model, instance, score, status in rows
    ]  # fmt: skip


def position_counts(store: Store, run_id: int) -> list[tuple[str, int, float, int]]:
    """``(judge, position, score, judgments)``: the scored absolute judgments read from
    calls that asked for two or more criteria, counted by the criterion's position in its
    call (``report.patterns.patterns_of_counts``; the calls are those of
    :func:`call_scores`, a criterion's position its rank by id among its call's finished
    rows). Counted in SQL: a run's rows never reach Python (10 s for 1M judgments
    through :func:`call_scores` and ``patterns``)."""
    key: list[Any] = [J.call_uid, J.judge, J.model, J.instance_id]  # the most distinct first
    if store.dialect == "postgresql":  # sort by bytes, not by the locale's rules
        key = [column.collate("C") for column in key]
    absolute = J.model_b == "" if store.dialect == "postgresql" else func.length(J.model_b) == 0
    finished = (
        select(J.judge, J.status, J.score,
               func.row_number().over(partition_by=key, order_by=J.id).label("position"),
               func.count().over(partition_by=key).label("asked"))
        .where(J.run_id == run_id, J.call_uid.is_not(None), absolute)
        .where(J.status.in_((Status.DONE.value, Status.FAILED.value)))
        .subquery()
    )  # fmt: skip
    f = finished.c
    stmt = (
        select(f.judge, f.position, f.score, func.count())
        .where(f.asked > 1, f.status == Status.DONE.value, f.score.is_not(None))
        .group_by(f.judge, f.position, f.score)
        .order_by(f.judge, f.position, f.score)
    )
    with store.engine.begin() as conn:
        if store.dialect == "postgresql":
            conn.exec_driver_sql(f"SET LOCAL work_mem = '{POSTGRES_WORK_MEM}'")
        rows = conn.execute(stmt).all()
    return [(str(j), int(p), float(s), int(n)) for j, p, s, n in rows]


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


def pairwise_rows(store: Store, run_id: int) -> PairwiseRows:
    """The rows of run ``run_id`` whose ``model_b`` is set (pairwise comparisons).

    A done row without a score (which a pairwise protocol never writes) is left out.
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
        )
        for iid, first, second, crit, judge, status, score in conn.execute(stmt):
            key = (str(judge), str(first), str(second), str(crit))
            if status == Status.DONE.value:
                if score is not None:
                    done.append((str(iid), str(first), str(second), str(crit), str(judge),
                                 int(score)))  # fmt: skip
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


def positions_of_pivot(p: Pivot) -> list[tuple[str, int, float, int]] | None:
    """:func:`position_counts` from a pivot read with ``calls`` (None without them): the
    same counts, from the ids and call hashes the pivot's one pass read, with no second
    pass over the run and no sort of its rows in SQL (10M judgments: 30 s of SQL before).
    A call is (model, instance, judge, call hash): two answers to the same response by the
    same judge would merge only if their 64-bit hashes of ``call_uid`` were equal."""
    if p.calls is None:
        return None
    ids, hashes = p.calls
    n_judges = len(p.judges)
    responses: dict[tuple[str, str], int] = {}
    response = np.fromiter((responses.setdefault((m, i), len(responses)) for m, i, _ in p.cells),
                           dtype=np.int64, count=len(p.cells))  # fmt: skip
    cell, judge = np.nonzero(ids >= 0)
    group = response[cell] * n_judges + judge  # (model, instance, judge)
    row, key = ids[cell, judge], hashes[cell, judge]
    if len(row) and int(row.max()) < 2**31 and int(group.max()) < 2**31:
        order = np.argsort((group << 31) | row)  # by group, then id
    else:
        order = np.lexsort((row, group))
    g, h = group[order], key[order]
    # a group with two calls (hashes): its rows by (call, id) instead
    first = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    starts = np.repeat(first, np.diff(np.r_[first, len(g)]))
    mixed = h != h[starts]
    if mixed.any():
        redo = np.isin(g, np.unique(g[mixed]))
        sub = order[redo]
        order[redo] = sub[np.lexsort((row[sub], key[sub], group[sub]))]
        g, h = group[order], key[order]
    new = np.r_[True, (g[1:] != g[:-1]) | (h[1:] != h[:-1])]
    call = np.cumsum(new) - 1
    begin = np.flatnonzero(new)
    position = np.arange(len(g)) - begin[call] + 1
    asked = np.bincount(call)[call]
    score = p.score[cell[order], judge[order]]
    keep = (asked > 1) & ~np.isnan(score)
    j, at, s = judge[order][keep], position[keep], score[keep].astype(np.int64)
    if len(s) == 0:
        return []
    low, span, top = int(s.min()), int(s.max() - s.min()) + 1, int(at.max()) + 1
    code = (j * top + at) * span + (s - low)
    if n_judges * top * span <= 2**24:
        counts = np.bincount(code, minlength=n_judges * top * span)
        values = np.flatnonzero(counts)
        counts = counts[values]
    else:
        values, counts = np.unique(code, return_counts=True)
    out = []
    for v, n in zip(values.tolist(), counts.tolist(), strict=True):
        rest, offset = divmod(v, span)
        jj, pos = divmod(rest, top)
        out.append((p.judges[jj], pos, float(offset + low), n))
    return sorted(out)
