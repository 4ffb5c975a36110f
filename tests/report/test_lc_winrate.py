"""The bootstrap's refits of AlpacaEval's L1 model (report/lc_winrate.py) minimise the
objective liblinear minimises: equal to scikit-learn's liblinear fit run to a tight
tolerance, at every penalty strength AlpacaEval's cross-validation may choose."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from flask_eval.report.lc_winrate import alpaca_eval_lc, l1_logistic
from flask_eval.report.style import lc_design

linear_model = pytest.importorskip("sklearn.linear_model")


@pytest.mark.parametrize("seed", range(6))
def test_the_replicates_fit_equals_liblinear(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(10, 120))
    design = lc_design(rng.integers(100, 3000, n), rng.integers(100, 3000, n))
    y = rng.choice([0.0, 0.5, 1.0], n, p=rng.dirichlet([1, 1, 1]))
    weights = rng.multinomial(n, np.ones(n) / n, size=4).astype(float)
    for c in np.logspace(-4, 4, 10):  # AlpacaEval's ten strengths (Cs=10)
        ours = l1_logistic(design, y, weights, float(c))
        for r, w in enumerate(weights):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                theirs = linear_model.LogisticRegression(
                    C=c,
                    l1_ratio=1.0,
                    solver="liblinear",
                    fit_intercept=False,
                    tol=1e-12,
                    max_iter=100_000,
                    random_state=123,
                ).fit(
                    np.concatenate([design, design]),
                    np.r_[np.ones(n), np.zeros(n)],
                    sample_weight=np.r_[y * w, (1 - y) * w],
                )
            np.testing.assert_allclose(ours[r], theirs.coef_[0], atol=1e-6)


def test_replicates_vary_and_the_point_is_upstreams() -> None:
    rng = np.random.default_rng(8)
    n = 80
    len_model, len_base = rng.integers(100, 3000, n), rng.integers(100, 3000, n)
    y = (rng.random(n) < 0.7).astype(float)
    weights = np.vstack([np.ones(n), rng.multinomial(n, np.ones(n) / n, size=200)])
    fits = alpaca_eval_lc(y, len_model, len_base, weights)
    assert fits[0] == alpaca_eval_lc(y, len_model, len_base)[0]
    rates = {f.win_rate for f in fits[1:]}
    assert len(rates) > 50 and all(r is not None and 0 < r < 1 for r in rates)


def test_a_model_that_won_or_lost_every_game_has_no_lc_win_rate(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """AlpacaEval's fit of one outcome only is an artefact (liblinear reports 0.5 for a
    model that lost every game, and prints a warning per fit): no figure, nothing printed."""
    rng = np.random.default_rng(4)
    n = 30
    len_model, len_base = rng.integers(100, 3000, n), rng.integers(100, 3000, n)
    weights = np.vstack([np.ones(n), rng.multinomial(n, np.ones(n) / n, size=20)])
    for outcome in (0.0, 1.0):
        fits = alpaca_eval_lc(np.full(n, outcome), len_model, len_base, weights)
        assert all(f.win_rate is None for f in fits)
    assert capfd.readouterr().err == ""


def test_a_fold_without_an_outcome_prints_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    """One loss in 30 games: the fold that holds it leaves its training games all won, of
    which liblinear warns on stderr, from C; the figure is given, and nothing printed."""
    rng = np.random.default_rng(5)
    n = 30
    y = np.ones(n)
    y[3] = 0.0
    fit = alpaca_eval_lc(y, rng.integers(100, 3000, n), rng.integers(100, 3000, n))[0]
    assert fit.win_rate is not None and 0.5 < fit.win_rate < 1
    assert capfd.readouterr().err == ""
