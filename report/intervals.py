"""Bootstrap intervals for every cell of the report, and paired model comparisons.

All cells are computed on the *same* replicates (one set of instance weights for the
whole run), so the intervals of a report are mutually consistent and any two cells can be
compared on paired replicates.

The work is organised so that every (instance, skill) pair is touched once per replicate:
cells are split into blocks of one skill and one difficulty level; a block's per-instance
sums (one column per model x judge) times the block's rows of the weights give the
replicate sums of that ``skill_difficulty`` key. Summing blocks gives ``skill``,
``difficulty``, ``ability`` and ``overall`` (sums of sums stay micro-averages). Domains,
which overlap, use per-instance sums over all skills.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from report.bootstrap import DEFAULT_CONFIDENCE, FloatArray, percentile_interval
from report.metrics import (
    ABILITY,
    DIFFICULTY,
    DOMAIN,
    KEY_SEP,
    OVERALL,
    OVERALL_KEY,
    SKILL,
    SKILL_DIFFICULTY,
)
from report.scores import SCORED, UNKNOWN_LEVEL, ScoreTable

#: (model, judge, dimension, key) -> (ci_low, ci_high)
Intervals = dict[tuple[str, str, str, str], tuple[float, float]]

Progress = Callable[[int], object]


def _no_progress(_: int) -> None:
    return None


class _Sums:
    """Per-instance sums of one group of cells: an ``(instances, 2 * models * judges)``
    matrix, scores in the first half of the columns and counts in the second."""

    def __init__(self, table: ScoreTable) -> None:
        self.table = table
        self.width = len(table.models) * len(table.judges)
        scored = table.state == SCORED
        self.total = np.where(scored, table.score, 0.0)
        self.count = scored.astype(np.float64)

    def of_cells(self, rows: np.ndarray) -> tuple[np.ndarray, FloatArray]:
        """(instance ids, per-instance sums) of the cells ``rows``."""
        t = self.table
        inst, local = np.unique(t.instance[rows], return_inverse=True)
        n_models, n_judges = len(t.models), len(t.judges)
        flat = local.reshape(-1) * n_models + t.model[rows]
        out = np.zeros((2, len(inst) * n_models, n_judges))
        np.add.at(out[0], flat, self.total[rows])
        np.add.at(out[1], flat, self.count[rows])
        # (instances, [total | count] x models x judges)
        out = out.reshape(2, len(inst), n_models * n_judges).transpose(1, 0, 2)
        return inst, out.reshape(len(inst), 2 * self.width)


@dataclass
class _Emitter:
    table: ScoreTable
    confidence: float
    out: Intervals

    def replicate_sums(self, inst: np.ndarray, sums: FloatArray, weights: FloatArray) -> FloatArray:
        """(2 * models * judges, B) replicate sums of per-instance ``sums``."""
        return np.asarray(sums.T @ weights[inst], dtype=np.float64)

    def emit(self, dimension: str, key: str, reps: FloatArray) -> None:
        width = reps.shape[0] // 2
        total, count = reps[:width], reps[width:]
        # a column without any scored judgment has zero counts in every replicate
        live = np.nonzero(count.max(axis=1, initial=0.0) > 0)[0]
        if len(live) == 0:
            return
        with np.errstate(invalid="ignore", divide="ignore"):
            den = count[live]
            means = np.where(den > 0, total[live] / np.where(den > 0, den, 1.0), np.nan)
        lo, hi = percentile_interval(means, self.confidence)
        n_judges = len(self.table.judges)
        for col, low, high in zip(live.tolist(), lo.tolist(), hi.tolist(), strict=True):
            if np.isfinite(low) and np.isfinite(high):
                model, judge = divmod(col, n_judges)
                self.out[(self.table.models[model], self.table.judges[judge], dimension, key)] = (
                    low,
                    high,
                )


def _blocks(table: ScoreTable) -> Iterator[tuple[int, list[tuple[int, np.ndarray]]]]:
    """Per skill: (skill index, [(difficulty level, cell rows)])."""
    order = np.lexsort((table.difficulty[table.instance], table.skill))
    skills = table.skill[order]
    levels = table.difficulty[table.instance][order]
    starts = np.flatnonzero(np.diff(skills, prepend=-1))
    for start, end in zip(starts, [*starts[1:], len(order)], strict=True):
        rows, lv = order[start:end], levels[start:end]
        cuts = np.flatnonzero(np.diff(lv, prepend=-1))
        parts = [(int(lv[a]), rows[a:b]) for a, b in zip(cuts, [*cuts[1:], len(rows)], strict=True)]
        yield int(skills[start]), parts


def cell_intervals(
    table: ScoreTable,
    weights: FloatArray,
    ability_of: Mapping[str, str],
    confidence: float = DEFAULT_CONFIDENCE,
    progress: Progress = _no_progress,
) -> Intervals:
    """Percentile intervals of every (model, judge, dimension, key) mean of the report.

    ``weights`` has one row per instance of ``table`` (see
    :func:`report.bootstrap.instance_weights`). Keys follow ``report.metrics``: skills,
    abilities, domains, difficulty levels as text, ``skill|level``, ``all``. Cells without
    a scored judgment get no interval. ``progress(k)`` is called after each of the
    ``len(table.skills) + len(table.domains)`` steps.
    """
    if weights.shape[0] != len(table.instances):
        raise ValueError("weights need one row per instance of the table")
    out: Intervals = {}
    if table.n_cells == 0 or weights.shape[1] == 0:
        return out
    sums = _Sums(table)
    em = _Emitter(table, confidence, out)
    shape = (2 * sums.width, weights.shape[1])
    overall = np.zeros(shape)
    by_level: dict[int, FloatArray] = {}
    by_ability: dict[str, FloatArray] = {}
    for k, parts in _blocks(table):
        skill = table.skills[k]
        acc = np.zeros(shape)
        for level, rows in parts:
            inst, block = sums.of_cells(rows)
            reps = em.replicate_sums(inst, block, weights)
            acc += reps
            if level != UNKNOWN_LEVEL:
                em.emit(SKILL_DIFFICULTY, f"{skill}{KEY_SEP}{level}", reps)
                by_level.setdefault(level, np.zeros(shape))
                by_level[level] += reps
        em.emit(SKILL, skill, acc)
        ability = ability_of[skill]
        by_ability.setdefault(ability, np.zeros(shape))
        by_ability[ability] += acc
        overall += acc
        progress(1)
    em.emit(OVERALL, OVERALL_KEY, overall)
    for ability, reps in by_ability.items():
        em.emit(ABILITY, ability, reps)
    for level, reps in sorted(by_level.items()):
        em.emit(DIFFICULTY, str(level), reps)
    member = table.domain_member[table.instance]
    for d, domain in enumerate(table.domains):
        rows = np.flatnonzero(member[:, d])
        if len(rows):
            inst, block = sums.of_cells(rows)
            em.emit(DOMAIN, domain, em.replicate_sums(inst, block, weights))
        progress(1)
    return out


@dataclass(frozen=True)
class Comparison:
    """Paired overall comparison of two models under one judge (mean A - mean B)."""

    judge: str
    model_a: str
    model_b: str
    n_instances: int
    mean_a: float | None
    mean_b: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None

    def as_dict(self) -> dict[str, object]:
        return {
            "judge": self.judge,
            "model_a": self.model_a,
            "model_b": self.model_b,
            "dimension": OVERALL,
            "key": OVERALL_KEY,
            "n_instances": self.n_instances,
            "mean_a": self.mean_a,
            "mean_b": self.mean_b,
            "diff": self.diff,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
        }


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


def comparisons(
    table: ScoreTable,
    weights: FloatArray,
    confidence: float = DEFAULT_CONFIDENCE,
    model_order: Sequence[str] = (),
) -> list[Comparison]:
    """Every pair of models under every judge, on the instances both models answered.

    An instance is answered by a model when the model has a judgment on it. The overall
    mean of each model is recomputed on those instances only, and both are resampled
    together (same replicate weights), so the interval is that of the paired difference.
    Weights with zero columns give differences without intervals.
    """
    models = [m for m in model_order if m in table.models]
    models += [m for m in table.models if m not in models]
    if len(models) < 2:
        return []
    sums = _Sums(table)
    inst, per_instance = sums.of_cells(np.arange(table.n_cells))
    full = np.zeros((len(table.instances), per_instance.shape[1]))
    full[inst] = per_instance
    answered = np.zeros((len(table.models), len(table.instances)), dtype=bool)
    answered[table.model, table.instance] = True
    n_judges, width = len(table.judges), sums.width
    cache: dict[bytes, FloatArray] = {}
    result: list[Comparison] = []
    for a_pos, a_name in enumerate(models):
        for b_name in models[a_pos + 1 :]:
            a, b = table.models.index(a_name), table.models.index(b_name)
            common = answered[a] & answered[b]
            rows = np.flatnonzero(common)
            key = common.tobytes()
            if key not in cache and weights.shape[1]:
                cache[key] = full[rows].T @ weights[rows]
            reps = cache.get(key)
            point = full[rows].sum(axis=0)
            for j, judge in enumerate(table.judges):
                ca, cb = a * n_judges + j, b * n_judges + j
                mean_a = _ratio(point[ca], point[width + ca])
                mean_b = _ratio(point[cb], point[width + cb])
                diff = None if mean_a is None or mean_b is None else mean_a - mean_b
                low = high = None
                if diff is not None and reps is not None:
                    with np.errstate(invalid="ignore", divide="ignore"):
                        d = reps[ca] / reps[width + ca] - reps[cb] / reps[width + cb]
                    d[~np.isfinite(d)] = np.nan
                    lo, hi = percentile_interval(d[None, :], confidence)
                    if np.isfinite(lo[0]):
                        low, high = float(lo[0]), float(hi[0])
                result.append(
                    Comparison(judge, a_name, b_name, len(rows), mean_a, mean_b, diff, low, high)
                )
    return result
