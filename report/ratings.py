"""Bradley-Terry ratings of models from pairwise games, as Arena-Hard computes them (pure).

Arena-Hard (``show_result.py``, ``compute_mle_elo``, v0.1) fits a logistic regression
without intercept or penalty on the battles: a row per battle with ``+ln 10`` in the
column of model A and ``-ln 10`` in that of model B, the outcome 1 when A won. Every
battle is duplicated and a tie is one win for A plus one win for B, i.e. a tie counts as
half a win for each side. The rating is ``400 * coef + 1000`` (``INIT``), shifted so that
the anchor model is at 1000. In natural-logit terms, with ``P(a beats b) = sigmoid(beta_a
- beta_b)``: ``rating = 1000 + 400 / ln(10) * (beta - beta_anchor)``.

Here the same likelihood is maximised exactly, from sufficient statistics: for every
pair of models the (weighted) number of games and the games A won (ties 0.5), so a
bootstrap replicate (instance weights) is the same fit on reweighted sums. The
log-likelihood is concave; with the anchor's parameter fixed at 0 it is strictly concave
on the models connected to the anchor, and :func:`fit` maximises it with
``scipy.optimize.minimize`` (``trust-exact``, analytic gradient and Hessian), polished by
Newton steps until every gradient component is below 1e-12 per game (the objective's
value stops resolving steps before that). Bootstrap replicates are solved together by
the same Newton iteration, warm-started at the point estimate.

When no finite maximum exists (Ford 1957: some group of models won — or lost — every game
against the rest, e.g. a model that won all its games), the maximum likelihood ratings are
infinite and Arena-Hard's numbers depend on where its solver stopped. We then add one
virtual tie (one game, half a win each) to every pair of models that played, which
makes the maximum finite, and say so (:attr:`Fit.regularized`). Models with no chain of
games to the anchor get no rating (NaN).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

SCALE = 400.0
BASE = 10.0
INIT_RATING = 1000.0
#: rating points per natural-logit unit: 400 / ln(10)
ELO_PER_LOGIT = SCALE / math.log(BASE)
#: games of the virtual tie added to every pair that played when no finite maximum exists
VIRTUAL_TIE_GAMES = 1.0
#: the fit stops when every gradient component is below this, per game played
GRADIENT_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Fit:
    """Ratings (Elo scale, the anchor at :data:`INIT_RATING`; NaN: not connected to the
    anchor) and whether virtual ties were needed for a finite maximum."""

    ratings: FloatArray
    regularized: bool


def _sigmoid(x: FloatArray) -> FloatArray:
    out: FloatArray = 0.5 * (1.0 + np.tanh(0.5 * x))
    return out


def _log_sigmoid(x: FloatArray) -> FloatArray:
    out: FloatArray = -np.logaddexp(0.0, -x)
    return out


def _component(n: int, a: IntArray, b: IntArray, games: FloatArray, anchor: int) -> IntArray:
    """Models connected to ``anchor`` by games (weight > 0), anchor included."""
    live = games > 0
    from scipy.sparse import coo_matrix  # scipy only when ratings are fitted
    from scipy.sparse.csgraph import connected_components

    graph = coo_matrix((np.ones(int(live.sum())), (a[live], b[live])), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    return np.flatnonzero(labels == labels[anchor])


def finite_maximum(n: int, a: IntArray, b: IntArray, score: FloatArray, games: FloatArray) -> bool:
    """Whether the likelihood has a finite maximum on these models (Ford's condition):
    the graph with an edge x -> y whenever x won part of a game against y is strongly
    connected."""
    won, lost = score > 0, (games - score) > 0
    rows = np.concatenate([a[won], b[lost]])
    cols = np.concatenate([b[won], a[lost]])
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    count, _ = connected_components(graph, directed=True, connection="strong")
    return bool(count == 1)


def log_likelihood(
    beta: FloatArray, a: IntArray, b: IntArray, score: FloatArray, games: FloatArray
) -> float:
    """Bradley-Terry log-likelihood (natural logits ``beta``), ties as half wins."""
    d = beta[a] - beta[b]
    return float(np.sum(score * _log_sigmoid(d) + (games - score) * _log_sigmoid(-d)))


def _maximise(
    n: int,
    a: IntArray,
    b: IntArray,
    score: FloatArray,
    games: FloatArray,
    anchor: int,
    start: FloatArray | None,
) -> FloatArray:
    """Natural-logit MLE with ``beta[anchor] = 0`` (all models connected, maximum finite)."""
    free = np.array([m for m in range(n) if m != anchor], dtype=np.int64)
    total = float(games.sum())
    if len(free) == 0 or total <= 0:
        return np.zeros(n)

    def full(theta: FloatArray) -> FloatArray:
        beta = np.zeros(n)
        beta[free] = theta
        return beta

    def objective(theta: FloatArray) -> tuple[float, FloatArray]:
        beta = full(theta)
        d = beta[a] - beta[b]
        value = -(np.sum(score * _log_sigmoid(d) + (games - score) * _log_sigmoid(-d)))
        resid = score - games * _sigmoid(d)  # d loglik / d d
        grad = np.bincount(a, resid, n) - np.bincount(b, resid, n)
        return float(value) / total, -grad[free] / total

    def hessian(theta: FloatArray) -> FloatArray:
        beta = full(theta)
        p = _sigmoid(beta[a] - beta[b])
        w = games * p * (1.0 - p)
        h = np.zeros((n, n))
        np.add.at(h, (a, a), w)
        np.add.at(h, (b, b), w)
        np.add.at(h, (a, b), -w)
        np.add.at(h, (b, a), -w)
        out: FloatArray = h[np.ix_(free, free)] / total
        return out

    x0 = np.zeros(len(free)) if start is None else np.asarray(start, dtype=np.float64)[free]
    from scipy.optimize import minimize

    result = minimize(
        objective,
        x0,
        jac=True,
        hess=hessian,
        method="trust-exact",
        options={"gtol": GRADIENT_TOLERANCE, "maxiter": 1000},
    )
    # the objective's value stops resolving steps before the gradient reaches the
    # tolerance: Newton steps on the gradient (same objective) finish the job
    polished = _newton(n, a, b, score[None, :], games[None, :], anchor, full(result.x))
    out: FloatArray = polished[0]
    return out


def fit(
    n: int,
    a: IntArray,
    b: IntArray,
    score: FloatArray,
    games: FloatArray,
    anchor: int = 0,
    start: FloatArray | None = None,
) -> Fit:
    """Bradley-Terry ratings of ``n`` models from per-pair sufficient statistics.

    ``a``, ``b`` index the two models of each pair (a != b), ``games`` is the (weighted)
    number of games they played and ``score`` the games ``a`` won, ties counted half.
    ``start`` (natural logits) warms the solver up. Anchored: ``ratings[anchor] ==
    1000``; models not connected to the anchor by games are NaN.
    """
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    score, games = np.asarray(score, dtype=np.float64), np.asarray(games, dtype=np.float64)
    if np.any(a == b) or np.any(score < 0) or np.any(score > games + 1e-9):
        raise ValueError("pairs need two different models and 0 <= score <= games")
    members = _component(n, a, b, games, anchor)
    local = np.full(n, -1, dtype=np.int64)
    local[members] = np.arange(len(members))
    keep = (local[a] >= 0) & (local[b] >= 0) & (games > 0)
    la, lb, s, g = local[a[keep]], local[b[keep]], score[keep], games[keep]
    k = len(members)
    regularized = not finite_maximum(k, la, lb, s, g)
    if regularized:
        s, g = s + VIRTUAL_TIE_GAMES / 2.0, g + VIRTUAL_TIE_GAMES
    warm = None if start is None else np.asarray(start, dtype=np.float64)[members]
    beta = _maximise(k, la, lb, s, g, int(local[anchor]), warm)
    ratings = np.full(n, np.nan)
    ratings[members] = INIT_RATING + ELO_PER_LOGIT * (beta - beta[local[anchor]])
    return Fit(ratings, regularized)


def to_logits(ratings: FloatArray) -> FloatArray:
    """Natural logits of Elo-scale ratings (NaN as 0), e.g. to warm up another fit."""
    out: FloatArray = np.nan_to_num((np.asarray(ratings) - INIT_RATING) / ELO_PER_LOGIT)
    return out


def win_probability(rating: float, other: float) -> float:
    """P(a model rated ``rating`` beats one rated ``other``) under the fit (Elo formula)."""
    return float(1.0 / (1.0 + BASE ** ((other - rating) / SCALE)))


def fit_replicates(
    n: int,
    a: IntArray,
    b: IntArray,
    scores: FloatArray,
    games: FloatArray,
    anchor: int,
    start: FloatArray | None = None,
) -> tuple[FloatArray, int]:
    """One fit per replicate: ``scores`` and ``games`` have shape ``(B, pairs)``; returns
    ratings ``(B, n)`` and how many replicates needed virtual ties.

    Each replicate's maximum is the same as :func:`fit` finds; replicates with a finite
    maximum on all models connected to the anchor are solved together by Newton's method
    (the same concave objective, stopped at the same gradient tolerance), the others one
    by one with :func:`fit`.
    """
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    scores, games = np.atleast_2d(scores), np.atleast_2d(games)
    count = scores.shape[0]
    out = np.full((count, n), np.nan)
    if count == 0:
        return out, 0
    members = _component(n, a, b, games.sum(axis=0), anchor)
    local = np.full(n, -1, dtype=np.int64)
    local[members] = np.arange(len(members))
    keep = (local[a] >= 0) & (local[b] >= 0)
    la, lb = local[a[keep]], local[b[keep]]
    k = len(members)
    fast = np.array(
        [finite_maximum(k, la, lb, scores[r, keep], games[r, keep]) for r in range(count)]
    )
    warm = np.zeros(n) if start is None else np.asarray(start, dtype=np.float64)
    if fast.any():
        beta = _newton(
            k,
            la,
            lb,
            scores[fast][:, keep],
            games[fast][:, keep],
            int(local[anchor]),
            warm[members],
        )
        ratings = INIT_RATING + ELO_PER_LOGIT * (beta - beta[:, [int(local[anchor])]])
        block = np.full((int(fast.sum()), n), np.nan)
        block[:, members] = ratings
        out[fast] = block
    regularized = 0
    for r in np.flatnonzero(~fast).tolist():
        result = fit(n, a, b, scores[r], games[r], anchor, warm)
        out[r] = result.ratings
        regularized += result.regularized
    return out, regularized


def _newton(
    k: int,
    a: IntArray,
    b: IntArray,
    s: FloatArray,
    g: FloatArray,
    anchor: int,
    start: FloatArray,
    max_iter: int = 100,
) -> FloatArray:
    """Natural-logit MLEs of ``R`` replicates at once (``s``, ``g``: ``(R, pairs)``)."""
    count = s.shape[0]
    free = np.array([m for m in range(k) if m != anchor], dtype=np.int64)
    beta = np.tile(start - start[anchor], (count, 1))
    if len(free) == 0:
        return beta
    incidence = np.zeros((len(a), k))
    incidence[np.arange(len(a)), a] = 1.0
    incidence[np.arange(len(a)), b] = -1.0
    total = np.maximum(g.sum(axis=1), 1e-300)

    def loglik(x: FloatArray) -> FloatArray:
        d = x @ incidence.T
        out: FloatArray = np.sum(s * _log_sigmoid(d) + (g - s) * _log_sigmoid(-d), axis=1)
        return out

    current = loglik(beta)
    for _ in range(max_iter):
        d = beta @ incidence.T
        p = _sigmoid(d)
        grad = ((s - g * p) @ incidence)[:, free]
        live = np.max(np.abs(grad), axis=1) / total > GRADIENT_TOLERANCE
        if not live.any():
            break
        w = (g * p * (1.0 - p))[live]
        info = np.einsum("mi,rm,mj->rij", incidence[:, free], w, incidence[:, free])
        step = np.zeros_like(beta)
        step[np.ix_(np.flatnonzero(live), free)] = np.linalg.solve(info, grad[live][..., None])[
            ..., 0
        ]
        scale = np.ones(count)
        for _halving in range(40):
            trial = beta + scale[:, None] * step
            value = loglik(trial)
            worse = value < current - 1e-12 * total
            if not worse.any():
                break
            scale[worse] /= 2.0
        beta, current = trial, value
    return beta


def pair_index(models: Sequence[str]) -> tuple[IntArray, IntArray]:
    """(a, b) of every unordered pair of ``models`` (a < b), in a stable order."""
    n = len(models)
    a, b = np.triu_indices(n, k=1)
    return a.astype(np.int64), b.astype(np.int64)
