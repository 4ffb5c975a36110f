"""The statistics of the People section, for many bootstrap replicates at once (pure numpy).

A replicate of paired scores is a contingency table (``table[b, i, j]``: how often the
pair (values[i], values[j]) was drawn in replicate b), so Pearson's r, Spearman's rho and
Kendall's tau-b of every replicate are whole-array products over a ``(B, K, K)`` stack of
tables, the same formulas :mod:`report.agreement` applies to one table (its
:func:`~report.agreement.from_contingency` gives the point estimates).

Krippendorff's alpha of many raters with missing ratings is computed from the
coincidence matrix (Krippendorff 2011, "Computing Krippendorff's alpha-reliability"):
a unit (an item) with ``m >= 2`` ratings adds ``n_c n_k / (m - 1)`` to cell (c, k) for
each ordered pair of its ratings from different raters (``n_c (n_c - 1) / (m - 1)`` on
the diagonal); units with fewer than two ratings are not pairable and add nothing. Then
``alpha = 1 - (n - 1) sum(o_ck d_ck) / sum(n_c n_k d_ck)`` with the metric's squared
difference ``d``: nominal (0 when equal, else 1), ordinal (``(sum_{g=c..k} n_g - (n_c +
n_k) / 2)^2``, from the replicate's own value frequencies) or interval (``(v_c - v_k)^2``).
Undefined statistics (no variation, fewer than two pairs) are NaN.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Krippendorff's metrics the People section reports
NOMINAL, ORDINAL, INTERVAL = "nominal", "ordinal", "interval"
METRICS = (NOMINAL, ORDINAL, INTERVAL)


def replicate_tables(
    pairs: IntArray, instance: IntArray, weights: FloatArray, k: int
) -> FloatArray:
    """The ``(B, k, k)`` contingency tables of paired codes ``pairs`` (``i * k + j``) in each
    replicate of ``weights`` (``(instances, B)``: how often each instance was drawn; item n
    belongs to instance ``instance[n]``)."""
    replicates = weights.shape[1]
    tables = np.zeros((replicates, k * k))
    if len(pairs) == 0:
        return tables.reshape(replicates, k, k)
    # only the pairs that occur, and only the instances they occur in
    present, code = np.unique(pairs, return_inverse=True)
    used, local = np.unique(instance, return_inverse=True)
    p = len(present)
    counts = np.bincount(local.reshape(-1) * p + code.reshape(-1), minlength=len(used) * p)
    per_instance = counts.reshape(len(used), p).astype(np.float64)
    tables[:, present] = (per_instance.T @ weights[used]).T
    return tables.reshape(replicates, k, k)


def midranks(counts: FloatArray) -> FloatArray:
    """Average rank (1-based) of each category of each row of ``counts`` (``(B, K)``)."""
    ends = np.cumsum(counts, axis=1)
    return ends - counts + (counts + 1.0) / 2.0


def pearson(u: FloatArray, v: FloatArray, tables: FloatArray) -> FloatArray:
    """Pearson's r of each table: pairs (u[b, i], v[b, j]) counted ``tables[b, i, j]`` times
    (``u`` and ``v`` are ``(B, K)``, or ``(K,)`` for every replicate)."""
    u = np.broadcast_to(u, tables.shape[:2])
    v = np.broadcast_to(v, tables.shape[:2])
    n = tables.sum(axis=(1, 2))
    rows, cols = tables.sum(axis=2), tables.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        du = u - ((rows * u).sum(axis=1) / n)[:, None]
        dv = v - ((cols * v).sum(axis=1) / n)[:, None]
        cov = np.einsum("bi,bij,bj->b", du, tables, dv)
        var_u, var_v = (rows * du * du).sum(axis=1), (cols * dv * dv).sum(axis=1)
        r = cov / np.sqrt(var_u * var_v)
    return np.where((var_u > 0) & (var_v > 0), np.clip(r, -1.0, 1.0), np.nan)


def spearman(tables: FloatArray) -> FloatArray:
    """Spearman's rho of each table (Pearson's r of the mid-ranks, ties averaged)."""
    return pearson(midranks(tables.sum(axis=2)), midranks(tables.sum(axis=1)), tables)


def kendall_tau_b(tables: FloatArray) -> FloatArray:
    """Kendall's tau-b of each table (concordant minus discordant pairs, corrected for
    ties in both scores)."""
    t = tables
    suffix = np.cumsum(np.cumsum(t[:, ::-1, ::-1], axis=1), axis=2)[:, ::-1, ::-1]
    greater = np.zeros_like(t)
    greater[:, :-1, :-1] = suffix[:, 1:, 1:]
    left = np.cumsum(np.cumsum(t[:, ::-1, :], axis=1), axis=2)[:, ::-1, :]
    smaller = np.zeros_like(t)
    smaller[:, :-1, 1:] = left[:, 1:, :-1]
    concordant = (t * greater).sum(axis=(1, 2))
    discordant = (t * smaller).sum(axis=(1, 2))
    n = t.sum(axis=(1, 2))
    pairs = n * (n - 1.0) / 2.0
    rows, cols = t.sum(axis=2), t.sum(axis=1)
    ties_a = (rows * (rows - 1.0) / 2.0).sum(axis=1)
    ties_b = (cols * (cols - 1.0) / 2.0).sum(axis=1)
    denominator = (pairs - ties_a) * (pairs - ties_b)
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = (concordant - discordant) / np.sqrt(denominator)
    return np.where(denominator > 0, np.clip(tau, -1.0, 1.0), np.nan)


def within(values: FloatArray, tables: FloatArray, distance: float = 1.0) -> FloatArray:
    """The share of each table's pairs at most ``distance`` apart."""
    close = np.abs(values[:, None] - values[None, :]) <= distance
    n = tables.sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        share = (tables * close).sum(axis=(1, 2)) / n
    return np.where(n > 0, share, np.nan)


