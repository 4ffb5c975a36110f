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
not: :func:`report.style.length_controlled`).
"""

from __future__ import annotations

import warnings

import numpy as np

from flask_eval.report.style import FloatArray, LengthControlled, lc_design

#: AlpacaEval's ``fit_LogisticRegressionCV`` defaults (``length_controlled_*``'s kwargs)
N_SPLITS = 5
RANDOM_STATE = 123
N_CS = 10


def _logloss_continuous(
    y_true: FloatArray, y_pred: FloatArray, true_prob: FloatArray,
    true_sample_weight: FloatArray | None = None,
) -> float:  # fmt: skip
    """AlpacaEval's ``logloss_continuous``: the log-loss of the fractional preference."""
    target = np.where(y_true == 1, true_prob, 1 - true_prob)
    pred = np.clip(y_pred, 1e-15, 1 - 1e-15)
    loss = target * np.log(pred) + (1 - target) * np.log(1 - pred)
    if true_sample_weight is not None:
        loss = loss * true_sample_weight
    return float(-np.mean(loss))


def alpaca_eval_lc(
    y: FloatArray, len_model: FloatArray, len_baseline: FloatArray,
    weights: FloatArray | None = None,
) -> list[LengthControlled]:  # fmt: skip
    """LC win rates of a model against the baseline (``y``: its score in each game, 1 /
    0.5 / 0), AlpacaEval's default fit; one result per row of ``weights`` (``(R,
    games)``; None: the point estimate only). None where the cross-validation cannot run
    (fewer games than folds)."""
    y = np.asarray(y, dtype=np.float64)
    w = np.ones((1, len(y))) if weights is None else np.atleast_2d(weights)
    if len(y) < N_SPLITS:
        return [LengthControlled(None, None, None) for _ in range(w.shape[0])]
    import sklearn
    from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import GroupKFold

    design = lc_design(len_model, len_baseline)
    x = np.concatenate([design, design])  # label 1, then label 0, of every game
    labels = np.concatenate([np.ones(len(y)), np.zeros(len(y))])
    true_prob = np.concatenate([y, 1.0 - y])
    groups = np.concatenate([np.arange(len(y)), np.arange(len(y))])
    common = {"random_state": RANDOM_STATE, "dual": False, "solver": "liblinear",
              "fit_intercept": False}  # fmt: skip
    test = np.column_stack([np.zeros(len(y)), np.ones(len(y))])  # length difference 0
    out = []
    with sklearn.config_context(enable_metadata_routing=True), warnings.catch_warnings():
        warnings.simplefilter("ignore", category=FutureWarning)
        scorer = make_scorer(
            _logloss_continuous, response_method="predict_proba", greater_is_better=False
        ).set_score_request(true_sample_weight=True, true_prob=True)
        cv = LogisticRegressionCV(Cs=N_CS, l1_ratios=(1.0,), cv=GroupKFold(n_splits=N_SPLITS),
                                  scoring=scorer, **common)  # fmt: skip
        cv.set_fit_request(sample_weight=True)
        cv.fit(x, labels, sample_weight=true_prob, groups=groups, true_sample_weight=None,
               true_prob=true_prob)  # fmt: skip
        c = float(np.ravel(cv.C_)[0])
        for r in range(w.shape[0]):
            if (r == 0 and weights is None) or np.array_equal(w[r], np.ones(len(y))):
                coef = np.ravel(cv.coef_)
            else:
                game_w = np.concatenate([w[r], w[r]])
                if not np.any(game_w * true_prob > 0):
                    out.append(LengthControlled(None, None, None))
                    continue
                one = LogisticRegression(C=c, l1_ratio=1.0, **common)
                one.fit(x, labels, sample_weight=true_prob * game_w)
                coef = np.ravel(one.coef_)
            rate = float(np.mean(1.0 / (1.0 + np.exp(-(test @ coef)))))
            out.append(LengthControlled(rate, float(coef[0]), float(coef[1])))
    return out
