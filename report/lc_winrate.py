"""AlpacaEval 2's length-controlled win rate as AlpacaEval reports it by default (pure).

``get_length_controlled_winrate`` (``tatsu-lab/alpaca_eval``,
``src/alpaca_eval/metrics/glm_winrate.py``, release 0.6.6) fits a logistic GLM without
intercept of the model's preference on ``tanh(delta / sd)`` and a model term
(:func:`report.style.lc_design`; the fractional preference as two rows, label 1 weighted
``y`` and label 0 weighted ``1 - y``) and reports the mean prediction with the length
term set to 0. Its fit (``fit_LogisticRegressionCV``) is scikit-learn's
``LogisticRegressionCV`` with an L1 penalty (liblinear, no intercept, ``random_state``
123) whose strength is chosen among ten (``Cs=10``: ``C`` from 1e-4 to 1e4) by 5-fold
cross-validation, the two rows of a game kept in one fold (``GroupKFold``), scored by
the log-loss of the fractional preference; the chosen ``C`` is then fitted on every
game. We make the same calls, so the figure is the one AlpacaEval prints (the tests
compare it with the package's own function). The penalty can pull the model term to
exactly 0: the LC win rate is then 0.5, as AlpacaEval reports it.

Its default GLM (``length_controlled_v1``) also has an ``instruction_difficulty``
covariate and a pull toward two "gamed" baselines, both data of AlpacaEval's own 805
instructions (downloaded from its data set) that other instances do not have: we fit its
``length_controlled_minimal`` formula, the rest of the procedure unchanged.

Intervals: each bootstrap replicate refits the L1 model with the point estimate's ``C``
(the cross-validation is not repeated per replicate, as the length normalisation is
not: :func:`report.style.length_controlled`), by :func:`l1_logistic`: liblinear's
objective minimised exactly, all replicates at once (a thousand liblinear fits would
take seconds per model).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

import numpy as np

from flask_eval.report.style import FloatArray, LengthControlled, lc_design

#: AlpacaEval's ``fit_LogisticRegressionCV`` defaults (``length_controlled_*``'s kwargs)
N_SPLITS = 5
RANDOM_STATE = 123
N_CS = 10


def _logloss_continuous(
    y_true: FloatArray,
    y_pred: FloatArray,
    true_prob: FloatArray,
    true_sample_weight: FloatArray | None = None,
) -> float:
    """AlpacaEval's ``logloss_continuous``: the log-loss of the fractional preference."""
    target = np.where(y_true == 1, true_prob, 1 - true_prob)
    pred = np.clip(y_pred, 1e-15, 1 - 1e-15)
    loss = target * np.log(pred) + (1 - target) * np.log(1 - pred)
    if true_sample_weight is not None:
        loss = loss * true_sample_weight
    return float(-np.mean(loss))


