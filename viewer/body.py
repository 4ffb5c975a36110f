"""What the run page shows of a report, as JSON data (the snapshot's body): the
leaderboard and breakdown tables with intervals per judge, the report's figures (the
drawings of ``report.figures``, the HTML report's too) whose cells link to the judgments
behind them, for a pairwise run its win rates and ratings, and when people rated items of
the run the People section (:func:`people`), each disagreement linking to the item's
judgments."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, urlencode

from flask_eval.report.document import Report, ranked_models
from flask_eval.report.figures import (
    agreement_figure,
    judge_figures,
    pairwise_figures,
    position_figure,
)
from flask_eval.report.metrics import (
    ABILITY,
    CAPABILITY,
    DIFFICULTY,
    DOMAIN,
    KEY_SEP,
    OVERALL,
    OVERALL_KEY,
    SKILL,
    SKILL_DIFFICULTY,
    TASK,
)
from flask_eval.report.pairwise import ALL_CRITERIA
from flask_eval.report.pairwise_bias import Position
from flask_eval.report.pairwise_report import PairwiseReport
from flask_eval.report.people_data import PAIRWISE, PeopleReport, verdict_text
from flask_eval.report.svg import Cell, PairCell

#: bump when the body's shape or its links change: older snapshots are then recomputed
VERSION = "viewer-5"
#: the breakdowns the run page tabulates, in order
TABLES = (SKILL, ABILITY, DOMAIN, DIFFICULTY, CAPABILITY)


def run_url(run: str) -> str:
    return "/runs/" + quote(run, safe="")


def judgments_url(run: str, **params: Any) -> str:
    shown = {k: str(v) for k, v in params.items() if v is not None and v != ""}
    return f"{run_url(run)}/judgments" + (f"?{urlencode(shown)}" if shown else "")


def card_url(run: str) -> str:
    """The judge card of a run with probes."""
    return f"{run_url(run)}/card"


def pairs_url(run: str, judge: str, key: str) -> str:
    """The pairs of items behind ``judge``'s effect of ``key`` on the judge card."""
    return f"{card_url(run)}/pairs?{urlencode({'judge': judge, 'key': key})}"


def cell_params(dimension: str, key: str) -> dict[str, str]:
    """The judgments filter of a report cell's (dimension, key)."""
    if dimension == SKILL:
        return {"criterion": key}
    if dimension == ABILITY:
        return {"ability": key}
    if dimension in (DOMAIN, DIFFICULTY, CAPABILITY, TASK):
        return {dimension: key}
    if dimension == SKILL_DIFFICULTY and KEY_SEP in key:
        skill, level = key.rsplit(KEY_SEP, 1)
        return {"criterion": skill, "difficulty": level}
    return {}  # overall


def cell_href(run: str) -> Callable[[Cell], str | None]:
    """The link of a figure's cell: the judgments behind it."""

    def href(cell: Cell) -> str | None:
        return judgments_url(
            run, model=cell.model, judge=cell.judge, **cell_params(cell.dimension, str(cell.key))
        )

    return href


def pair_href(run: str) -> Callable[[PairCell], str | None]:
    """The link of a win matrix's cell: the comparisons of the pair, in both orders."""

    def href(cell: PairCell) -> str | None:
        criterion = None if cell.criterion == ALL_CRITERIA else cell.criterion
        return judgments_url(
            run,
            model=cell.model_a,
            model_b=cell.model_b,
            pair="either",
            judge=cell.judge,
            criterion=criterion,
        )

    return href


def _cell(row: Any) -> list[Any]:
    return [row.mean, row.ci_low, row.ci_high, row.n, row.n_na, row.n_failed]


