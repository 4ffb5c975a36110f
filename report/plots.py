"""Figures of a report as PNG bytes (matplotlib's Agg canvas; no display, no pyplot state).

- :func:`radar`: the 12 skills of every model under one judge (FLASK's figure);
- :func:`ability_bars`: mean per ability and model, with bootstrap intervals;
- :func:`domain_heatmap`: model x domain means;
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

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.projections.polar import PolarAxes

from report.agreement import Agreement
from report.export import Report, ReportRow
from report.metrics import ABILITY, DOMAIN, KEY_SEP, SKILL, SKILL_DIFFICULTY

DPI = 100
SCORE_RANGE = (1.0, 5.0)
LEVELS = (1, 2, 3, 4, 5)


@dataclass(frozen=True)
class Plot:
    """One figure: a file name (``.png``), a title and the PNG bytes."""

    name: str
    title: str
    png: bytes
    judge: str | None = None


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    return buffer.getvalue()


def _colors(n: int) -> list[tuple[float, float, float, float]]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def _means(
    rows: Sequence[ReportRow], judge: str, dimension: str
) -> dict[tuple[str, str], ReportRow]:
    return {(r.model, r.key): r for r in rows if r.judge == judge and r.dimension == dimension}


def _wrap(text: str, width: int = 14) -> str:
    return "\n".join(textwrap.wrap(text, width)) or text


def radar(report: Report, judge: str) -> bytes:
    """Mean score of each model on each skill, on a polar chart (scale 1-5)."""
    cells = _means(report.rows, judge, SKILL)
    skills = [s for s in report.skills if any((m, s) in cells for m in report.models)]
    fig = Figure(figsize=(7.2, 6.4))
    ax = cast(PolarAxes, fig.add_subplot(projection="polar"))
    if len(skills) < 3:
        ax.set_title(f"{judge}: too few skills for a radar chart", fontsize=10)
        return _png(fig)
    angles = np.linspace(0, 2 * math.pi, len(skills), endpoint=False)
    closed = np.concatenate([angles, angles[:1]])
    for model, color in zip(report.models, _colors(len(report.models)), strict=True):
        values = [cells[(model, s)].mean if (model, s) in cells else None for s in skills]
        if all(v is None for v in values):
            continue
        data = np.array([np.nan if v is None else v for v in values], dtype=float)
        data = np.concatenate([data, data[:1]])
        ax.plot(closed, data, color=color, linewidth=1.8, label=model)
        ax.fill(closed, np.nan_to_num(data, nan=SCORE_RANGE[0]), color=color, alpha=0.05)
    ax.set_theta_offset(math.pi / 2)  # first skill on top, then clockwise
    ax.set_theta_direction(-1)
    ax.set_xticks(angles)
    ax.set_xticklabels([_wrap(s) for s in skills], fontsize=8)
    ax.set_ylim(0, SCORE_RANGE[1])
    ax.set_yticks([1, 2, 3, 4, 5])
    ax.set_yticklabels(["1", "2", "3", "4", "5"], fontsize=7, color="#666")
    ax.set_title(f"Skills — judge {judge}", fontsize=10, pad=18)
    ax.legend(loc="upper right", bbox_to_anchor=(1.32, 1.12), fontsize=8, frameon=False)
    return _png(fig)


def ability_bars(report: Report, judge: str) -> bytes:
    """Mean per ability and model, with the bootstrap interval as error bars."""
    cells = _means(report.rows, judge, ABILITY)
    abilities = [a for a in report.abilities if any((m, a) in cells for m in report.models)]
    models = [m for m in report.models if any((m, a) in cells for a in abilities)]
    fig = Figure(figsize=(7.2, 3.8))
    ax = fig.add_subplot()
    width = 0.8 / max(len(models), 1)
    x = np.arange(len(abilities))
    for k, (model, color) in enumerate(zip(models, _colors(len(models)), strict=True)):
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
    ax.set_ylim(*SCORE_RANGE)
    ax.set_ylabel("mean score")
    ax.set_title(f"Abilities — judge {judge}", fontsize=10)
    ax.legend(fontsize=7, ncols=min(len(models), 4), frameon=False, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


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
                ax.text(j, i, f"{value:.{digits}f}", ha="center", va="center", fontsize=7,
                        color=color)  # fmt: skip
    return image


def domain_heatmap(report: Report, judge: str) -> bytes:
    """Models as rows, domains as columns, mean score in each cell."""
    cells = _means(report.rows, judge, DOMAIN)
    domains = [d for d in report.domains if any((m, d) in cells for m in report.models)]
    models = [m for m in report.models if any((m, d) in cells for d in domains)]
    matrix = np.array(
        [[cells[(m, d)].mean if (m, d) in cells else np.nan for d in domains] for m in models],
        dtype=float,
    ).reshape(len(models), len(domains))
    fig = Figure(figsize=(7.2, 1.4 + 0.35 * max(len(models), 1)))
    ax = fig.add_subplot()
    if matrix.size == 0:
        ax.set_axis_off()
        ax.set_title(f"Domains — judge {judge}: no instance has a known domain", fontsize=10)
        return _png(fig)
    image = _heatmap(ax, matrix, models, domains, *SCORE_RANGE, cmap="viridis")
    fig.colorbar(image, ax=ax, fraction=0.03, pad=0.02)  # type: ignore[arg-type]
    ax.set_title(f"Domains — judge {judge}", fontsize=10)
    return _png(fig)


def difficulty_curves(report: Report, judge: str) -> bytes:
    """Mean score per difficulty level, one panel per skill, one line per model."""
    cells = {
        (r.model, r.key): r
        for r in report.rows
        if r.judge == judge and r.dimension == SKILL_DIFFICULTY
    }
    skills = [s for s in report.skills if any(k.startswith(s + KEY_SEP) for _, k in cells)]
    cols = 4
    rows_n = max(1, math.ceil(len(skills) / cols))
    fig = Figure(figsize=(10, 2.3 * rows_n))
    colors = _colors(len(report.models))
    axes = fig.subplots(rows_n, cols, squeeze=False, sharex=True, sharey=True)
    for idx, ax in enumerate(axes.flat):
        if idx >= len(skills):
            ax.set_visible(False)
            continue
        skill = skills[idx]
        for model, color in zip(report.models, colors, strict=True):
            found = [cells.get((model, f"{skill}{KEY_SEP}{lv}")) for lv in LEVELS]
            means = np.array([r.mean if r and r.mean is not None else np.nan for r in found])
            if np.all(np.isnan(means)):
                continue
            ax.plot(LEVELS, means, marker="o", markersize=3, color=color, label=model)
            low = np.array([r.ci_low if r and r.ci_low is not None else np.nan for r in found])
            high = np.array([r.ci_high if r and r.ci_high is not None else np.nan for r in found])
            ax.fill_between(LEVELS, low, high, color=color, alpha=0.12, linewidth=0)
        ax.set_title(skill, fontsize=8)
        ax.set_ylim(*SCORE_RANGE)
        ax.set_xticks(LEVELS)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncols=min(len(labels), 6), fontsize=8)
    fig.suptitle(f"Score vs difficulty (1-5) per skill — judge {judge}", fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 0.97))
    return _png(fig)


def agreement_matrix(
    rows: Sequence[Agreement], raters: Sequence[str], statistic: str = "krippendorff_alpha"
) -> bytes:
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
    return _png(fig)


def _slug(text: str) -> str:
    keep = "".join(c if c.isalnum() or c in "._-" else "_" for c in text)
    return "_".join(part for part in keep.split("_") if part)[:48] or "x"


def all_plots(report: Report, progress: Callable[[int], object] | None = None) -> list[Plot]:
    """Every figure of the HTML report: four per judge, then the agreement matrix."""
    plots: list[Plot] = []
    judges_with_rows = [j for j in report.judges if any(r.judge == j for r in report.rows)]
    kinds: tuple[tuple[str, str, Callable[[Report, str], bytes]], ...] = (
        ("radar", "Skills (radar)", radar),
        ("abilities", "Abilities", ability_bars),
        ("domains", "Domains", domain_heatmap),
        ("difficulty", "Score vs difficulty", difficulty_curves),
    )
    for n, judge in enumerate(judges_with_rows, start=1):
        for kind, title, draw in kinds:
            name = f"{kind}-{n:02d}-{_slug(judge)}.png"
            plots.append(Plot(name, f"{title} — {judge}", draw(report, judge), judge))
        if progress:
            progress(1)
    raters = list(dict.fromkeys(x for r in report.agreement for x in (r.judge_a, r.judge_b)))
    if len(raters) >= 2:
        png = agreement_matrix(report.agreement, raters)
        plots.append(Plot("agreement.png", "Judge agreement (Krippendorff's alpha)", png))
    if progress:
        progress(1)
    return plots
