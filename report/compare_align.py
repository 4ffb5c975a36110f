"""The alignment of two score tables for ``report.compare`` (pure): the judgments of a
pair of models scored on both sides, what either side leaves out, and the instance means
of a key's paired judgments."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from flask_eval.core.people import is_person
from flask_eval.report.paired import unit_means
from flask_eval.report.scores import FAILED, NA, NONE, SCORED, FloatArray, IntArray, ScoreTable


@dataclass(frozen=True)
class Pair:
    """The model of BASE compared with the model of NEW (often the same name)."""

    base: str
    new: str

    @property
    def label(self) -> str:
        return self.base if self.base == self.new else f"{self.base} -> {self.new}"


@dataclass(frozen=True)
class Dropped:
    """What one pair of models leaves out. Cells (model, instance, criterion) on one side
    only; among the shared cells, each side's judgments (cell x judge) failed, pending
    (not finished) or N/A; ``paired``: judgments scored on both sides (compared)."""

    pair: Pair
    paired: int = 0
    only_base: int = 0
    only_new: int = 0
    base_failed: int = 0
    base_pending: int = 0
    base_na: int = 0
    new_failed: int = 0
    new_pending: int = 0
    new_na: int = 0


@dataclass(frozen=True)
class Aligned:
    """One pair's paired judgments: the shared row of each (rows: the cells both sides
    have), its judge (position among the compared judges), its instance and both
    scores; ``position``: BASE cell index -> its shared row (-1: not shared)."""

    row: IntArray
    judge: IntArray
    instance: IntArray
    base: FloatArray
    new: FloatArray
    position: IntArray
    shared: int  # rows (cells both sides have)


class UnknownJudge(ValueError):
    """A judge asked for (``--judge``) that one of the two tables lacks."""


def compared_judges(
    base: ScoreTable, new: ScoreTable, wanted: Sequence[str] = ()
) -> tuple[str, ...]:
    """The judges both tables have, people excepted, in BASE's order (``wanted``: those
    only; :class:`UnknownJudge` naming one either table lacks)."""
    shared = [j for j in base.judges if j in set(new.judges) and not is_person(j)]
    if not wanted:
        return tuple(shared)
    for j in wanted:
        if j not in shared:
            side = "BASE" if j not in base.judges else "NEW"
            raise UnknownJudge(f"judge {j!r} is not among {side}'s judges")
    return tuple(dict.fromkeys(wanted))


def align(
    base: ScoreTable, new: ScoreTable, pair: Pair, judges: Sequence[str]
) -> tuple[Aligned, Dropped]:
    """The judgments of ``pair`` scored on both sides, and what was dropped."""
    mb, mn = base.models.index(pair.base), new.models.index(pair.new)
    cb = np.flatnonzero(base.model == mb)
    cn = np.flatnonzero(new.model == mn)
    inst = {name: k for k, name in enumerate(base.instances)}
    skill = {name: k for k, name in enumerate(base.skills)}
    inst_map = np.array([inst.get(n, -1) for n in new.instances] + [-1], dtype=np.int64)
    skill_map = np.array([skill.get(n, -1) for n in new.skills] + [-1], dtype=np.int64)
    n_s = max(len(base.skills), 1)
    key_b = base.instance[cb] * n_s + base.skill[cb]
    ni, ns = inst_map[new.instance[cn]], skill_map[new.skill[cn]]
    known = (ni >= 0) & (ns >= 0)
    key_n = np.where(known, ni * n_s + ns, -1)
    _, ib, in_ = np.intersect1d(key_b, key_n[known], assume_unique=True, return_indices=True)
    rows_b, rows_n = cb[ib], cn[np.flatnonzero(known)[in_]]
    jb = [base.judges.index(j) for j in judges]
    jn = [new.judges.index(j) for j in judges]
    sb, sn = base.state[rows_b][:, jb], new.state[rows_n][:, jn]
    both = (sb == SCORED) & (sn == SCORED)
    r, j = np.nonzero(both)
    position = np.full(base.n_cells, -1, dtype=np.int64)
    position[rows_b] = np.arange(len(rows_b))
    aligned = Aligned(
        row=r.astype(np.int64),
        judge=j.astype(np.int64),
        instance=base.instance[rows_b][r],
        base=base.score[rows_b][:, jb][r, j],
        new=new.score[rows_n][:, jn][r, j],
        position=position,
        shared=len(rows_b),
    )
    dropped = Dropped(
        pair=pair,
        paired=int(both.sum()),
        only_base=len(cb) - len(rows_b),
        only_new=len(cn) - len(rows_b),
        base_failed=int((sb == FAILED).sum()),
        base_pending=int((sb == NONE).sum()),
        base_na=int((sb == NA).sum()),
        new_failed=int((sn == FAILED).sum()),
        new_pending=int((sn == NONE).sum()),
        new_na=int((sn == NA).sum()),
    )
    return aligned, dropped


def key_means(
    aligned: Aligned, cells: IntArray, judge: int | None = None
) -> tuple[int, FloatArray, FloatArray]:
    """(paired judgments, BASE's and NEW's instance means) of the key whose BASE cells
    are ``cells`` (``judge``: that judge's judgments only)."""
    empty = np.zeros(0)
    rows = aligned.position[cells]
    rows = rows[rows >= 0]
    if len(rows) == 0:
        return 0, empty, empty
    take = np.zeros(aligned.shared, dtype=bool)
    take[rows] = True
    mask = take[aligned.row]
    if judge is not None:
        mask &= aligned.judge == judge
    picked = np.flatnonzero(mask)
    if len(picked) == 0:
        return 0, empty, empty
    units = aligned.instance[picked]
    _, b = unit_means(aligned.base[picked], units)
    _, n = unit_means(aligned.new[picked], units)
    return len(picked), b, n
