"""Length- and style-controlled leaderboards (pure): AlpacaEval 2's length-controlled win
rate and Arena-Hard's style control, each the upstream formula on our games.

**AlpacaEval 2, length-controlled win rate** (``tatsu-lab/alpaca_eval``,
``src/alpaca_eval/metrics/glm_winrate.py`` at cd543a1). For one model against the
baseline, a logistic GLM without intercept fits the model's preference ``y`` (1 won, 0.5
tie, 0 lost; upstream's ``preference - 1`` with a draw at 0.5) on ``tanh(delta / sd)``
and a constant (the model term), where ``delta = len(baseline) - len(model)`` in
characters (``str.len()``) and ``sd`` its sample standard deviation (pandas, ddof 1).
The fractional ``y`` is fitted as upstream does: each row twice, label 1 weighted ``y``
and label 0 weighted ``1 - y``, i.e. the cross-entropy ``y log p + (1 - y) log(1 - p)``.
The LC win rate is the mean prediction with the length term set to 0.

Upstream's default GLM (``length_controlled_v1``) adds an ``instruction_difficulty``
covariate, a fixed value per AlpacaEval instruction downloaded from its data set
(fitted across the many models of its leaderboard), and pulls the fit toward its
"gamed" baselines' annotations (weight 0.2); both are data of AlpacaEval's 805
instructions that our instances do not have. We fit its ``length_controlled_minimal``
formula (length and model terms), so the LC win rate is ``sigmoid(model term)``.
Upstream chooses an L1 penalty by 5-fold cross-validation over ten strengths
(``LogisticRegressionCV``, liblinear): that figure, the one AlpacaEval reports, is
:func:`report.lc_winrate.alpaca_eval_lc`. :func:`length_controlled` here maximises the
likelihood without penalty (the limit of upstream's weakest penalties), the figure shown
beside it. When no finite maximum exists (e.g. the model won every game, or won exactly
when it was the longer) there is no unpenalised LC win rate (None).

**Arena-Hard, style control** (``lmarena/arena-hard-auto``, ``utils_math.py`` and
``show_result.py`` at 0489bf3, the v0.1 code whose ``compute_mle_elo``
:mod:`report.ratings` reproduces; the same ``construct_style_matrices`` as Chatbot
Arena's ``compute_style_control`` in FastChat's ``fastchat/serve/monitor/elo_analysis.py``).
The Bradley-Terry design (``+ln 10`` for model A, ``-ln 10`` for B, each battle twice, a
tie once as A's win and once as B's) gets four more columns: for length and the counts of
markdown headers, list items and bold spans, ``(a - b) / (a + b + 1)``, standardised over
the battles (mean 0, population sd 1). The fit is scikit-learn's default
``LogisticRegression(fit_intercept=False)``: an L2 penalty ``||w||^2 / 2`` against the
summed log-loss (C = 1), on every model's and style coefficient. Ratings are ``400 * w``
shifted to put the anchor at 1000 (upstream puts its baseline at 1114; its leaderboard
shows the win rate against the baseline, which does not depend on the shift). Markdown is
counted with upstream's regular expressions (``add_markdown_info.py``) after the same
removal of code-block contents. Upstream counts length in tiktoken tokens
(``gpt-3.5-turbo``'s encoding); we count characters: the feature is a ratio, and no
tokenizer is a dependency of the report. A style column constant over the battles
(upstream: 0 / 0) is set to 0 and gets a 0 coefficient.

Which model of a battle is "A" is arbitrary (our all-pairs runs name the pair's
first-listed model A). Upstream's centring subtracts the battles' mean style difference,
a constant "being model A" term that the models absorb in proportion to how often they
were A: in Chatbot Arena the side is random, so that mean is near 0; with a fixed order
it would move ratings with the order of the models. We therefore fit every battle in
both orientations, each at half weight (A against B, and B against A with the score
``1 - s`` and the style difference negated): the mean over both is exactly 0 and the
penalised likelihood is that of upstream's fit on the two orientations with
``sample_weight = 1/2``, so the ratings do not depend on the models' order. As the
log-likelihood of a battle is the same in either orientation, the fit keeps one row per
battle and only the standardisation sees both (:func:`style_columns`). A model's rating
is then its strength at no style difference.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

LN_BASE = math.log(10.0)
SCALE = 400.0
INIT_RATING = 1000.0
#: style features, in upstream's order
STYLE_FEATURES = ("length", "headers", "lists", "bold")
#: scikit-learn's default inverse penalty, which Arena-Hard's ``fit_bt`` keeps
STYLE_C = 1.0
#: Newton stops when the largest gradient component is below this, per unit of weight
TOLERANCE = 1e-12
#: a coefficient beyond this (natural logits) means the likelihood has no finite maximum
DIVERGED = 30.0

_CODE = re.compile("```([^`]*)```")
_HEADERS = [re.compile(rf"^#{{{k}}}\s", re.MULTILINE) for k in range(1, 7)]
_LISTS = [re.compile(r"^\s*\d+\.\s", re.MULTILINE), re.compile(r"^\s*[-*+]\s", re.MULTILINE)]
_BOLD = [re.compile(r"\*\*[^*\n]+\*\*"), re.compile(r"__[^_\n]+__")]


def style_of(text: str) -> tuple[float, float, float, float]:
    """(length in characters, headers, list items, bold spans) of a response, the
    markdown counted as Arena-Hard does: the contents of each code block removed first
    (its fences stay, as upstream's ``remove_pattern`` leaves them)."""
    rest = text
    for block in _CODE.findall(text):
        rest = rest.replace(block, "")

    def count(patterns: list[re.Pattern[str]]) -> float:
        return float(sum(len(p.findall(rest)) for p in patterns))

    return float(len(text)), count(_HEADERS), count(_LISTS), count(_BOLD)


def _sigmoid(x: FloatArray) -> FloatArray:
    out: FloatArray = 0.5 * (1.0 + np.tanh(0.5 * x))
    return out


# -- AlpacaEval 2: length-controlled win rate ------------------------------------------


@dataclass(frozen=True)
class LengthControlled:
    """The LC win rate (None: no finite maximum) and the fitted coefficients (natural
    logits) of ``tanh(delta / sd)`` and of the model term."""

    win_rate: float | None
    length_coef: float | None
    model_coef: float | None


def lc_design(len_model: FloatArray, len_baseline: FloatArray) -> FloatArray:
    """Columns ``tanh(delta / sd)`` and 1, ``delta = len_baseline - len_model`` with ``sd``
    its sample standard deviation (a constant or single ``delta``: the column is 0)."""
    delta = np.asarray(len_baseline, dtype=np.float64) - np.asarray(len_model, dtype=np.float64)
    sd = float(np.std(delta, ddof=1)) if len(delta) > 1 else 0.0
    z = np.tanh(delta / sd) if sd > 0 else np.zeros_like(delta)
    return np.column_stack([z, np.ones_like(delta)])


def _logistic_newton(
    x: FloatArray, y: FloatArray, w: FloatArray, l2: float = 0.0, scale: float = 1.0
) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    """Maximise ``scale * sum w (y log p + (1-y) log(1-p)) - l2 ||beta||^2 / 2`` with ``p =
    sigmoid(x beta)`` for ``R`` weight vectors at once (``w``: ``(R, N)``); returns
    ``(R, d)`` coefficients and, per replicate, whether a finite maximum was reached."""
    count, d = w.shape[0], x.shape[1]
    beta = np.zeros((count, d))
    total = np.maximum(w.sum(axis=1), 1e-300)
    ridge = l2 * np.eye(d)

    def objective(b: FloatArray) -> FloatArray:
        eta = b @ x.T
        ll = y * -np.logaddexp(0.0, -eta) + (1.0 - y) * -np.logaddexp(0.0, eta)
        out: FloatArray = scale * np.sum(w * ll, axis=1) - 0.5 * l2 * np.sum(b * b, axis=1)
        return out

    current = objective(beta)
    done = np.zeros(count, dtype=bool)
    for _ in range(200):
        p = _sigmoid(beta @ x.T)
        grad = scale * ((w * (y - p)) @ x) - l2 * beta
        done = np.max(np.abs(grad), axis=1) / (scale * total + l2) <= TOLERANCE
        done |= np.max(np.abs(beta), axis=1) > DIVERGED
        if done.all():
            break
        live = np.flatnonzero(~done)
        info = scale * np.einsum("ni,rn,nj->rij", x, (w * p * (1.0 - p))[live], x) + ridge
        step = np.zeros_like(beta)
        try:
            step[live] = np.linalg.solve(info, grad[live][..., None])[..., 0]
        except np.linalg.LinAlgError:  # a singular design: the direction that moves
            step[live] = np.einsum("rij,rj->ri", np.linalg.pinv(info), grad[live])
        rate = np.ones(count)
        for _halving in range(50):
            trial = beta + rate[:, None] * step
            value = objective(trial)
            worse = value < current - 1e-12 * (scale * total)
            if not worse.any():
                break
            rate[worse] /= 2.0
        beta, current = trial, value
    finite: npt.NDArray[np.bool_] = np.asarray(np.max(np.abs(beta), axis=1) <= DIVERGED)
    return beta, finite & done


def length_controlled(
    y: FloatArray,
    len_model: FloatArray,
    len_baseline: FloatArray,
    weights: FloatArray | None = None,
) -> list[LengthControlled]:
    """LC win rates of a model against the baseline from its games (``y``: its score in
    each, 1 / 0.5 / 0) and the two responses' lengths; one result per row of ``weights``
    (``(R, games)``; None: the point estimate only). The length normalisation is the
    point estimate's in every replicate, as Arena-Hard's bootstrap keeps its features."""
    y = np.asarray(y, dtype=np.float64)
    x = lc_design(len_model, len_baseline)
    w = np.ones((1, len(y))) if weights is None else np.atleast_2d(weights)
    if len(y) == 0:
        return [LengthControlled(None, None, None) for _ in range(w.shape[0])]
    if not np.any(x[:, 0]):  # no length difference to control: the model term alone
        x = x[:, 1:]
    beta, finite = _logistic_newton(x, y, w)
    out = []
    for r in range(w.shape[0]):
        if not finite[r]:
            out.append(LengthControlled(None, None, None))
            continue
        length = float(beta[r, 0]) if x.shape[1] == 2 else 0.0
        model = float(beta[r, -1])
        out.append(LengthControlled(float(_sigmoid(np.array(model))), length, model))
    return out


# -- Arena-Hard: style control ---------------------------------------------------------


@dataclass(frozen=True)
class StyleFit:
    """Style-controlled ratings (Elo scale, anchor at 1000; NaN: no games, or no chain of
    games to the anchor) and the style coefficients (:data:`STYLE_FEATURES` order),
    per replicate: ``ratings`` ``(R, n)``, ``coefs`` ``(R, 4)``."""

    ratings: FloatArray
    coefs: FloatArray


def style_columns(style_a: FloatArray, style_b: FloatArray) -> FloatArray:
    """``(a - b) / (a + b + 1)`` per feature, standardised over both orientations of every
    battle (A against B and B against A: mean 0 by construction, population sd 1; a
    constant column is 0). Which model of a battle is A then changes no rating."""
    a, b = np.asarray(style_a, dtype=np.float64), np.asarray(style_b, dtype=np.float64)
    ratio = (a - b) / (a + b + 1.0)
    both = np.concatenate([ratio, -ratio])  # each battle as A-B and as B-A
    sd = np.std(both, axis=0)
    safe = np.where(sd > 0, sd, 1.0)
    out: FloatArray = np.where(sd > 0, (ratio - both.mean(axis=0)) / safe, 0.0)
    return out


def _connected(n: int, a: IntArray, b: IntArray, w: FloatArray, anchor: int) -> FloatArray:
    """(R, n): 1 where the model is linked to the anchor by battles of positive weight."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    out = np.zeros((w.shape[0], n))
    for r in range(w.shape[0]):
        live = w[r] > 0
        graph = coo_matrix((np.ones(int(live.sum())), (a[live], b[live])), shape=(n, n))
        _, labels = connected_components(graph, directed=False)
        played = np.bincount(a[live], minlength=n) + np.bincount(b[live], minlength=n) > 0
        out[r] = (labels == labels[anchor]) & played
    return out


@dataclass(frozen=True)
class Battles:
    """Games between models, one entry each: model ``a[i]`` against ``b[i]``, ``score``
    a's result (1 / 0.5 / 0), ``style_a`` and ``style_b`` the ``(battles, 4)`` features
    of each side's response (:func:`style_of`)."""

    a: IntArray
    b: IntArray
    score: FloatArray
    style_a: FloatArray
    style_b: FloatArray


def style_control(
    n: int,
    battles: Battles,
    anchor: int,
    weights: FloatArray | None = None,
    c: float = STYLE_C,
) -> StyleFit:
    """Style-controlled Bradley-Terry ratings of ``n`` models from ``battles``, one fit
    per row of ``weights`` (``(R, battles)``; None: the point estimate only)."""
    a, b = np.asarray(battles.a, dtype=np.int64), np.asarray(battles.b, dtype=np.int64)
    score = np.asarray(battles.score, dtype=np.float64)
    style_a, style_b = battles.style_a, battles.style_b
    k = len(STYLE_FEATURES)
    x = np.zeros((len(a), n + k))
    x[np.arange(len(a)), a] = LN_BASE
    x[np.arange(len(a)), b] = -LN_BASE
    if len(a):
        x[:, n:] = style_columns(style_a, style_b)
    w = np.ones((1, len(a))) if weights is None else np.atleast_2d(weights)
    # each battle is two rows of the upstream design (a tie: one won, one lost), i.e.
    # twice the cross-entropy with target ``score``
    beta, _ = _logistic_newton(x, score, w, l2=1.0, scale=2.0 * c)
    ratings = SCALE * (beta[:, :n] - beta[:, [anchor]]) + INIT_RATING
    ratings[_connected(n, a, b, w, anchor) == 0] = np.nan
    return StyleFit(ratings, beta[:, n:])


def win_probability(rating: FloatArray, anchor: float = INIT_RATING) -> FloatArray:
    """P(beats the anchor) of Elo-scale ratings."""
    out: FloatArray = 1.0 / (1.0 + 10.0 ** ((anchor - np.asarray(rating)) / SCALE))
    return out