# -- Krippendorff's alpha ------------------------------------------------------------------


def unit_coincidences(counts: FloatArray) -> FloatArray:
    """Each pairable unit's coincidences, ``(units, K * K)``, from its value counts
    (``(units, K)``: how many of its raters gave each value); units with fewer than two
    ratings get zeros."""
    m = counts.sum(axis=1)
    outer = counts[:, :, None] * counts[:, None, :]
    k = counts.shape[1]
    outer[:, np.arange(k), np.arange(k)] -= counts
    scale = np.where(m >= 2, 1.0 / np.maximum(m - 1.0, 1.0), 0.0)
    return (outer * scale[:, None, None]).reshape(len(counts), k * k)


def _squared_differences(values: FloatArray, n_c: FloatArray, metric: str) -> FloatArray:
    """``(B, K, K)`` squared differences of the metric (ordinal: from each row of
    ``n_c``, the replicate's value frequencies)."""
    b, k = n_c.shape
    if metric == NOMINAL:
        return np.broadcast_to(1.0 - np.eye(k), (b, k, k))
    if metric == INTERVAL:
        return np.broadcast_to((values[:, None] - values[None, :]) ** 2, (b, k, k))
    if metric != ORDINAL:
        raise ValueError(f"unknown metric {metric!r}: use one of {', '.join(METRICS)}")
    cum = np.cumsum(n_c, axis=1)
    idx = np.arange(k)
    lo, hi = np.minimum.outer(idx, idx), np.maximum.outer(idx, idx)
    between = cum[:, hi] - cum[:, lo] + n_c[:, lo]
    delta = (between - (n_c[:, :, None] + n_c[:, None, :]) / 2.0) ** 2
    delta[:, idx, idx] = 0.0
    return delta


def alpha(coincidences: FloatArray, values: FloatArray, metric: str) -> FloatArray:
    """Krippendorff's alpha of each coincidence matrix (``(B, K, K)``) over ``values``."""
    n_c = coincidences.sum(axis=2)
    total = n_c.sum(axis=1)
    delta = _squared_differences(values, n_c, metric)
    observed = (coincidences * delta).sum(axis=(1, 2))
    expected = np.einsum("bi,bij,bj->b", n_c, delta, n_c)
    with np.errstate(invalid="ignore", divide="ignore"):
        a = 1.0 - (total - 1.0) * observed / expected
    return np.where((expected > 0) & (total >= 2), a, np.nan)


def alpha_replicates(
    counts: FloatArray, values: FloatArray, metric: str, weights: FloatArray | None = None
) -> FloatArray:
    """Alpha of units with value ``counts`` (``(units, K)``), once with every unit
    (``weights`` None: shape ``(1,)``) or per replicate of unit ``weights`` (``(units,
    B)``: how often each unit was drawn)."""
    k = counts.shape[1]
    per_unit = unit_coincidences(counts)
    stacked = per_unit.sum(axis=0)[None, :] if weights is None else (per_unit.T @ weights).T
    return alpha(stacked.reshape(-1, k, k), values, metric)


def unit_draws(counts: FloatArray, replicates: int, seed: int) -> tuple[FloatArray, FloatArray]:
    """Bootstrap replicates of units (resampled with replacement, as many as there are),
    drawn by kind: units with the same value counts add the same coincidences, so a
    replicate is how often each distinct kind was drawn, a multinomial draw of the
    units' number with the kinds' shares (the same distribution as drawing units one by
    one, in ``(B, kinds)`` numbers instead of ``(B, units)``). Returns the kinds' value
    counts (sorted: the same units in any order give the same draws) and the draws
    ``(kinds, B)``, for :func:`alpha_replicates`."""
    kinds, inverse = np.unique(counts, axis=0, return_inverse=True)
    share = np.bincount(inverse.reshape(-1), minlength=len(kinds)) / len(counts)
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(len(counts), share, size=replicates).astype(np.float64)
    return kinds, np.ascontiguousarray(draws.T)
