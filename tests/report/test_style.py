"""Length- and style-controlled leaderboards against the upstream computations.

The upstream packages are not installable here (no ``alpaca-eval`` on the local index;
Arena-Hard is a script repository), so each reference below re-implements upstream's
computation step by step, as its code does it, and solves it with scikit-learn's
``LogisticRegression`` (the class upstream calls) at a tight tolerance:

- AlpacaEval: ``src/alpaca_eval/metrics/glm_winrate.py`` at tatsu-lab/alpaca_eval
  cd543a149df89434d8a54582c0151c0b945c3d20 (``_get_featurized_data``,
  ``fit_LogisticRegressionCV``'s duplicated rows, ``length_controlled_minimal``'s formula,
  without the penalty: see ``report/style.py``);
- Arena-Hard: ``utils_math.py`` (``construct_style_matrices``, ``fit_bt``) and
  ``add_markdown_info.py`` at lmarena/arena-hard-auto
  0489bf384abd010906014dec7b903f7c438eabba.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from flask_eval.report import style

sklearn = pytest.importorskip("sklearn.linear_model")

MODELS = ["base", "m1", "m2", "m3"]


def _synthetic(seed: int = 7, battles: int = 400) -> dict[str, np.ndarray]:
    """Battles among 4 models with style features; the judge likes length and bold."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, battles)
    b = (a + rng.integers(1, 4, battles)) % 4

    def draw() -> np.ndarray:
        highs = (900, 5, 12, 6)
        return np.column_stack(
            [rng.integers(50 if k == 0 else 0, h, battles) for k, h in enumerate(highs)]
        )

    style_a, style_b = draw(), draw()
    quality = np.array([0.0, 0.4, -0.3, 0.8])
    ratio = (style_a - style_b) / (style_a + style_b + 1)
    logit = quality[a] - quality[b] + 2.0 * ratio[:, 0] + 0.5 * ratio[:, 3]
    u = rng.random(battles)
    p = 1 / (1 + np.exp(-logit))
    score = np.where(u < p - 0.1, 1.0, np.where(u < p + 0.1, 0.5, 0.0))
    return {
        "a": a,
        "b": b,
        "score": score,
        "style_a": style_a.astype(float),
        "style_b": style_b.astype(float),
    }


# -- Arena-Hard reference (utils_math.py at 0489bf3) -----------------------------------


