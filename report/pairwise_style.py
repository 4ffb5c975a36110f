"""The length- and style-controlled columns of the pairwise leaderboard (pure): per judge,
each model's AlpacaEval 2 length-controlled win rate against the anchor and its
Arena-Hard style-controlled rating (:mod:`report.style` says what each computes), on the
games the plain ratings use, pooled over criteria, with intervals over the same instance
replicates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from flask_eval.report import style
from flask_eval.report.bootstrap import DEFAULT_CONFIDENCE, FloatArray, percentile_interval
from flask_eval.report.lc_winrate import alpaca_eval_lc
from flask_eval.report.pairwise import Game

Interval = tuple[float, float] | None

NOTE = (
    "length-controlled win rate (AlpacaEval 2): the model's win rate against the anchor "
    "predicted by a logistic fit of its games on tanh(length difference / sd) and a model "
    "term, with the length difference set to 0, fitted as AlpacaEval does by default (an "
    "L1 penalty chosen by 5-fold cross-validation, which can pull the figure to exactly "
    "0.5; its minimal formula: its per-instruction difficulty is data of its own "
    "instructions); the unpenalised fit of the same formula is in the JSON and CSV rows "
    "(length_controlled_unpenalized). "
    "Style-controlled rating (Arena-Hard): the Bradley-Terry fit with the differences in "
    "length and in markdown headers, list items and bold spans as covariates (L2 penalty "
    "C = 1 as upstream; every game in both orientations, so the order of the models "
    "changes nothing); lengths in characters. Both keep the judge's taste for longer or "
    "more formatted answers out of the model's figure"
)


@dataclass(frozen=True)
class Controlled:
    """One model's controlled figures under one judge (criteria pooled)."""

    model: str
    judge: str
    anchor: str
    raw_win: float | None  # its score against the anchor (win + tie / 2)
    lc_win: float | None  # as AlpacaEval reports it (cross-validated L1 penalty)
    lc_ci: Interval
    lc_win_unpenalized: float | None  # the same formula's maximum likelihood fit
    games_vs_anchor: int
    style_rating: float | None
    style_ci: Interval
    style_win: float | None
    style_win_ci: Interval
    games: int


def _interval(values: FloatArray, confidence: float) -> Interval:
    finite = values[np.isfinite(values)]
    if len(finite) < max(2, len(values) // 2):
        return None
    lo, hi = percentile_interval(finite[None, :], confidence)
    return float(lo[0]), float(hi[0])


def _value(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def controlled(
    games: Sequence[Game],
    models: Sequence[str],
    anchor: str,
    instances: Sequence[str],
    weights: FloatArray,
    texts: Mapping[tuple[str, str], str],
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[Controlled]:
    """Per judge, every model's controlled figures; ``texts`` maps (model, instance) to
    the response (a game whose responses are missing is left out)."""
    row = {iid: i for i, iid in enumerate(instances)}
    index = {m: i for i, m in enumerate(models)}
    features = {key: style.style_of(text) for key, text in texts.items()}
    out: list[Controlled] = []
    for judge in dict.fromkeys(g.judge for g in games):
        mine = [
            g
            for g in games
            if g.judge == judge
            and (g.model_a, g.instance_id) in features
            and (g.model_b, g.instance_id) in features
        ]
        if not mine:
            continue
        # the anchor as model A whenever it plays, as in upstream's battles
        flip = np.array([g.model_b == anchor for g in mine])
        first = [g.model_b if f else g.model_a for g, f in zip(mine, flip, strict=True)]
        second = [g.model_a if f else g.model_b for g, f in zip(mine, flip, strict=True)]
        score = np.array([1.0 - g.score if f else g.score for g, f in zip(mine, flip, strict=True)])
        a = np.array([index[m] for m in first], dtype=np.int64)
        b = np.array([index[m] for m in second], dtype=np.int64)
        sa = np.array([features[(m, g.instance_id)] for m, g in zip(first, mine, strict=True)])
        sb = np.array([features[(m, g.instance_id)] for m, g in zip(second, mine, strict=True)])
        game_w = weights[[row[g.instance_id] for g in mine]].T  # (B, games)
        w = np.vstack([np.ones(len(mine)), game_w])
        fit = style.style_control(len(models), style.Battles(a, b, score, sa, sb), index[anchor], w)
        played = np.bincount(a, minlength=len(models)) + np.bincount(b, minlength=len(models))
        for m, name in enumerate(models):
            vs = (a == index[anchor]) & (b == m)
            lc = alpaca_eval_lc(1.0 - score[vs], sb[vs, 0], sa[vs, 0], w[:, vs])
            plain = style.length_controlled(1.0 - score[vs], sb[vs, 0], sa[vs, 0])[0]
            lc_point = lc[0].win_rate if name != anchor else 0.5
            lc_reps = np.array([np.nan if r.win_rate is None else r.win_rate for r in lc[1:]])
            rating = _value(fit.ratings[0, m])
            win = None if rating is None else float(style.win_probability(np.array(rating)))
            reps = fit.ratings[1:, m]
            out.append(
                Controlled(
                    model=name,
                    judge=judge,
                    anchor=anchor,
                    raw_win=float(np.mean(1.0 - score[vs])) if vs.any() else None,
                    lc_win=lc_point if vs.any() or name == anchor else None,
                    lc_ci=_interval(lc_reps, confidence) if name != anchor else None,
                    lc_win_unpenalized=(plain.win_rate if name != anchor else 0.5)
                    if vs.any() or name == anchor
                    else None,
                    games_vs_anchor=int(vs.sum()),
                    style_rating=rating,
                    style_ci=_interval(reps, confidence) if name != anchor else None,
                    style_win=win,
                    style_win_ci=None if name == anchor else _win_ci(reps, confidence),
                    games=int(played[m]),
                )
            )
    return out


def _win_ci(reps: FloatArray, confidence: float) -> Interval:
    interval = _interval(reps, confidence)
    if interval is None:
        return None
    lo, hi = style.win_probability(np.array(interval))
    return float(lo), float(hi)
