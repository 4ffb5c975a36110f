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

from flask_eval.report.breakdown import Aggregation, Breakdown
from flask_eval.report.compare_align import Dropped, Pair, align, compared_judges, key_means
from flask_eval.report.metrics import OVERALL
from flask_eval.report.paired import HOLM, METHODS, PairedTest, adjust, paired_test
from flask_eval.report.scores import FloatArray, IntArray, ScoreTable

__all__ = [
    "CompareRow",
    "CompareSettings",
    "Comparison",
    "Dropped",
    "Pair",
    "compare",
    "compared_judges",
]

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
class _Unit:
    """One future row: its labels and its instance means on both sides."""

    model: str
    judge: str
    dimension: str
    key: str
    judgments: int
    base: FloatArray
    new: FloatArray


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
        aligned, d = align(base, new, pair, judges)
        dropped.append(d)
        for dimension, key, cells in members:
            k, b, n = key_means(aligned, cells)
            if k:
                pooled.append(_Unit(pair.label, POOLED, dimension, key, k, b, n))
        overall = next((m for m in members if m[0] == OVERALL), None)
        if len(judges) > 1 and overall is not None:
            for j, judge in enumerate(judges):
                k, b, n = key_means(aligned, overall[2], j)
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