def _arena_hard_style(
    data: dict[str, np.ndarray], baseline: str
) -> tuple[dict[str, float], np.ndarray]:
    """``construct_style_matrices`` + ``fit_bt``, step by step on plain arrays, given
    each battle in both orientations at half weight."""
    # every battle in both orientations (flask-eval's canonical form, report/style.py),
    # each at half weight below
    a_names = [MODELS[i] for i in data["a"]] + [MODELS[i] for i in data["b"]]
    b_names = [MODELS[i] for i in data["b"]] + [MODELS[i] for i in data["a"]]
    flipped = {"model_a": "model_b", "model_b": "model_a", "tie": "tie"}
    winner = ["model_a" if s == 1 else "model_b" if s == 0 else "tie" for s in data["score"]]
    winner = winner + [flipped[w] for w in winner]
    data = {
        **data,
        "style_a": np.concatenate([data["style_a"], data["style_b"]]),
        "style_b": np.concatenate([data["style_b"], data["style_a"]]),
    }
    # models = pd.concat([df["model_a"], df["model_b"]]).unique()
    models = list(dict.fromkeys(a_names + b_names))
    index = {m: i for i, m in enumerate(models)}
    # df = pd.concat([df, df]): duplicate battles
    a_names, b_names, winner = a_names * 2, b_names * 2, winner * 2
    sa = np.concatenate([data["style_a"], data["style_a"]])
    sb = np.concatenate([data["style_b"], data["style_b"]])
    n, p, k = len(a_names), len(models), 4
    x = np.zeros([n, p + k])
    x[np.arange(n), [index[m] for m in a_names]] = +math.log(10)
    x[np.arange(n), [index[m] for m in b_names]] = -math.log(10)
    style_vector = np.concatenate([sa.T, sb.T])  # elements a..., then b...
    style_diff = (style_vector[:k] - style_vector[k:]).astype(float)
    style_sum = (style_vector[:k] + style_vector[k:]).astype(float) + np.ones(style_diff.shape)
    style_diff[np.flatnonzero([1, 1, 1, 1])] /= style_sum[np.flatnonzero([1, 1, 1, 1])]
    mean, std = np.mean(style_diff, axis=1), np.std(style_diff, axis=1)
    x[:, -k:] = ((style_diff - mean[:, np.newaxis]) / std[:, np.newaxis]).T
    y = np.zeros(n)
    y[np.array(winner) == "model_a"] = 1.0
    tie = np.array(winner) == "tie"
    tie[len(tie) // 2 :] = False
    y[tie] = 1.0
    # fit_bt: LogisticRegression(fit_intercept=False), default L2 with C = 1. Its default
    # solver (lbfgs) stops within ~4e-6 rating points of the optimum even at tol 1e-12;
    # an exact solver of the same objective gives the optimum itself
    lr = sklearn.LogisticRegression(
        fit_intercept=False, tol=1e-12, max_iter=100_000, solver="newton-cholesky"
    )
    lr.fit(x, y, sample_weight=np.full(n, 0.5))
    elo = 400 * lr.coef_[0] + 1000
    elo += 1114 - elo[index[baseline]]
    return {m: float(elo[index[m]]) for m in models}, lr.coef_[0][p:]


def test_style_control_matches_arena_hard() -> None:
    data = _synthetic()
    theirs, coefs = _arena_hard_style(data, "base")
    battles = style.Battles(data["a"], data["b"], data["score"], data["style_a"], data["style_b"])
    ours = style.style_control(4, battles, anchor=0)
    for m, name in enumerate(MODELS):
        # upstream's baseline sits at 1114, ours at 1000: differences and win rates agree
        assert ours.ratings[0, m] - 1000 == pytest.approx(theirs[name] - 1114, abs=1e-6)
        win = float(style.win_probability(ours.ratings[0, m]))
        assert win == pytest.approx(1 / (1 + 10 ** ((1114 - theirs[name]) / 400)), abs=1e-9)
    np.testing.assert_allclose(ours.coefs[0], coefs, atol=1e-8)
    assert ours.coefs[0, 0] > 0.3  # the judge's taste for length is found


# -- AlpacaEval reference (glm_winrate.py at cd543a1) ----------------------------------


def _alpaca_eval_lc(y_model: np.ndarray, len_model: np.ndarray, len_base: np.ndarray) -> float:
    """``_get_featurized_data`` (minimal formula) + ``fit_LogisticRegressionCV`` with
    fractional targets, step by step; unpenalised."""
    # annotations: output_1 = baseline, output_2 = model; preference in [1, 2], 0 = draw
    preference = np.where(y_model == 0.5, 0.0, 1.0 + y_model)
    std_delta_len = len_base - len_model  # len_1 - len_2
    z = std_delta_len / np.std(std_delta_len, ddof=1)  # pandas .std()
    pref = np.where(preference == 0.0, 1.5, preference) - 1
    # "np.tanh(std_delta_len) + not_gamed_baseline.astype(float) - 1"
    design = np.column_stack([np.tanh(z), np.ones_like(z)])
    # duplicated rows: label 1 weighted by the preference, label 0 by its complement
    x = np.concatenate([design, design])
    labels = np.concatenate([np.ones(len(pref)), np.zeros(len(pref))])
    weight = np.concatenate([pref, 1 - pref])
    model = sklearn.LogisticRegression(
        C=np.inf, fit_intercept=False, tol=1e-12, max_iter=100_000, solver="newton-cholesky"
    )
    model.fit(x, labels, sample_weight=weight)
    test = np.column_stack([np.zeros(len(pref)), np.ones(len(pref))])  # std_delta_len = 0
    return float(model.predict_proba(test)[:, 1].mean())


def test_length_controlled_matches_alpaca_eval() -> None:
    rng = np.random.default_rng(3)
    n = 300
    len_model, len_base = rng.integers(100, 3000, n), rng.integers(100, 3000, n)
    logit = 0.3 + 1.5 * np.tanh((len_model - len_base) / 800)
    u, p = rng.random(n), 1 / (1 + np.exp(-logit))
    y = np.where(u < p - 0.05, 1.0, np.where(u < p + 0.05, 0.5, 0.0))
    theirs = _alpaca_eval_lc(y, len_model.astype(float), len_base.astype(float))
    ours = style.length_controlled(y, len_model, len_base)[0]
    assert ours.win_rate == pytest.approx(theirs, abs=1e-6)
    assert ours.length_coef is not None and ours.length_coef < 0  # longer model: delta < 0


# -- behaviour -------------------------------------------------------------------------


def _length_biased_games(n: int = 600, seed: int = 11) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A model as good as the baseline but longer, under a judge that likes length."""
    rng = np.random.default_rng(seed)
    len_base = rng.integers(200, 1200, n).astype(float)
    len_model = len_base * rng.uniform(0.6, 2.4, n)
    p = 1 / (1 + np.exp(-2.5 * np.tanh((len_model - len_base) / 400)))
    y = (rng.random(n) < p).astype(float)
    return y, len_model, len_base


def test_a_longer_twin_loses_its_length_advantage() -> None:
    y, len_model, len_base = _length_biased_games()
    assert y.mean() > 0.65  # the raw win rate rewards the length
    lc = style.length_controlled(y, len_model, len_base)[0]
    assert lc.win_rate is not None and abs(lc.win_rate - 0.5) < 0.06


def test_a_better_model_keeps_its_advantage() -> None:
    rng = np.random.default_rng(5)
    n = 600
    len_base = rng.integers(200, 1200, n).astype(float)
    len_model = rng.integers(200, 1200, n).astype(float)  # no systematic difference
    y = (rng.random(n) < 0.75).astype(float)
    lc = style.length_controlled(y, len_model, len_base)[0]
    assert lc.win_rate is not None and lc.win_rate == pytest.approx(y.mean(), abs=0.03)


def test_style_control_evens_out_twins_of_different_lengths() -> None:
    """Three equally good models, one longer and one shorter than the baseline, under a
    judge that likes length: the raw ratings spread, the style-controlled ones do not.
    (Each battle counts in both orientations, so a model is rated at no style
    difference.)"""
    rng = np.random.default_rng(11)
    n = 1200
    b = np.repeat([1, 2], n // 2).astype(np.int64)  # long, short, each against the baseline
    a = np.zeros(n, dtype=np.int64)
    len_a = rng.integers(300, 900, n).astype(float)
    len_b = len_a * np.where(b == 1, rng.uniform(0.8, 2.5, n), rng.uniform(0.4, 1.25, n))
    p_a = 1 / (1 + np.exp(-6.0 * (len_a - len_b) / (len_a + len_b)))
    score = (rng.random(n) < p_a).astype(float)
    zeros = np.zeros((n, 3))
    raw = style.style_control(
        3, style.Battles(a, b, score, np.zeros((n, 4)), np.zeros((n, 4))), anchor=0
    )
    lengths = style.Battles(
        a, b, score, np.column_stack([len_a, zeros]), np.column_stack([len_b, zeros])
    )
    fit = style.style_control(3, lengths, anchor=0)
    raw_win = style.win_probability(raw.ratings[0])
    fit_win = style.win_probability(fit.ratings[0])
    assert raw_win[1] > 0.7 and raw_win[2] < 0.4
    assert raw_win[1] - raw_win[2] > 0.3  # the longer twin far ahead of the shorter
    assert abs(fit_win[1] - fit_win[2]) < 0.07  # even once length is a covariate
    assert fit.coefs[0, 0] > 0.5  # A's length advantage (a - b) is what the judge rewards


def test_no_finite_maximum_gives_no_lc_win_rate() -> None:
    lc = style.length_controlled(np.ones(20), np.arange(20.0) + 100, np.full(20, 50.0))
    assert lc[0].win_rate is None


def test_replicates_reweight_the_games() -> None:
    y, len_model, len_base = _length_biased_games(200)
    weights = np.vstack([np.ones(200), np.r_[np.full(100, 2.0), np.zeros(100)]])
    both = style.length_controlled(y, len_model, len_base, weights)
    alone = style.length_controlled(y, len_model, len_base)[0]
    # the batched fit is the same fit, to the last bits a vectorised sum may order apart
    for key in ("win_rate", "length_coef", "model_coef"):
        assert getattr(both[0], key) == pytest.approx(getattr(alone, key), rel=1e-12)
    assert both[1].win_rate != both[0].win_rate


def _arena_hard_markdown(text: str) -> tuple[int, int, int]:
    """``add_markdown_info.py``: code blocks' contents removed, then the counts."""
    for block in re.compile("```([^`]*)```").findall(text):
        text = text.replace(block, "")
    headers = sum(len(re.findall(rf"^#{{{k}}}\s", text, re.MULTILINE)) for k in range(1, 7))
    lists = len(re.findall(r"^\s*\d+\.\s", text, re.MULTILINE)) + len(
        re.findall(r"^\s*[-*+]\s", text, re.MULTILINE)
    )
    bold = len(re.findall(r"\*\*[^*\n]+\*\*", text)) + len(re.findall(r"__[^_\n]+__", text))
    return headers, lists, bold


def test_markdown_counts() -> None:
    text = (
        "# Title\n## Part\n### Sub\nSome **bold** and __also__.\n1. one\n2. two\n"
        "- a\n  * b\n+ c\n```\n# not a header\n- not a list\n```\n#nospace\n"
    )
    assert style.style_of(text) == (float(len(text)), 3.0, 5.0, 2.0)
    assert style.style_of(text)[1:] == tuple(float(v) for v in _arena_hard_markdown(text))


def test_style_ratings_do_not_depend_on_the_order_of_the_models() -> None:
    """An all-pairs run names the first-listed model of each pair A: the same games with
    the models listed in another order give the same style-controlled ratings (the anchor
    fixed), although A's responses are systematically longer in each order."""
    from flask_eval.report.pairwise import LOSS, TIE, WIN, Game
    from flask_eval.report.pairwise_style import controlled

    rng = np.random.default_rng(17)
    names = ["anchor", "long", "terse", "bold"]
    quality = {"anchor": 0.0, "long": 0.3, "terse": -0.2, "bold": 0.5}
    verbosity = {"anchor": 600, "long": 1600, "terse": 250, "bold": 700}
    instances = [str(i) for i in range(60)]
    texts = {
        (m, iid): "word " * int(verbosity[m] * rng.uniform(0.5, 1.5) / 5)
        + "**x** " * int(rng.integers(0, 4 if m != "bold" else 12))
        for m in names
        for iid in instances
    }
    outcome = {
        (x, y, iid): rng.random() for x in names for y in names if x < y for iid in instances
    }

    def games(order: list[str]) -> list[Game]:
        out = []
        for i, x in enumerate(order):
            for y in order[i + 1 :]:  # the pair's first-listed model is A, as in a run
                for iid in instances:
                    lo, hi = min(x, y), max(x, y)
                    logit = (
                        quality[lo]
                        - quality[hi]
                        + 1.5 * np.tanh((len(texts[(lo, iid)]) - len(texts[(hi, iid)])) / 800)
                    )
                    u = outcome[(lo, hi, iid)]
                    p = 1 / (1 + np.exp(-logit))
                    lo_score = 1.0 if u < p - 0.1 else 0.5 if u < p + 0.1 else 0.0
                    a_score = lo_score if x == lo else 1.0 - lo_score
                    result = WIN if a_score == 1 else TIE if a_score == 0.5 else LOSS
                    out.append(Game(iid, x, y, "overall", "judge", result, True, True))
        return out

    weights = np.ones((len(instances), 1))
    figures = []
    for order in (names, names[::-1], ["terse", "anchor", "bold", "long"]):
        rows = controlled(games(order), order, "anchor", instances, weights, texts)
        figures.append({c.model: c.style_rating for c in rows})
    for other in figures[1:]:
        assert set(other) == set(figures[0])
        for model, rating in figures[0].items():
            assert rating is not None and other[model] is not None
            assert other[model] == pytest.approx(rating, abs=1e-6), model
