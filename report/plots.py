"""Figures of a report, each as PNG and SVG (matplotlib's Agg canvas; no display, no
pyplot state). Models come best first with one colour each across all figures.

- :func:`radar`: the skills of every model under one judge (FLASK's figure), on the
  report's score scale (``Report.scale``, 1-5 for every built-in protocol); the
  capabilities instead when the instances carry them (BiGGen Bench: 9 axes), and never
  more than :data:`RADAR_MAX_AXES` axes (a run whose instances each bring a differently
  named rubric gets a note, not one axis per instance);
- :func:`ability_bars`: mean per ability and model, with bootstrap intervals;
- :func:`domain_heatmap`: model x domain means;
- :func:`capability_heatmap`: capability x model means (only when instances carry them);
- :func:`difficulty_curves`: mean score versus difficulty level, one panel per skill;
- :func:`agreement_matrix`: one agreement statistic between every pair of raters.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.projections.polar import PolarAxes

from flask_eval.report.agreement import Agreement
from flask_eval.report.document import Report, ReportRow, level_label, ranked_models
from flask_eval.report.metrics import (
    ABILITY,
    BIGGEN_KEY,
    CAPABILITY,
    DOMAIN,
    KEY_SEP,
    OVERALL,
    OVERALL_KEY,
    SKILL,
    SKILL_DIFFICULTY,
)

DPI = 100
#: FLASK's difficulty levels (the x axis of the difficulty curves), not scores
LEVELS = (1, 2, 3, 4, 5)
#: at most this many tick labels on a score axis (a 1-100 scale gets every 10th)
SCORE_TICKS = 10


def score_range(report: Report) -> tuple[float, float]:
    """The score axis of every figure: the report's scale (``Report.scale``), so a 1-10
    protocol's means are drawn, not clipped at 5."""
    return float(report.scale.low), float(report.scale.high)


def score_ticks(report: Report) -> list[int]:
    levels = list(report.scale.levels)
    step = max(1, math.ceil(len(levels) / SCORE_TICKS))
    return levels[::step]


#: Up to this many models share one radar; more get one small radar each (see radar).
RADAR_OVERLAY_MAX = 4
RADAR_COLUMNS = 4
#: More spokes than this are unreadable: the radar says so instead of drawing them.
RADAR_MAX_AXES = 24


@dataclass(frozen=True)
class Plot:
    """One figure: a file name (``.png``; the SVG is :attr:`svg_name`), a title, the bytes."""

    name: str
    title: str
    png: bytes
    svg: bytes = b""
    judge: str | None = None

    @property
    def svg_name(self) -> str:
        return self.name.removesuffix(".png") + ".svg"


def render(fig: Figure) -> tuple[bytes, bytes]:
    """(PNG, SVG) of ``fig``; the SVG is reproducible (no date, fixed element ids)."""
    FigureCanvasAgg(fig)
    fig.set_dpi(DPI)
    fig.draw_without_rendering()  # lays it out once: both files get the same tight box
    bbox = fig.get_tightbbox().padded(matplotlib.rcParams["savefig.pad_inches"])
    png, svg = io.BytesIO(), io.BytesIO()
    fig.savefig(png, format="png", dpi=DPI, bbox_inches=bbox)
    with matplotlib.rc_context({"svg.hashsalt": "flask-eval"}):
        fig.savefig(svg, format="svg", bbox_inches=bbox, metadata={"Date": None})
    return png.getvalue(), svg.getvalue()


def _colors(n: int) -> list[tuple[float, float, float, float]]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def _models(report: Report) -> list[str]:
    """The report's models, best first (the order of every legend, row and panel)."""
    return ranked_models(report.rows, report.models)


def _palette(report: Report) -> dict[str, tuple[float, float, float, float]]:
    models = _models(report)
    return dict(zip(models, _colors(len(models)), strict=True))


