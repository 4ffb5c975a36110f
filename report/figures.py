"""Which figures a report has, each drawn once by :mod:`report.svg`: the HTML report
embeds them and writes each as an ``.svg`` file (:func:`all_figures`), the viewer serves
the same drawings with links to the judgments behind each mark (:func:`judge_figures`,
:func:`pairwise_figures`, :func:`agreement_figure`, :func:`position_figure`) (pure).

Per judge of a report with scores: the radar of the skills (of the capabilities, when
the instances carry them), the abilities' bars, the domain heatmap, the difficulty curves
and, with capabilities, the capability heatmap; then the agreement matrix of the judges.
Per judge of a pairwise report: the win-rate matrix and the ratings; then position
consistency per judge.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask_eval.report import svg
from flask_eval.report.document import Report
from flask_eval.report.pairwise import ALL_CRITERIA
from flask_eval.report.pairwise_report import PairwiseReport

Draw = Callable[..., str]

#: the figures drawn per judge of a report with scores: name (the viewer's
#: ``data-figure``) -> (file kind, caption, drawing function), in the report's order
JUDGE_FIGURES: dict[str, tuple[str, str, Draw]] = {
    "radar": ("radar", "radar", svg.radar),
    "ability_bars": ("abilities", "Abilities", svg.ability_bars),
    "domain_heatmap": ("domains", "Domains", svg.domain_heatmap),
    "difficulty_curves": ("difficulty", "Score vs difficulty", svg.difficulty_curves),
    "capability_heatmap": ("capabilities", "Capabilities x models", svg.capability_heatmap),
}


@dataclass(frozen=True)
class Figure:
    """One drawn figure of a report: its viewer name, file stem, caption and SVG."""

    name: str  # "radar", "win_matrix", ... (JUDGE_FIGURES' keys and the pairwise ones)
    stem: str  # its file in the report's folder, without ".svg": "radar-01-judge", ...
    title: str
    svg: str
    judge: str | None = None

    @property
    def kind(self) -> str:
        """The report section's figure kind: the stem up to its first dash."""
        return self.stem.split("-", 1)[0]

    @property
    def file_name(self) -> str:
        return self.stem + ".svg"

    def file(self) -> bytes:
        """The figure as an SVG file (:func:`report.svg.standalone`)."""
        return svg.standalone(self.svg)


def draw(fn: Draw, *args: Any, **kwargs: Any) -> str:
    """``fn(*args, **kwargs)``, or ``""`` for a figure the report's data does not support."""
    try:
        return fn(*args, **kwargs)
    except (ValueError, KeyError, IndexError, ZeroDivisionError):
        return ""


def judge_figures(report: Report, judge: str, href: svg.Href | None = None) -> dict[str, str]:
    """``judge``'s figures of ``report`` by name (those its data supports); ``href`` gives
    each mark's link."""
    drawn = {name: draw(fn, report, judge, href=href) for name, (_, _, fn) in JUDGE_FIGURES.items()}
    return {name: figure for name, figure in drawn.items() if figure}


def agreement_figure(report: Report) -> str:
    """The agreement matrix of the report's raters (``""`` with fewer than two, or without
    scores: a pairwise run's judges agree on verdicts, in its pairwise section)."""
    if not report.rows:
        return ""
    raters = list(dict.fromkeys(x for r in report.agreement for x in (r.judge_a, r.judge_b)))
    return draw(svg.agreement_matrix, report.agreement, raters) if len(raters) >= 2 else ""


def pairwise_figures(
    pw: PairwiseReport,
    judge: str,
    criterion: str = ALL_CRITERIA,
    href: svg.PairHref | None = None,
) -> dict[str, str]:
    """``judge``'s win-rate matrix and ratings on ``criterion`` by name (those drawn)."""
    drawn = {
        "win_matrix": draw(svg.win_matrix, pw, judge, criterion, href=href),
        "ratings_chart": draw(svg.ratings_chart, pw, judge, criterion),
    }
    return {name: figure for name, figure in drawn.items() if figure}


def position_figure(pw: PairwiseReport) -> str:
    """Position consistency per judge (``""`` when no judge has one)."""
    return draw(svg.position_chart, pw.positions)


def _slug(text: str) -> str:
    keep = "".join(c if c.isalnum() or c in "._-" else "_" for c in text)
    return "_".join(part for part in keep.split("_") if part)[:48] or "x"


def all_figures(report: Report, progress: Callable[[int], object] | None = None) -> list[Figure]:
    """Every figure of the HTML report, in its order; ``progress(1)`` after each judge's."""
    out: list[Figure] = []
    what = "Capabilities" if report.capabilities else "Skills"
    judges = [j for j in report.judges if any(r.judge == j for r in report.rows)]
    for n, judge in enumerate(judges, start=1):
        drawn = judge_figures(report, judge)
        for name, (kind, caption, _) in JUDGE_FIGURES.items():
            if name in drawn:
                title = f"{what} (radar)" if name == "radar" else caption
                stem = f"{kind}-{n:02d}-{_slug(judge)}"
                out.append(Figure(name, stem, f"{title} — {judge}", drawn[name], judge))
        if progress:
            progress(1)
    agreement = agreement_figure(report)
    if agreement:
        title = "Judge agreement (Krippendorff's alpha)"
        out.append(Figure("agreement_matrix", "agreement", title, agreement))
    pw = report.pairwise
    if pw is not None:
        for k, judge in enumerate(pw.judges):
            drawn = pairwise_figures(pw, judge)
            if "win_matrix" in drawn:
                title = f"Win-rate matrix, judge {judge}"
                out.append(Figure("win_matrix", f"winrate-{k}", title, drawn["win_matrix"], judge))
            if "ratings_chart" in drawn:
                title = f"Ratings, judge {judge}"
                out.append(
                    Figure("ratings_chart", f"ratings-{k}", title, drawn["ratings_chart"], judge)
                )
        position = position_figure(pw)
        if position:
            title = "Position consistency per judge"
            out.append(Figure("position_chart", "position", title, position))
    if progress:
        progress(1)
    return out
