"""A paired comparison of two score tables, key by key, and the regression gate (pure).

Two tables (BASE and NEW: two runs, or two models of one run) are aligned on the
judgments they share: the same model (or the pair of models compared), instance,
criterion and judge, scored on both sides. What is not shared is counted, never scored:
cells on one side only, and, among shared cells, judgments failed, pending or N/A on
either side (each side counted apart; a timeout is not a low score). A run of repeated
judgments reaches this module with its samples merged into one column per judge (their
mean, ``report.consistency.merge_samples``): the samples average inside an instance
anyway, so merging first changes no instance mean whose samples are all scored.

For every (dimension, key) of the breakdown (the cells of ``Aggregation.members`` on
BASE: the membership the report's means use) the unit is the *instance*: each side's
paired judgments of a key are averaged inside each instance (criteria, judges and
samples alike), and ``report.paired.paired_test`` compares the instance means. Criteria
of one instance are never counted as independent observations.

Every test of a comparison (every pair of models, every key) is one family: its p-values
are adjusted together with ``report.paired.adjust`` (Holm's step-down by default: the
family-wise error; Benjamini-Hochberg's step-up on request: the false discovery rate).
The gate fails when a key's adjusted ``p_regression`` (one-sided, H0: no drop of at least
``min_effect``) is below ``alpha``. Per-judge rows (overall only) are shown beside the
pooled ones, in a family of their own; they never move the gate.
docs/design/compare.md says what this assumes and what it does not promise.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from flask_eval.core.people import is_person
from flask_eval.report.breakdown import Aggregation, Breakdown
from flask_eval.report.metrics import OVERALL
from flask_eval.report.paired import HOLM, METHODS, PairedTest, adjust, paired_test, unit_means
from flask_eval.report.scores import FAILED, NA, NONE, SCORED, FloatArray, IntArray, ScoreTable

#: verdicts of a row
REGRESSION = "regression"
IMPROVEMENT = "improvement"
SMALL_DROP = "drop below min-effect"
NO_CHANGE = "no significant change"
UNTESTABLE = "untestable"
VERDICTS = (REGRESSION, IMPROVEMENT, SMALL_DROP, NO_CHANGE, UNTESTABLE)
#: the dimension of the per-judge rows' judge (pooled rows: every judge)
POOLED = "*"


@dataclass(frozen=True)
class CompareSettings:
    """How a comparison tests. ``judges``: the judges compared (empty: every judge both
    tables have, people excepted)."""

    alpha: float = 0.05
    min_effect: float = 0.0
    correction: str = HOLM
    confidence: float = 0.95
    power: float = 0.8
    judges: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), not {self.alpha}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), not {self.confidence}")
        if not (math.isfinite(self.min_effect) and self.min_effect >= 0):
            raise ValueError(f"min-effect must be a finite number >= 0, not {self.min_effect}")
        if self.correction not in METHODS:
            raise ValueError(f"correction must be one of {', '.join(METHODS)}")


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
class CompareRow:
    """One test: NEW against BASE on the instances of one (dimension, key), for one pair
    of models and one judge (:data:`POOLED`: all compared judges). ``p_adjusted`` and
    ``p_regression_adjusted`` are adjusted across the row's family; ``mde`` is the
    smallest |effect| a two-sided test at ``alpha / tests`` (Holm's first step) detects
    with the settings' power. Undefined figures are NaN."""

    model: str
    judge: str
    dimension: str
    key: str
    n: int
    judgments: int
    base: float
    new: float
    effect: float
    low: float
    high: float
    se: float
    p_value: float
    p_adjusted: float
    p_regression: float
    p_regression_adjusted: float
    mde: float
    verdict: str


@dataclass(frozen=True)
class Comparison:
    """A whole comparison: the pooled rows (the gate's family), the per-judge rows (a
    family of their own), what each pair dropped, and notes."""

    base: str
    new: str
    settings: CompareSettings
    judges: tuple[str, ...]
    pairs: tuple[Pair, ...]
    rows: tuple[CompareRow, ...]
    judge_rows: tuple[CompareRow, ...]
    dropped: tuple[Dropped, ...]
    tests: int
    notes: tuple[str, ...] = field(default=())

    @property
    def regressions(self) -> list[CompareRow]:
        return [r for r in self.rows if r.verdict == REGRESSION]

    @property
    def improvements(self) -> list[CompareRow]:
        return [r for r in self.rows if r.verdict == IMPROVEMENT]

    @property
    def gate_failed(self) -> bool:
        """Whether a drop of at least ``min_effect`` is significant somewhere."""
        return bool(self.regressions)

    @property
    def headline(self) -> str:
        s = self.settings
        how = f"{s.correction} {'FWER' if s.correction == HOLM else 'FDR'} {s.alpha:g}"
        drop = f", min-effect {s.min_effect:g}" if s.min_effect else ""
        if not self.tests:
            return f"UNTESTABLE: {self.new} vs {self.base}: nothing to compare"
        if self.gate_failed:
            worst = min(self.regressions, key=lambda r: r.effect)
            return (
                f"REGRESSION: {self.new} vs {self.base}: {len(self.regressions)} of "
                f"{self.tests} tests significantly lower (worst {worst.model} "
                f"{worst.dimension}={worst.key} {worst.effect:+.3f}; {how}{drop})"
            )
        better = f", {len(self.improvements)} improved" if self.improvements else ""
        return (
            f"OK: {self.new} vs {self.base}: no significant regression in "
            f"{self.tests} tests{better} ({how}{drop})"
        )


@dataclass(frozen=True)
class _Aligned:
    """One pair's paired judgments: the shared row of each (rows: the cells both sides
    have), its judge (position among the compared judges), its instance and both
    scores; ``position``: BASE cell index -> its shared row (-1: not shared)."""

    row: IntArray
    judge: IntArray
    instance: IntArray
    base: FloatArray
    new: FloatArray
    position: IntArray


def compared_judges(
    base: ScoreTable, new: ScoreTable, wanted: Sequence[str] = ()
) -> tuple[str, ...]:
    """The judges both tables have, people excepted, in BASE's order (``wanted``: those
    only; ValueError naming one either table lacks)."""
    shared = [j for j in base.judges if j in set(new.judges) and not is_person(j)]
    if not wanted:
        return tuple(shared)
    for j in wanted:
        if j not in shared:
            side = "BASE" if j not in base.judges else "NEW"
            raise ValueError(f"judge {j!r} is not among {side}'s judges")
    return tuple(dict.fromkeys(wanted))


def _align(
    base: ScoreTable, new: ScoreTable, pair: Pair, judges: Sequence[str]
) -> tuple[_Aligned, Dropped]:
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
    aligned = _Aligned(
        row=r.astype(np.int64),
        judge=j.astype(np.int64),
        instance=base.instance[rows_b][r],
        base=base.score[rows_b][:, jb][r, j],
        new=new.score[rows_n][:, jn][r, j],
        position=position,
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


@dataclass(frozen=True)
class _Unit:
    """One future row: its labels and its instance means on both sides."""

    model: str
    judge: str
    dimension: str
    key: str
    judgments: int
    base: FloatArray
    new: FloatArray


def _units(
    aligned: _Aligned, cells: IntArray, judge: int | None = None
) -> tuple[int, FloatArray, FloatArray]:
    """(paired judgments, BASE's and NEW's instance means) of the key whose BASE cells
    are ``cells`` (``judge``: that judge's judgments only)."""
    empty = np.zeros(0)
    rows = aligned.position[cells]
    rows = rows[rows >= 0]
    if len(rows) == 0:
        return 0, empty, empty
    take = np.zeros(int(aligned.position.max()) + 1, dtype=bool)
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


def _rows(units: Sequence[_Unit], settings: CompareSettings) -> list[CompareRow]:
    """The units tested as one family."""
    tests = sum(1 for u in units if len(u.base) >= 2)
    level = settings.alpha / max(tests, 1)
    tested = [_test(u, settings, level) if len(u.base) >= 2 else None for u in units]
    nan = math.nan
    p_adj = adjust([t.p_value if t else nan for t in tested], settings.correction)
    r_adj = adjust([t.p_regression if t else nan for t in tested], settings.correction)
    out = []
    for u, t, pa, ra in zip(units, tested, p_adj, r_adj, strict=True):
        if t is None:
            b = float(np.mean(u.base)) if len(u.base) else nan
            n = float(np.mean(u.new)) if len(u.new) else nan
            out.append(
                CompareRow(
                    u.model, u.judge, u.dimension, u.key, len(u.base), u.judgments,
                    b, n, n - b, nan, nan, nan, nan, nan, nan, nan, nan, UNTESTABLE,
                )
            )  # fmt: skip
            continue
        verdict = _verdict(t.effect, pa, ra, settings.alpha)
        out.append(
            CompareRow(
                u.model, u.judge, u.dimension, u.key, t.n, u.judgments, t.base, t.new,
                t.effect, t.low, t.high, t.se, t.p_value, pa, t.p_regression, ra, t.mde,
                verdict,
            )
        )  # fmt: skip
    return out


def _test(u: _Unit, settings: CompareSettings, level: float) -> PairedTest:
    """The paired t-test of one unit's instance means; when every instance moved by the
    same amount (no spread: the t statistic is undefined, common with few instances and
    integer scores) the exact sign test instead: ``0.5 ** n`` for n instances all moved
    the same way, so two instances that both dropped by half a point are no evidence."""
    t = paired_test(
        u.base,
        u.new,
        confidence=settings.confidence,
        min_effect=settings.min_effect,
        alpha=level,
        power=settings.power,
    )
    if t.se > 0:
        return t
    drop = t.effect < 0 and -t.effect >= settings.min_effect
    sign = min(1.0, 2 * 0.5**t.n) if t.effect != 0 else 1.0
    return replace(t, p_value=sign, p_regression=0.5**t.n if drop else 1.0, mde=math.nan)


def _verdict(effect: float, p_adjusted: float, p_regression_adjusted: float, alpha: float) -> str:
    if math.isnan(p_adjusted) and math.isnan(p_regression_adjusted):
        return UNTESTABLE
    if p_regression_adjusted < alpha:
        return REGRESSION
    if p_adjusted < alpha:
        return IMPROVEMENT if effect > 0 else SMALL_DROP
    return NO_CHANGE


def _members(base: ScoreTable, breakdown: Breakdown) -> list[tuple[str, str, IntArray]]:
    return list(Aggregation(base, breakdown).members())


def compare(
    base: ScoreTable,
    new: ScoreTable,
    pairs: Sequence[Pair],
    breakdown: Breakdown,
    settings: CompareSettings | None = None,
    names: tuple[str, str] = ("BASE", "NEW"),
) -> Comparison:
    """NEW against BASE for each pair of models, on every key of ``breakdown`` (resolved
    on BASE). ValueError for a model or judge a table lacks."""
    settings = CompareSettings() if settings is None else settings
    for p in pairs:
        if p.base not in base.models:
            raise ValueError(f"model {p.base!r} is not in {names[0]}")
        if p.new not in new.models:
            raise ValueError(f"model {p.new!r} is not in {names[1]}")
    judges = compared_judges(base, new, settings.judges)
    members = _members(base, breakdown)
    pooled: list[_Unit] = []
    per_judge: list[_Unit] = []
    dropped = []
    for pair in pairs:
        aligned, d = _align(base, new, pair, judges)
        dropped.append(d)
        for dimension, key, cells in members:
            k, b, n = _units(aligned, cells)
            if k:
                pooled.append(_Unit(pair.label, POOLED, dimension, key, k, b, n))
        overall = next((m for m in members if m[0] == OVERALL), None)
        if len(judges) > 1 and overall is not None:
            for j, judge in enumerate(judges):
                k, b, n = _units(aligned, overall[2], j)
                if k:
                    per_judge.append(_Unit(pair.label, judge, overall[0], overall[1], k, b, n))
    rows = _rows(pooled, settings)
    notes = list(_notes(dropped, judges))
    return Comparison(
        base=names[0],
        new=names[1],
        settings=settings,
        judges=judges,
        pairs=tuple(pairs),
        rows=tuple(rows),
        judge_rows=tuple(_rows(per_judge, settings)),
        dropped=tuple(dropped),
        tests=sum(1 for r in rows if r.verdict != UNTESTABLE),
        notes=tuple(notes),
    )


def _notes(dropped: Sequence[Dropped], judges: Sequence[str]) -> Iterator[str]:
    if not judges:
        yield "the two sides share no judge"
    for d in dropped:
        left = [
            (d.only_base, "cells only in BASE"),
            (d.only_new, "cells only in NEW"),
            (d.base_failed, "judgments failed in BASE"),
            (d.new_failed, "judgments failed in NEW"),
            (d.base_pending, "judgments pending in BASE"),
            (d.new_pending, "judgments pending in NEW"),
            (d.base_na, "judgments N/A in BASE"),
            (d.new_na, "judgments N/A in NEW"),
        ]
        said = [f"{count:,} {what}" for count, what in left if count]
        if said:
            yield f"{d.pair.label}: {d.paired:,} judgments paired; left out: {', '.join(said)}"