def _means(
    rows: Sequence[ReportRow], judge: str, dimension: str
) -> dict[tuple[str, str], ReportRow]:
    return {(r.model, r.key): r for r in rows if r.judge == judge and r.dimension == dimension}


def _wrap(text: str, width: int = 14) -> str:
    return "\n".join(textwrap.wrap(text, width, break_long_words=False)) or text


def _polar(
    ax: PolarAxes, skills: Sequence[str], fontsize: float, wrap: int, report: Report
) -> np.ndarray:
    """Skill spokes clockwise from the top; the radius runs over the report's scale, its
    lowest score at the centre."""
    angles = np.linspace(0, 2 * math.pi, len(skills), endpoint=False)
    ax.set_theta_offset(math.pi / 2)
    ax.set_theta_direction(-1)
    ax.set_xticks(angles)
    ax.set_xticklabels([_wrap(s, wrap) for s in skills], fontsize=fontsize)
    ax.set_ylim(*score_range(report))  # the centre is the lowest score, not 0
    ticks = score_ticks(report)
    ax.set_yticks(ticks)
    ax.set_yticklabels([str(t) for t in ticks], fontsize=fontsize - 1, color="#666")
    return angles


def _closed(values: Sequence[float | None]) -> np.ndarray:
    data = np.array([np.nan if v is None else v for v in values], dtype=float)
    return np.concatenate([data, data[:1]])


def radar(report: Report, judge: str) -> Figure:
    """Mean score of each model on each skill (each capability, when the instances carry
    capabilities), on a polar chart whose radius runs over the report's scale.

    Up to :data:`RADAR_OVERLAY_MAX` models share one chart (outlines, faint fills). Past
    that, overlaid polygons cross at nearly every spoke and the fifth and later tab10
    colours are hard to tell apart in print, so each model gets its own small radar
    (small multiples, best first under this judge, :data:`RADAR_COLUMNS` per row) on the
    same axes, with the mean over all models as a grey dashed reference to compare against.
    """
    dimension, what, axes = SKILL, "Skills", list(report.skills)
    overall_key = OVERALL_KEY
    if report.capabilities:
        dimension, what, axes = CAPABILITY, "Capabilities", list(report.capabilities)
        overall_key = BIGGEN_KEY
    cells = _means(report.rows, judge, dimension)
    axes += [k for _, k in cells if k not in axes]
    skills = [s for s in dict.fromkeys(axes) if any((m, s) in cells for m in report.models)]
    models = [m for m in _models(report) if any((m, s) in cells for s in skills)]
    palette = _palette(report)
    if not 3 <= len(skills) <= RADAR_MAX_AXES:
        fig = Figure(figsize=(7.2, 6.4))
        ax = fig.add_subplot(projection="polar")
        few = "few" if len(skills) < 3 else "many"
        ax.set_title(
            f"{judge}: too {few} {what.lower()} ({len(skills)}) for a radar chart", fontsize=10
        )
        return fig
    values = {m: [cells[(m, s)].mean if (m, s) in cells else None for s in skills] for m in models}
    if len(models) <= RADAR_OVERLAY_MAX:
        fig = Figure(figsize=(7.2, 6.4))
        ax = cast(PolarAxes, fig.add_subplot(projection="polar"))
        angles = _polar(ax, skills, 8, 14, report)
        closed = np.concatenate([angles, angles[:1]])
        for model in models:
            data = _closed(values[model])
            ax.plot(closed, data, color=palette[model], linewidth=1.8, label=model)
            filled = np.nan_to_num(data, nan=score_range(report)[0])
            ax.fill(closed, filled, color=palette[model], alpha=0.05)
        ax.set_title(f"{what} — judge {judge}", fontsize=10, pad=18)
        ax.legend(loc="upper right", bbox_to_anchor=(1.32, 1.12), fontsize=8, frameon=False)
        return fig
    # panels best first under this judge, whose overall means their titles show
    models = ranked_models([r for r in report.rows if r.judge == judge], models)
    cols = RADAR_COLUMNS
    rows_n = math.ceil(len(models) / cols)
    fig = Figure(figsize=(3.2 * cols, 3.5 * rows_n))
    stacked = np.array([[np.nan if v is None else v for v in values[m]] for m in models])
    with np.errstate(all="ignore"):
        reference = _closed(list(np.nanmean(stacked, axis=0)))
    overall = {
        r.model: r.mean
        for r in report.rows
        if r.judge == judge and r.dimension == OVERALL and r.key == overall_key
    }
    for k, model in enumerate(models):
        ax = cast(PolarAxes, fig.add_subplot(rows_n, cols, k + 1, projection="polar"))
        angles = _polar(ax, skills, 6, 12, report)
        closed = np.concatenate([angles, angles[:1]])
        ax.plot(closed, reference, color="#888", linewidth=0.9, linestyle="--")
        data = _closed(values[model])
        ax.plot(closed, data, color=palette[model], linewidth=1.6)
        ax.fill(
            closed, np.nan_to_num(data, nan=score_range(report)[0]), color=palette[model], alpha=0.2
        )
        mean = overall.get(model)
        title = model if mean is None else f"{model} ({mean:.2f})"
        ax.set_title(title, fontsize=9, pad=14)
    fig.suptitle(
        f"{what} — judge {judge} (dashed: mean over the {len(models)} models)", fontsize=10
    )
    fig.tight_layout()
    return fig