@contextmanager
def _liblinear_quiet() -> Iterator[None]:
    """The process's stderr (file descriptor 2) sent to the null device: liblinear prints
    "WARNING: class label N specified in weight is not found" from C for each fit on
    games of one outcome (a cross-validation fold may hold every game of the other); the
    fit is AlpacaEval's all the same, and the line would reach a user's terminal."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no file descriptor 2 to silence
        yield
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def _a_fold_may_lack_an_outcome(y: FloatArray) -> bool:
    """Whether a training fold may hold no game of one outcome: the games that carry it
    (won or tied, lost or tied) could all be held out in one fold."""
    held_out = -(-len(y) // N_SPLITS)
    return min(int(np.sum(y > 0.0)), int(np.sum(y < 1.0))) <= held_out


def one_outcome(y: FloatArray) -> bool:
    """Whether the model won every game or lost every game (no tie): AlpacaEval's fit then
    has no example of one outcome, and liblinear answers an artefact (0.5 for a model that
    lost every game, with a warning on stderr for each fit): no LC win rate is given."""
    y = np.asarray(y, dtype=np.float64)
    return bool(len(y)) and (bool(np.all(y == 1.0)) or bool(np.all(y == 0.0)))


def alpaca_eval_lc(
    y: FloatArray,
    len_model: FloatArray,
    len_baseline: FloatArray,
    weights: FloatArray | None = None,
) -> list[LengthControlled]:
    """LC win rates of a model against the baseline (``y``: its score in each game, 1 /
    0.5 / 0), AlpacaEval's default fit; one result per row of ``weights`` (``(R,
    games)``; None: the point estimate only). None where the cross-validation cannot run
    (fewer games than folds) and where every game had the same outcome
    (:func:`one_outcome`)."""
    y = np.asarray(y, dtype=np.float64)
    w = np.ones((1, len(y))) if weights is None else np.atleast_2d(weights)
    if len(y) < N_SPLITS or one_outcome(y):
        return [LengthControlled(None, None, None) for _ in range(w.shape[0])]
    import sklearn
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import GroupKFold

    design = lc_design(len_model, len_baseline)
    x = np.concatenate([design, design])  # label 1, then label 0, of every game
    labels = np.concatenate([np.ones(len(y)), np.zeros(len(y))])
    true_prob = np.concatenate([y, 1.0 - y])
    groups = np.concatenate([np.arange(len(y)), np.arange(len(y))])
    common = {
        "random_state": RANDOM_STATE,
        "dual": False,
        "solver": "liblinear",
        "fit_intercept": False,
    }
    test = np.column_stack([np.zeros(len(y)), np.ones(len(y))])  # length difference 0
    with sklearn.config_context(enable_metadata_routing=True), warnings.catch_warnings():
        warnings.simplefilter("ignore", category=FutureWarning)  # liblinear's penalty args
        warnings.simplefilter("ignore", category=ConvergenceWarning)  # as in AlpacaEval's fit
        scorer = make_scorer(
            _logloss_continuous, response_method="predict_proba", greater_is_better=False
        ).set_score_request(true_sample_weight=True, true_prob=True)
        cv = LogisticRegressionCV(
            Cs=N_CS, l1_ratios=(1.0,), cv=GroupKFold(n_splits=N_SPLITS), scoring=scorer, **common
        )
        cv.set_fit_request(sample_weight=True)
        with _liblinear_quiet() if _a_fold_may_lack_an_outcome(y) else nullcontext():
            cv.fit(
                x,
                labels,
                sample_weight=true_prob,
                groups=groups,
                true_sample_weight=None,
                true_prob=true_prob,
            )
        c = float(np.ravel(cv.C_)[0])
    point = np.ravel(cv.coef_)
    full = np.array_equal(w, np.ones_like(w))
    coefs = np.tile(point, (w.shape[0], 1)) if full else l1_logistic(design, y, w, c)
    if weights is None or np.array_equal(w[0], np.ones(len(y))):
        coefs[0] = point  # upstream's own fit (liblinear) for the point estimate
    out = []
    for r in range(w.shape[0]):
        if not np.any(w[r] > 0):
            out.append(LengthControlled(None, None, None))
            continue
        coef = coefs[r]
        rate = float(np.mean(1.0 / (1.0 + np.exp(-(test @ coef)))))
        out.append(LengthControlled(rate, float(coef[0]), float(coef[1])))
    return out


def _objective(
    x: FloatArray, y: FloatArray, w: FloatArray, c: float, beta: FloatArray
) -> FloatArray:
    """liblinear's L1 logistic objective ``|beta|_1 + c * sum w (y softplus(-eta) + (1 - y)
    softplus(eta))`` per replicate (``beta``: ``(R, 2)``)."""
    eta = beta @ x.T
    loss = y * np.logaddexp(0.0, -eta) + (1.0 - y) * np.logaddexp(0.0, eta)
    out: FloatArray = np.abs(beta).sum(axis=1) + c * np.sum(w * loss, axis=1)
    return out


def _lasso_2d(h: FloatArray, b: FloatArray) -> FloatArray:
    """Per replicate, the exact minimiser of ``z'Hz/2 + b'z + |z|_1`` over two
    coefficients (``h``: ``(R, 2, 2)``, ``b``: ``(R, 2)``): the best of the candidates
    with each support and sign pattern that satisfy their own signs."""
    count = len(b)
    candidates = [np.zeros((count, 2))]
    for j in range(2):
        hjj = h[:, j, j]
        shrunk = np.sign(b[:, j]) * np.maximum(np.abs(b[:, j]) - 1.0, 0.0)
        z = np.zeros((count, 2))
        z[:, j] = np.where(hjj > 1e-300, -shrunk / np.where(hjj > 1e-300, hjj, 1.0), 0.0)
        candidates.append(z)
    det = h[:, 0, 0] * h[:, 1, 1] - h[:, 0, 1] * h[:, 1, 0]
    safe = np.where(np.abs(det) > 1e-300, det, 1.0)
    rows = [np.stack([h[:, 1, 1], -h[:, 0, 1]], -1), np.stack([-h[:, 1, 0], h[:, 0, 0]], -1)]
    inverse = np.stack(rows, 1) / safe[:, None, None]
    for signs in ((1.0, 1.0), (1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0)):
        s = np.array(signs)
        z = -np.einsum("rij,rj->ri", inverse, b + s)
        valid = (np.abs(det) > 1e-300) & np.all(np.sign(z) == s, axis=1)
        candidates.append(np.where(valid[:, None], z, np.nan))
    z_all = np.stack(candidates, 1)  # (R, 7, 2)
    value = (
        0.5 * np.einsum("rki,rij,rkj->rk", z_all, h, z_all)
        + np.einsum("rki,ri->rk", z_all, b)
        + np.abs(z_all).sum(axis=2)
    )
    value = np.where(np.isnan(value), np.inf, value)
    best: FloatArray = z_all[np.arange(count), np.argmin(value, axis=1)]
    return best


def l1_logistic(design: FloatArray, y: FloatArray, w: FloatArray, c: float) -> FloatArray:
    """The minimiser of liblinear's L1 logistic objective (:func:`_objective`) at
    strength ``c`` for each row of game weights ``w`` (``(R, games)``), ``(R, 2)``
    coefficients, by proximal Newton steps (each step the exact two-coefficient lasso of
    the local quadratic, then a backtracking line search): liblinear's fit, solved to
    1e-10 instead of stopping at its tolerance (the bootstrap's many refits)."""
    beta = np.zeros((w.shape[0], 2))
    current = _objective(design, y, w, c, beta)
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(beta @ design.T)))
        grad = c * ((w * (p - y)) @ design)
        hess = c * np.einsum("ni,rn,nj->rij", design, w * p * (1.0 - p), design)
        hess += 1e-12 * np.eye(2)
        b = grad - np.einsum("rij,rj->ri", hess, beta)
        step = _lasso_2d(hess, b) - beta
        if np.max(np.abs(step)) < 1e-10:
            break
        rate = np.ones(len(beta))
        for _halving in range(40):
            trial = beta + rate[:, None] * step
            value = _objective(design, y, w, c, trial)
            worse = value > current + 1e-13 * np.maximum(1.0, np.abs(current))
            if not worse.any():
                break
            rate[worse] /= 2.0
        keep = value <= current + 1e-13 * np.maximum(1.0, np.abs(current))
        beta = np.where(keep[:, None], trial, beta)
        current = np.where(keep, value, current)
    return beta
