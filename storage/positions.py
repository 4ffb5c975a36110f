"""The report's check of judges that score by a criterion's position in the prompt
(``report.patterns``): per judge, position and score, how many judgments, read from the
ledger (:func:`position_counts`, one statement with window functions) or, on PostgreSQL,
from the ids and call hashes the report's pivot read (:func:`positions_of_pivot`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import func, select

from flask_eval.core.errors import Status
from flask_eval.storage.models import JUDGMENT
from flask_eval.storage.pivots import POSTGRES_WORK_MEM, Pivot
from flask_eval.storage.store import Store

J = JUDGMENT.c

#: Criteria a response may have for positions to be counted in blocks (else by a sort)
BLOCK_CRITERIA = 8


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
        (
            str(judge),
            f"{call}|{model}|{instance}",
            float(score) if score is not None and status == done else None,
        )
        for judge, call, model, instance, score, status in rows
    ]


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
        select(
            J.judge,
            J.status,
            J.score,
            func.row_number().over(partition_by=key, order_by=J.id).label("position"),
            func.count().over(partition_by=key).label("asked"),
        )
        .where(J.run_id == run_id, J.call_uid.is_not(None), absolute)
        .where(J.status.in_((Status.DONE.value, Status.FAILED.value)))
        .subquery()
    )
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


def positions_of_pivot(p: Pivot) -> list[tuple[str, int, float, int]] | None:
    """:func:`position_counts` from a pivot read with ``calls`` (None without them): the
    same counts, from the ids and call hashes the pivot's one pass read, with no second
    pass over the run and no sort of its rows in SQL (10M judgments: 30 s of SQL before).
    A call is (model, instance, judge, call hash): two answers to the same response by the
    same judge would merge only if their 64-bit hashes of ``call_uid`` were equal.

    A criterion's position in its call is 1 + the rows of the call with a smaller id,
    the call's size its rows: compared within each response's block of cells (a few
    criteria), for all responses at once; a run with more than :data:`BLOCK_CRITERIA`
    criteria to a response sorts its rows instead."""
    if p.calls is None:
        return None
    response = p.keys.model * max(len(p.keys.instances), 1) + p.keys.instance
    blocks = _blocks(response)
    if blocks is None:
        return _positions_sorted(p, response)
    block, slot, width = blocks
    ids, hashes = p.calls
    shape = (width, int(block.max(initial=-1)) + 1, len(p.judges))  # slot, response, judge
    i = np.full(shape, -1, dtype=np.int64)
    h = np.zeros(shape, dtype=np.int64)
    i[slot, block], h[slot, block] = ids, hashes
    called = i >= 0
    asked = called.astype(np.int8)  # rows of the row's call (at most BLOCK_CRITERIA)
    position = np.ones(shape, dtype=np.int8)  # 1 + the call's rows with a smaller id
    for a in range(width):  # each pair of slots once: the same call for both, or not
        for b in range(a + 1, width):
            same = (h[a] == h[b]) & called[a] & called[b]
            earlier = i[b] < i[a]
            asked[a] += same
            asked[b] += same
            position[a] += same & earlier
            position[b] += same & ~earlier
    # back to the pivot's cells: the rows counted are scored, of calls of 2+ criteria
    asked_of, at = asked[slot, block], position[slot, block]
    keep = (ids >= 0) & (asked_of > 1) & ~np.isnan(p.score)
    return _counted_by_judge(p, keep, at)


def _counted_by_judge(
    p: Pivot, keep: np.ndarray, at: np.ndarray
) -> list[tuple[str, int, float, int]]:
    """:func:`_counted` of the cells ``keep`` marks, at positions ``at`` (both (cells,
    judges)), judge by judge: no array of all the judgments (10M: ~1 s of page faults)."""
    parts = []
    for j in range(len(p.judges)):
        rows = keep[:, j]
        parts.append((p.score[rows, j].astype(np.int64), at[rows, j].astype(np.int64)))
    if not any(len(s) for s, _ in parts):
        return []
    low = min(int(s.min()) for s, _ in parts if len(s))
    span = max(int(s.max()) for s, _ in parts if len(s)) - low + 1
    out = []
    for j, (s, a) in enumerate(parts):
        values, counts = np.unique(a * span + (s - low), return_counts=True)
        for v, n in zip(values.tolist(), counts.tolist(), strict=True):
            pos, offset = divmod(v, span)
            out.append((p.judges[j], pos, float(offset + low), n))
    return sorted(out)


def _blocks(response: np.ndarray) -> tuple[np.ndarray, np.ndarray, int] | None:
    """(each cell's response block, its slot in the block, the widest block) or None when
    a response has more than :data:`BLOCK_CRITERIA` cells."""
    if len(response) == 0:
        return None
    order = np.argsort(response, kind="stable")
    r = response[order]
    new = np.r_[True, r[1:] != r[:-1]]
    group = np.cumsum(new) - 1
    slot_sorted = np.arange(len(r)) - np.flatnonzero(new)[group]
    width = int(slot_sorted.max()) + 1
    if width > BLOCK_CRITERIA:
        return None
    block, slot = np.empty_like(group), np.empty_like(slot_sorted)
    block[order], slot[order] = group, slot_sorted
    return block, slot, width


def _counted(
    p: Pivot, j: np.ndarray, at: np.ndarray, score: np.ndarray
) -> list[tuple[str, int, float, int]]:
    """Sorted (judge, position, score, judgments) of the kept judgments."""
    s = score.astype(np.int64)
    if len(s) == 0:
        return []
    n_judges = len(p.judges)
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


def _positions_sorted(p: Pivot, response: np.ndarray) -> list[tuple[str, int, float, int]]:
    """:func:`positions_of_pivot` by one sort of the rows by (response, judge, id)."""
    assert p.calls is not None
    ids, hashes = p.calls
    n_judges = len(p.judges)
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
    return _counted(p, judge[order][keep], position[keep], score[keep])