def ability_bars(report: Report, judge: str) -> Figure:
    """Mean per ability and model (best first), with the bootstrap interval as error bars."""
    cells = _means(report.rows, judge, ABILITY)
    abilities = [a for a in report.abilities if any((m, a) in cells for m in report.models)]
    models = [m for m in _models(report) if any((m, a) in cells for a in abilities)]
    palette = _palette(report)
    fig = Figure(figsize=(7.2, 3.8))
    ax = fig.add_subplot()
    width = 0.8 / max(len(models), 1)
    x = np.arange(len(abilities))
    for k, model in enumerate(models):
        color = palette[model]
        rows = [cells.get((model, a)) for a in abilities]
        means = np.array([r.mean if r and r.mean is not None else np.nan for r in rows])
        low = np.array([r.ci_low if r and r.ci_low is not None else np.nan for r in rows])
        high = np.array([r.ci_high if r and r.ci_high is not None else np.nan for r in rows])
        err = np.vstack([np.nan_to_num(means - low), np.nan_to_num(high - means)])
        ax.bar(x + (k - (len(models) - 1) / 2) * width, means, width, color=color, label=model)
        ax.errorbar(
            x + (k - (len(models) - 1) / 2) * width,
            means,
            yerr=err,
            fmt="none",
            ecolor="#333",
            elinewidth=0.8,
            capsize=2,
        )
    ax.set_xticks(x)
    ax.set_xticklabels([_wrap(a, 20) for a in abilities], fontsize=8)
    ax.set_ylim(*score_range(report))
    ax.set_ylabel("mean score")
    ax.set_title(f"Abilities — judge {judge}", fontsize=10)
    ax.legend(fontsize=7, ncols=min(len(models), 4), frameon=False, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    return fig


def _heatmap(
    ax: object,
    matrix: np.ndarray,
    rows: Sequence[str],
    cols: Sequence[str],
    vmin: float,
    vmax: float,
    cmap: str,
    digits: int = 2,
) -> object:
    from matplotlib.axes import Axes

    assert isinstance(ax, Axes)
    image = ax.imshow(np.ma.masked_invalid(matrix), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels([_wrap(c, 16) for c in cols], fontsize=7, rotation=45, ha="right")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows, fontsize=7)
    if matrix.size <= 400:
        for (i, j), value in np.ndenumerate(matrix):
            if np.isfinite(value):
                x = (value - vmin) / (vmax - vmin)
                dark = x < 0.55 if cmap == "viridis" else not 0.2 <= x <= 0.8
                color = "white" if dark else "black"
                ax.text(
                    j, i, f"{value:.{digits}f}", ha="center", va="center", fontsize=7, color=color
                )
    return image


def _group_means(
    report: Report, judge: str, dimension: str, order: Sequence[str]
) -> tuple[list[str], list[str], np.ndarray]:
    """(keys, models best first, (models, keys) means) of one dimension under ``judge``."""
    cells = _means(report.rows, judge, dimension)
    keys = [k for k in order if any((m, k) in cells for m in report.models)]
    models = [m for m in _models(report) if any((m, k) in cells for k in keys)]
    matrix = np.array(
        [[cells[(m, k)].mean if (m, k) in cells else np.nan for k in keys] for m in models],
        dtype=float,
    ).reshape(len(models), len(keys))
    return keys, models, matrix


def domain_heatmap(report: Report, judge: str) -> Figure:
    """Models as rows (best first), domains as columns, mean score in each cell."""
    domains, models, matrix = _group_means(report, judge, DOMAIN, report.domains)
    fig = Figure(figsize=(7.2, 1.4 + 0.35 * max(len(models), 1)))
    ax = fig.add_subplot()
    if matrix.size == 0:
        ax.set_axis_off()
        ax.set_title(f"Domains — judge {judge}: no instance has a known domain", fontsize=10)
        return fig
    image = _heatmap(ax, matrix, models, domains, *score_range(report), cmap="viridis")
    fig.colorbar(image, ax=ax, fraction=0.03, pad=0.02)  # type: ignore[arg-type]
    ax.set_title(f"Domains — judge {judge}", fontsize=10)
    return fig


def capability_heatmap(report: Report, judge: str) -> Figure:
    """Capabilities as rows, models as columns (best first), mean score in each cell."""
    keys, models, matrix = _group_means(report, judge, CAPABILITY, report.capabilities)
    fig = Figure(figsize=(1.8 + 0.9 * max(len(models), 1), 1.4 + 0.35 * max(len(keys), 1)))
    ax = fig.add_subplot()
    if matrix.size == 0:
        ax.set_axis_off()
        ax.set_title(f"Capabilities — judge {judge}: no instance has one", fontsize=10)
        return fig
    image = _heatmap(ax, matrix.T, keys, models, *score_range(report), cmap="viridis")
    fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)  # type: ignore[arg-type]
    ax.set_title(f"Capabilities — judge {judge}", fontsize=10)
    return fig