def render(report: Report) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run page's data (JSON) of ``report``, and its figures by judge (a part each:
    :func:`figures_key`)."""
    models = ranked_models(report.rows, report.models)
    keys: dict[str, list[str]] = {d: [] for d in (OVERALL, *TABLES)}
    cells: dict[str, dict[str, dict[str, dict[str, list[Any]]]]] = {}
    for r in report.rows:
        if r.dimension not in keys:
            continue
        if r.key not in keys[r.dimension]:
            keys[r.dimension].append(r.key)
        cells.setdefault(r.judge, {}).setdefault(r.dimension, {}).setdefault(r.model, {})[r.key] = (
            _cell(r)
        )
    href = cell_href(report.run)
    parts: dict[str, Any] = {}
    for judge in report.judges:
        parts[figures_key(judge)] = judge_figures(report, judge, href=href)
    agreement = agreement_figure(report)
    body: dict[str, Any] = {
        "run": report.run,
        "models": models,
        "judges": list(report.judges),
        "keys": keys,
        "cells": cells,
        "notes": list(report.notes),
        "costs": [c.as_dict() for c in report.costs],
        "bootstrap": report.bootstrap,
        "scale": [report.scale.low, report.scale.high],
        "pairwise": _pairwise(report.run, report.pairwise) if report.pairwise is not None else None,
        "self_consistency": [c.as_dict() for c in report.self_consistency],
        "figures": {"agreement_matrix": agreement} if agreement else {},
    }
    if report.people is not None:
        body["people"] = people(report.run, report.people)
    return body, parts


def people(run: str, section: PeopleReport) -> dict[str, Any]:
    """The People section's data (:meth:`PeopleReport.as_dict`), each disagreement with
    the link of its item's judgments (``href``) and, in pairwise grading, both verdicts
    as people read them (``judge_verdict``, ``people_verdict``: a model or "tie")."""
    data = section.as_dict()
    for shown, d in zip(data["disagreements"], section.disagreements, strict=True):
        shown["href"] = judgments_url(run, **d.item.params())
        if section.kind == PAIRWISE:
            shown["judge_verdict"] = verdict_text(d.item, d.judge_value)
            shown["people_verdict"] = verdict_text(d.item, d.people_value)
    return data


def figures_key(judge: str) -> str:
    """The part of a run page holding ``judge``'s figures."""
    return f"figures/{judge}"


def _interval(ci: Any) -> list[float] | None:
    return [float(ci[0]), float(ci[1])] if ci is not None else None


def _pairwise(run: str, pw: PairwiseReport) -> dict[str, Any]:
    criteria = list(dict.fromkeys(w.criterion for w in pw.win_rates))
    wins: dict[str, dict[str, list[list[Any]]]] = {}
    for w in pw.win_rates:
        wins.setdefault(w.judge, {}).setdefault(w.criterion, []).append(
            [w.model_a, w.model_b, w.score, w.win, w.tie, w.loss, w.n, _interval(w.score_ci)]
        )
    ratings: dict[str, dict[str, list[list[Any]]]] = {}
    for judge, criterion in dict.fromkeys((r.judge, r.criterion) for r in pw.ratings):
        ratings.setdefault(judge, {})[criterion] = [  # best first
            [r.model, r.rating, _interval(r.ci), r.win_rate, r.games]
            for r in pw.leaderboard(judge, criterion)
        ]
    figures: dict[str, dict[str, dict[str, str]]] = {}
    for judge in pw.judges:
        for criterion in criteria:
            drawn = pairwise_figures(pw, judge, criterion, href=pair_href(run))
            figures.setdefault(judge, {})[criterion] = drawn
    position = position_figure(pw)
    return {
        "models": list(pw.models),
        "judges": list(pw.judges),
        "anchor": pw.anchor,
        "criteria": criteria,
        "wins": wins,
        "ratings": ratings,
        "figures": figures,
        "position_chart": position,
        "controlled": {judge: _controlled(pw, judge) for judge in pw.judges},
        "positions": {
            judge: [_position(p) for p in pw.positions if p.judge == judge] for judge in pw.judges
        },
        "notes": list(pw.notes),
    }


def _controlled(pw: PairwiseReport, judge: str) -> list[dict[str, Any]]:
    """The report's length- and style-controlled figures of ``judge``, best first."""
    return [
        {
            "model": c.model,
            "raw_win": c.raw_win,
            "lc_win": c.lc_win,
            "lc_ci": _interval(c.lc_ci),
            "style_rating": c.style_rating,
            "style_ci": _interval(c.style_ci),
            "style_win": c.style_win,
            "games": c.games,
        }
        for c in pw.controlled_board(judge)
    ]


def _position(p: Position) -> dict[str, Any]:
    return {
        "criterion": p.criterion,
        "consistency": p.consistency,
        "consistency_ci": _interval(p.consistency_ci),
        "n_swapped": p.n_swapped,
        "first_preference": p.first_preference,
        "first_ci": _interval(p.first_preference_ci),
        "n_decisive": p.n_decisive,
    }


def leaderboard(body: Mapping[str, Any], judge: str) -> list[tuple[str, list[Any] | None]]:
    """(model, overall cell) of ``judge``, models best first."""
    of = body["cells"].get(judge, {}).get(OVERALL, {})
    return [(m, of.get(m, {}).get(OVERALL_KEY)) for m in body["models"]]
