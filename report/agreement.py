"""Agreement between judges (and reference raters) on the judgments both made (pure).

Two judges are compared on the cells (model, instance, skill) where both gave a numeric
score. Scores take few distinct values (1-5), so every statistic is computed exactly from
the contingency table of the paired scores, which is cheap for millions of pairs:

- Pearson's r and Spearman's rho (Pearson on mid-ranks, ties averaged);
- Kendall's tau-b (concordant minus discordant pairs, corrected for ties in both);
- Krippendorff's alpha, ordinal metric, for two coders and no missing values;
- exact agreement (equal scores) and within-1 agreement (``|a - b| <= 1``), as fractions.

A statistic that is undefined (fewer than 2 pairs, or no variation) is None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from flask_eval.report.scores import SCORED, ScoreTable

IntMatrix = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

FIELDS: tuple[str, ...] = (
    "judge_a",
    "judge_b",
    "skill",
    "n",
    "pearson",
    "spearman",
    "kendall_tau_b",
    "krippendorff_alpha",
    "exact",
    "within1",
)


@dataclass(frozen=True)
class Agreement:
    """Agreement of two raters over ``n`` paired scores (``skill`` None: all skills)."""

    judge_a: str
    judge_b: str
    skill: str | None
    n: int
    pearson: float | None
    spearman: float | None
    kendall_tau_b: float | None
    krippendorff_alpha: float | None
    exact: float | None
    within1: float | None

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in FIELDS}


def _none(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _weighted_pearson(u: FloatArray, v: FloatArray, table: IntMatrix) -> float:
    """Pearson correlation of paired values (u[i], v[j]) counted ``table[i, j]`` times."""
    n = table.sum()
    rows, cols = table.sum(axis=1), table.sum(axis=0)
    du = u - (rows @ u) / n
    dv = v - (cols @ v) / n
    cov = du @ table @ dv
    var_u, var_v = rows @ (du * du), cols @ (dv * dv)
    if var_u <= 0 or var_v <= 0:
        return float("nan")
    return float(np.clip(cov / np.sqrt(var_u * var_v), -1.0, 1.0))


def _midranks(counts: IntMatrix) -> FloatArray:
    """Average rank (1-based) of each category, given how often each occurs."""
    ends = np.cumsum(counts)
    return (ends - counts + (counts + 1) / 2.0).astype(np.float64)


def _kendall_tau_b(table: IntMatrix) -> float:
    t = table.astype(np.int64)
    # below_right[i, j]: pairs strictly greater in both; below_left: greater a, smaller b
    suffix = np.cumsum(np.cumsum(t[::-1, ::-1], axis=0), axis=1)[::-1, ::-1]
    greater = np.zeros_like(t)
    greater[:-1, :-1] = suffix[1:, 1:]
    left = np.cumsum(np.cumsum(t[::-1, :], axis=0), axis=1)[::-1, :]
    smaller = np.zeros_like(t)
    smaller[:-1, 1:] = left[1:, :-1]
    concordant = int((t * greater).sum())
    discordant = int((t * smaller).sum())
    n = int(t.sum())
    pairs = n * (n - 1) // 2
    rows, cols = t.sum(axis=1), t.sum(axis=0)
    ties_a = int((rows * (rows - 1) // 2).sum())
    ties_b = int((cols * (cols - 1) // 2).sum())
    denominator = float(pairs - ties_a) * float(pairs - ties_b)
    if denominator <= 0:
        return float("nan")
    return float(np.clip((concordant - discordant) / np.sqrt(denominator), -1.0, 1.0))


def _krippendorff_ordinal(table: IntMatrix) -> float:
    """Krippendorff's alpha, ordinal metric, two coders, every unit pairable."""
    coincidence = (table + table.T).astype(np.float64)
    n_c = coincidence.sum(axis=1)
    total = n_c.sum()
    cum = np.cumsum(n_c)
    # delta^2(c, k) = (sum_{g=c..k} n_g - (n_c + n_k) / 2)^2, symmetric
    lo = np.minimum.outer(np.arange(len(n_c)), np.arange(len(n_c)))
    hi = np.maximum.outer(np.arange(len(n_c)), np.arange(len(n_c)))
    between = cum[hi] - cum[lo] + n_c[lo]
    delta = (between - (n_c[:, None] + n_c[None, :]) / 2.0) ** 2
    np.fill_diagonal(delta, 0.0)
    expected = (np.outer(n_c, n_c) * delta).sum()
    if expected <= 0 or total < 2:
        return float("nan")
    observed = (coincidence * delta).sum()
    return float(1.0 - (total - 1.0) * observed / expected)


def from_contingency(values: FloatArray, table: IntMatrix) -> dict[str, float | None]:
    """All statistics from ``table[i, j]`` = pairs with a = values[i], b = values[j]."""
    values = np.asarray(values, dtype=np.float64)
    table = np.asarray(table, dtype=np.int64)
    n = int(table.sum())
    if n == 0:
        return dict.fromkeys(FIELDS[3:]) | {"n": 0}
    diff = np.abs(values[:, None] - values[None, :])
    stats: dict[str, float | None] = {
        "n": n,
        "exact": float(np.trace(table)) / n,
        "within1": float(table[diff <= 1.0].sum()) / n,
    }
    if n < 2:
        return stats | dict.fromkeys(("pearson", "spearman", "kendall_tau_b", "krippendorff_alpha"))
    rank_a, rank_b = _midranks(table.sum(axis=1)), _midranks(table.sum(axis=0))
    stats["pearson"] = _none(_weighted_pearson(values, values, table))
    stats["spearman"] = _none(_weighted_pearson(rank_a, rank_b, table))
    stats["kendall_tau_b"] = _none(_kendall_tau_b(table))
    stats["krippendorff_alpha"] = _none(_krippendorff_ordinal(table))
    return stats