def difficulty_curves(report: Report, judge: str) -> Figure:
    """Mean score per difficulty level, one panel per skill, one line per model; FLASK's
    level names in a footer (the panels are too narrow for them as tick labels)."""
    cells = {
        (r.model, r.key): r
        for r in report.rows
        if r.judge == judge and r.dimension == SKILL_DIFFICULTY
    }
    skills = [s for s in report.skills if any(k.startswith(s + KEY_SEP) for _, k in cells)]
    cols = 4
    rows_n = max(1, math.ceil(len(skills) / cols))
    fig = Figure(figsize=(10, 2.3 * rows_n + 0.5))
    palette = _palette(report)
    axes = fig.subplots(rows_n, cols, squeeze=False, sharex=True, sharey=True)
    for idx, ax in enumerate(axes.flat):
        if idx >= len(skills):
            ax.set_visible(False)
            continue
        skill = skills[idx]
        for model, color in palette.items():
            found = [cells.get((model, f"{skill}{KEY_SEP}{lv}")) for lv in LEVELS]
            means = np.array([r.mean if r and r.mean is not None else np.nan for r in found])
            if np.all(np.isnan(means)):
                continue
            ax.plot(LEVELS, means, marker="o", markersize=3, color=color, label=model)
            low = np.array([r.ci_low if r and r.ci_low is not None else np.nan for r in found])
            high = np.array([r.ci_high if r and r.ci_high is not None else np.nan for r in found])
            ax.fill_between(LEVELS, low, high, color=color, alpha=0.12, linewidth=0)
        ax.set_title(skill, fontsize=8)
        ax.set_ylim(*score_range(report))
        ax.set_xticks(LEVELS)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("difficulty level", fontsize=7)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if handles:
        fig.legend(
            handles,
            labels,
            loc="lower center",
            ncols=min(len(labels), 6),
            fontsize=8,
            bbox_to_anchor=(0.5, 0.035),
        )
    names = "   ".join(level_label(str(lv)) for lv in LEVELS)
    fig.text(0.5, 0.005, f"Levels: {names}", ha="center", va="bottom", fontsize=7, color="#444")
    fig.suptitle(f"Score vs difficulty (1-5) per skill — judge {judge}", fontsize=10)
    fig.tight_layout(rect=(0, 0.1, 1, 0.97))
    return fig


def agreement_matrix(
    rows: Sequence[Agreement], raters: Sequence[str], statistic: str = "krippendorff_alpha"
) -> Figure:
    """``statistic`` (over all skills) between every pair of raters, as a heatmap."""
    index = {r: i for i, r in enumerate(raters)}
    matrix = np.full((len(raters), len(raters)), np.nan)
    np.fill_diagonal(matrix, 1.0)
    for row in rows:
        if row.skill is None and row.judge_a in index and row.judge_b in index:
            value = getattr(row, statistic)
            a, b = index[row.judge_a], index[row.judge_b]
            matrix[a, b] = matrix[b, a] = np.nan if value is None else value
    size = 2.2 + 0.6 * len(raters)
    fig = Figure(figsize=(max(size, 4.5), max(size - 0.6, 3.5)))
    ax = fig.add_subplot()
    image = _heatmap(ax, matrix, raters, raters, -1.0, 1.0, cmap="RdBu", digits=3)
    fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)  # type: ignore[arg-type]
    ax.set_title(f"Agreement ({statistic.replace('_', ' ')}, all skills)", fontsize=10)
    return fig


def _slug(text: str) -> str:
    keep = "".join(c if c.isalnum() or c in "._-" else "_" for c in text)
    return "_".join(part for part in keep.split("_") if part)[:48] or "x"


def all_plots(report: Report, progress: Callable[[int], object] | None = None) -> list[Plot]:
    """Every figure of the HTML report: four per judge (five with capabilities), then the
    agreement matrix."""
    plots: list[Plot] = []
    judges_with_rows = [j for j in report.judges if any(r.judge == j for r in report.rows)]
    what = "Capabilities" if report.capabilities else "Skills"
    kinds: tuple[tuple[str, str, Callable[[Report, str], Figure]], ...] = (
        ("radar", f"{what} (radar)", radar),
        ("abilities", "Abilities", ability_bars),
        ("domains", "Domains", domain_heatmap),
        ("difficulty", "Score vs difficulty", difficulty_curves),
    )
    if report.capabilities:
        kinds += (("capabilities", "Capabilities x models", capability_heatmap),)
    for n, judge in enumerate(judges_with_rows, start=1):
        for kind, title, draw in kinds:
            name = f"{kind}-{n:02d}-{_slug(judge)}.png"
            png, svg = render(draw(report, judge))
            plots.append(Plot(name, f"{title} — {judge}", png, svg, judge))
        if progress:
            progress(1)
    raters = list(dict.fromkeys(x for r in report.agreement for x in (r.judge_a, r.judge_b)))
    if len(raters) >= 2:
        png, svg = render(agreement_matrix(report.agreement, raters))
        plots.append(Plot("agreement.png", "Judge agreement (Krippendorff's alpha)", png, svg))
    if progress:
        progress(1)
    return plots