#: Above this many distinct score values, statistics are computed from the pairs directly.
MAX_CATEGORIES = 64


def _direct(a: FloatArray, b: FloatArray) -> dict[str, float | None]:
    """The statistics of many-valued paired scores, without a contingency table."""
    from scipy import stats

    n = len(a)
    stat: dict[str, float | None] = {
        "n": n,
        "exact": float(np.mean(a == b)),
        "within1": float(np.mean(np.abs(a - b) <= 1.0)),
    }
    xa, xb = a - a.mean(), b - b.mean()
    denom = np.sqrt((xa @ xa) * (xb @ xb))
    stat["pearson"] = _none(float(np.clip(xa @ xb / denom, -1, 1))) if denom > 0 else None
    ra, rb = stats.rankdata(a), stats.rankdata(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = np.sqrt((ra @ ra) * (rb @ rb))
    stat["spearman"] = _none(float(np.clip(ra @ rb / denom, -1, 1))) if denom > 0 else None
    stat["kendall_tau_b"] = _none(float(stats.kendalltau(a, b).statistic))
    # ordinal alpha = interval alpha on each value's mid-cumulative frequency
    values, codes = np.unique(np.concatenate([a, b]), return_inverse=True)
    n_c = np.bincount(codes, minlength=len(values)).astype(np.float64)
    mid = np.cumsum(n_c) - n_c / 2.0
    ma, mb = mid[codes[:n]], mid[codes[n:]]
    total = 2.0 * n
    expected = float(2.0 * total * (n_c @ (mid * mid)) - 2.0 * (n_c @ mid) ** 2)
    observed = float(2.0 * np.sum((ma - mb) ** 2))
    stat["krippendorff_alpha"] = (
        _none(1.0 - (total - 1.0) * observed / expected) if expected > 0 else None
    )
    return stat


def pair_statistics(a: FloatArray, b: FloatArray) -> dict[str, float | None]:
    """All statistics of paired scores ``a[i]``, ``b[i]`` (finite values)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(a) != len(b):
        raise ValueError("paired scores need equal lengths")
    values, codes = np.unique(np.concatenate([a, b]), return_inverse=True)
    k = len(values)
    if len(a) < 2:
        return from_contingency(values, _table(codes, len(a), k))
    if k > MAX_CATEGORIES:
        return _direct(a, b)
    return from_contingency(values, _table(codes, len(a), k))


def _table(codes: npt.NDArray[np.intp], n: int, k: int) -> IntMatrix:
    codes = codes.reshape(-1)
    flat = codes[:n] * k + codes[n:]
    return np.bincount(flat, minlength=k * k).reshape(k, k).astype(np.int64)


def _row(a: str, b: str, skill: str | None, st: dict[str, float | None]) -> Agreement:
    return Agreement(
        judge_a=a,
        judge_b=b,
        skill=skill,
        n=int(st.get("n") or 0),
        pearson=st.get("pearson"),
        spearman=st.get("spearman"),
        kendall_tau_b=st.get("kendall_tau_b"),
        krippendorff_alpha=st.get("krippendorff_alpha"),
        exact=st.get("exact"),
        within1=st.get("within1"),
    )


def agreement_rows(
    table: ScoreTable, judges: Sequence[str] = (), skill_order: Sequence[str] = ()
) -> list[Agreement]:
    """Every pair of ``judges`` (default: all of the table's), over all skills and per skill.

    Rows come pair by pair in judge order; for each pair first all skills (``skill`` None),
    then each skill with at least one paired score, in ``skill_order`` (others after it,
    alphabetically).
    """
    names = list(judges) or list(table.judges)
    cols = [table.judge_index(j) for j in names]
    scored = table.state[:, cols] == SCORED
    scores = table.score[:, cols]
    values = np.unique(scores[scored])
    k, n_skills = len(values), len(table.skills)
    rank = {name: i for i, name in enumerate(skill_order)}
    skills = sorted(range(n_skills), key=lambda s: (rank.get(table.skills[s], len(rank)), s))
    codes = np.zeros(scores.shape, dtype=np.int64)
    codes[scored] = np.searchsorted(values, scores[scored])
    # each judge's column of codes, k where it gave no score: a pair's contingency tables
    # (per skill) are one bincount over all cells, the extra row and column dropped
    kk = k + 1
    coded = np.where(scored, codes, k).T.copy()
    rows: list[Agreement] = []
    for x in range(len(names)):
        base = (table.skill * kk + coded[x]) * kk
        for y in range(x + 1, len(names)):
            if k > MAX_CATEGORIES:  # many distinct values: no contingency table
                both = scored[:, x] & scored[:, y]
                a, b, skill_of = scores[both, x], scores[both, y], table.skill[both]
                rows.append(_row(names[x], names[y], None, pair_statistics(a, b)))
                for s in skills:
                    sel = skill_of == s
                    if sel.any():
                        st = pair_statistics(a[sel], b[sel])
                        rows.append(_row(names[x], names[y], table.skills[s], st))
                continue
            counts = np.bincount(base + coded[y], minlength=n_skills * kk * kk)
            per_skill = counts.reshape(n_skills, kk, kk)[:, :k, :k]
            rows.append(
                _row(names[x], names[y], None, from_contingency(values, per_skill.sum(axis=0)))
            )
            for s in skills:
                if per_skill[s].sum():
                    st = from_contingency(values, per_skill[s])
                    rows.append(_row(names[x], names[y], table.skills[s], st))
    return rows
