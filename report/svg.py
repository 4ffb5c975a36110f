"""The report's figures as SVG text (pure: no I/O): the one drawing of each figure, which
the HTML report embeds, writes as ``.svg`` files (:func:`standalone`) and the viewer
serves.

Models come best first with one colour per model across every figure (matplotlib's
tab10, tab20 past ten models); the score axis runs over the report's scale. The figures
are interactive without any script: every data mark carries a
``<title>`` tooltip (model, key, mean, n, interval) and, when the caller's ``href``
gives a URL for its :class:`Cell`, sits in an ``<a href>``. Marks have ``class="cell"``
(``"cell missing"`` for a cell without a mean, drawn grey and titled "no data") and
``data-model``, ``data-judge``, ``data-dimension``, ``data-key`` attributes. Every text
that comes from data is XML-escaped; URLs with a ``javascript:``, ``data:`` or
``vbscript:`` scheme are dropped. The pairwise figures (:func:`win_matrix`,
:func:`ratings_chart`, :func:`position_chart`) live in :mod:`report.svg_pairwise`, the
forest plot of a judge card's effects (:func:`forest`) in :mod:`report.svg_forest`, the
difficulty curves in :mod:`report.svg_difficulty`, what the figures of a judge's rows share
in :mod:`report.svg_figure` and the drawing all figures share in :mod:`report.svg_draw`;
this module is the interface of them all, :mod:`report.figures` the list of a report's
figures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from flask_eval.report.agreement import Agreement
from flask_eval.report.document import Report, key_label, ranked_models
from flask_eval.report.metrics import (
    ABILITY,
    BIGGEN_KEY,
    CAPABILITY,
    DOMAIN,
    OVERALL,
    OVERALL_KEY,
    SKILL,
)
from flask_eval.report.svg_difficulty import difficulty_curves
from flask_eval.report.svg_draw import (
    CHAR,
    MISSING,
    RDBU,
    RDYLGN,
    VIRIDIS,
    Cell,
    Colours,
    GridCell,
    Href,
    PairCell,
    PairHref,
    cell_data,
    esc,
    grid,
    heading,
    legend,
    note,
    num,
    palette,
    ramp,
    short,
    standalone,
    svg,
    text,
)
from flask_eval.report.svg_figure import Figure, colors, path, title
from flask_eval.report.svg_forest import ForestRow, forest
from flask_eval.report.svg_pairwise import pair_colors, position_chart, ratings_chart, win_matrix

__all__ = [
    "RDYLGN",
    "VIRIDIS",
    "Cell",
    "ForestRow",
    "Href",
    "PairCell",
    "PairHref",
    "ability_bars",
    "agreement_matrix",
    "capability_heatmap",
    "colors",
    "difficulty_curves",
    "domain_heatmap",
    "forest",
    "pair_colors",
    "palette",
    "position_chart",
    "radar",
    "ramp",
    "ratings_chart",
    "standalone",
    "title",
    "win_matrix",
]

RADAR_OVERLAY_MAX, RADAR_COLUMNS, RADAR_MAX_AXES = 4, 4, 24


# -- radar ------------------------------------------------------------------------------


def _radar_panel(
    fig: Figure,
    skills: Sequence[str],
    models: Sequence[str],
    centre: tuple[float, float],
    radius: float,
    fill: float,
    reference: Sequence[float | None] = (),
) -> list[str]:
    cx, cy = centre
    angles = [2 * math.pi * k / len(skills) for k in range(len(skills))]

    def at(k: int, r: float) -> tuple[float, float]:
        return cx + r * math.sin(angles[k]), cy - r * math.cos(angles[k])

    out = ['<g class="axes" fill="none" stroke="#ccc" stroke-width="0.8">']
    out += [
        f'<circle cx="{num(cx)}" cy="{num(cy)}" r="{num(radius * fig.unit(t))}"/>'
        for t in fig.ticks
    ]
    out += [
        f'<line x1="{num(cx)}" y1="{num(cy)}" x2="{num(at(k, radius)[0])}" '
        f'y2="{num(at(k, radius)[1])}"/>'
        for k in range(len(skills))
    ]
    out.append("</g>")
    out += [
        text(cx + 3, cy - radius * fig.unit(t) - 2, str(t), "start", ' fill="#666" font-size="9"')
        for t in fig.ticks
    ]
    for k, skill in enumerate(skills):
        (x, y), s = at(k, radius + 8), math.sin(angles[k])
        anchor = "start" if s > 0.1 else "end" if s < -0.1 else "middle"
        label, size = key_label(fig.dimension, skill), 10 if radius > 100 else 8
        out.append(
            text(
                x,
                y + 4,
                short(label, 18 if radius > 100 else 13),
                anchor,
                f' font-size="{size}"',
                full=label,
            )
        )
    if any(v is not None for v in reference):
        line = [None if v is None else at(k, radius * fig.unit(v)) for k, v in enumerate(reference)]
        out.append(
            f'<path class="reference" d="{path(line, True)}" fill="none" stroke="#888" '
            'stroke-dasharray="4 3"/>'
        )
    for j, model in enumerate(models):
        colour, values = fig.colour[model], [fig.mean(model, s) for s in skills]
        floor = [at(k, radius * fig.unit(fig.lo if v is None else v)) for k, v in enumerate(values)]
        poly = " ".join(f"{num(x)},{num(y)}" for x, y in floor)
        line = [None if v is None else at(k, radius * fig.unit(v)) for k, v in enumerate(values)]
        out.append(
            f'<g class="series" data-model="{esc(model)}" stroke="{colour}">'
            f'<polygon points="{poly}" fill="{colour}" fill-opacity="{fill}" stroke="none"/>'
            f'<path d="{path(line, True)}" fill="none" stroke-width="1.8"/>'
        )
        for k, (skill, v) in enumerate(zip(skills, values, strict=True)):
            x, y = at(k, 5 + 4 * j if v is None else radius * fig.unit(v))
            style = 'fill="none" stroke="#999"' if v is None else f'fill="{colour}"'
            out.append(
                fig.mark(
                    "circle",
                    f'cx="{num(x)}" cy="{num(y)}" r="3.5" {style}',
                    model,
                    skill,
                    key_label(fig.dimension, skill),
                )
            )
        out.append("</g>")
    return out


def radar(report: Report, judge: str, href: Href | None = None) -> str:
    """Mean of each model on each skill (capability, when the instances carry them) on a
    polar chart over the report's scale; past four models one small radar per model, best
    first under this judge, with the mean over the models dashed."""
    dimension, what, axes, overall_key = SKILL, "Skills", list(report.skills), OVERALL_KEY
    if report.capabilities:
        dimension, what, axes = CAPABILITY, "Capabilities", list(report.capabilities)
        overall_key = BIGGEN_KEY
    fig = Figure(report, judge, dimension, href)
    skills, models = fig.select([*axes, *(k for _, k in fig.cells)])
    label = f"{what} — judge {judge}"
    if not 3 <= len(skills) <= RADAR_MAX_AXES:
        few = "few" if len(skills) < 3 else "many"
        return note(
            "radar", label, f"{label}: too {few} {what.lower()} ({len(skills)}) for a radar chart"
        )
    if len(models) <= RADAR_OVERLAY_MAX:
        keys, height = legend(models, fig.colour, 20, 30, 600)
        body = [heading(320, label), *keys]
        body += _radar_panel(fig, skills, models, (320, 270 + height), 200, 0.05)
        return svg("radar", 640, 500 + height, label, body)
    mine = [r for r in report.rows if r.judge == judge]
    models = ranked_models(mine, models)
    overall = {r.model: r.mean for r in mine if r.dimension == OVERALL and r.key == overall_key}
    reference: list[float | None] = []
    for s in skills:
        found = [v for v in (fig.mean(m, s) for m in models) if v is not None]
        reference.append(sum(found) / len(found) if found else None)
    size, rows = 270, math.ceil(len(models) / RADAR_COLUMNS)
    body = [
        heading(RADAR_COLUMNS * size / 2, f"{label} (dashed: mean over the {len(models)} models)")
    ]
    for k, model in enumerate(models):
        x0, y0 = (k % RADAR_COLUMNS) * size, 30 + (k // RADAR_COLUMNS) * size
        mean = overall.get(model)
        head = model if mean is None else f"{model} ({mean:.2f})"
        body.append(text(x0 + size / 2, y0 + 14, short(head, 34), full=head))
        centre = (x0 + size / 2, y0 + 10 + size / 2)
        body += _radar_panel(fig, skills, [model], centre, 64, 0.2, reference)
    return svg("radar", RADAR_COLUMNS * size, 40 + rows * size, label, body)


# -- bars and heatmaps ------------------------------------------------------------------


def ability_bars(report: Report, judge: str, href: Href | None = None) -> str:
    """Mean per ability and model (best first), the bootstrap interval as whiskers."""
    fig = Figure(report, judge, ABILITY, href)
    abilities, models = fig.select(report.abilities)
    label = f"Abilities — judge {judge}"
    if not abilities:
        return note("abilities", label, f"{label}: no ability has a mean")
    keys, top = legend(models, fig.colour, 50, 30, 660)
    x0, x1, y0, y1 = 50.0, 710.0, top + 40, top + 300
    axis, y = fig.score_axis((x0, y0, x1, y1))
    middle = num((y0 + y1) / 2)
    turn = f' transform="rotate(-90 14 {middle})"'
    body = [heading(360, label), *keys, *axis, text(14, (y0 + y1) / 2, "mean score", extra=turn)]
    group = (x1 - x0) / len(abilities)
    width = 0.8 * group / len(models)
    for i, ability in enumerate(abilities):
        centre = x0 + group * (i + 0.5)
        body.append(text(centre, y1 + 16, short(ability, int(group / CHAR)), full=ability))
        for k, model in enumerate(models):
            row, x = fig.cells.get((model, ability)), centre + (k - len(models) / 2) * width
            if row is None or row.mean is None:
                attrs = f'y="{num(y1 - 6)}" height="6" fill="{MISSING}" stroke="#999"'
            else:
                attrs = (
                    f'y="{num(y(row.mean))}" height="{num(y1 - y(row.mean))}" '
                    f'fill="{fig.colour[model]}"'
                )
            attrs = f'x="{num(x)}" width="{num(width)}" {attrs}'
            body.append(fig.mark("rect", attrs, model, ability, ability))
            if row is not None and row.ci_low is not None and row.ci_high is not None:
                xm, a, b = x + width / 2, y(row.ci_low), y(row.ci_high)
                body.append(
                    f'<path class="whisker" d="M{num(xm)},{num(a)}V{num(b)}'
                    f'M{num(xm - 2)},{num(a)}h4M{num(xm - 2)},{num(b)}h4" '
                    'stroke="#333" stroke-width="0.8" fill="none"/>'
                )
    return svg("abilities", 720, y1 + 30, label, body)


def _heatmap(fig: Figure, order: Sequence[str], label: str, models_as_rows: bool) -> str:
    keys, models = fig.select(order)
    if not keys:
        return ""

    def at(model: str, key: str) -> GridCell:
        row, cell = fig.cells.get((model, key)), Cell(model, fig.judge, fig.dimension, key)
        url = fig.href(cell) if fig.href is not None and row is not None else None
        tip = title(model, key_label(fig.dimension, key), row)
        return GridCell(None if row is None else row.mean, tip, cell_data(cell), url)

    span = (fig.lo, fig.hi)
    if models_as_rows:
        matrix = [[at(m, k) for k in keys] for m in models]
        return grid(fig.dimension, label, models, keys, matrix, Colours(span, VIRIDIS), fig.colour)
    matrix = [[at(m, k) for m in models] for k in keys]
    return grid(fig.dimension, label, keys, models, matrix, Colours(span, VIRIDIS), fig.colour)


def domain_heatmap(report: Report, judge: str, href: Href | None = None) -> str:
    """Models as rows (best first), domains as columns, the mean in each cell."""
    label = f"Domains — judge {judge}"
    drawn = _heatmap(Figure(report, judge, DOMAIN, href), report.domains, label, True)
    return drawn or note("domain", label, f"{label}: no instance has a known domain")


def capability_heatmap(report: Report, judge: str, href: Href | None = None) -> str:
    """Capabilities as rows, models as columns (best first); ``""`` without capabilities."""
    if not report.capabilities:
        return ""
    label = f"Capabilities — judge {judge}"
    drawn = _heatmap(Figure(report, judge, CAPABILITY, href), report.capabilities, label, False)
    return drawn or note("capability", label, f"{label}: no instance has one")


def agreement_matrix(
    rows: Sequence[Agreement], raters: Sequence[str], statistic: str = "krippendorff_alpha"
) -> str:
    """``statistic`` (an :class:`report.agreement.Agreement` field, over all skills)
    between every pair of raters, -1 to 1."""
    values: dict[tuple[str, str], tuple[float | None, int]] = {(r, r): (1.0, 0) for r in raters}
    for row in rows:
        if row.skill is None and {row.judge_a, row.judge_b} <= set(raters):
            value = getattr(row, statistic)
            values[(row.judge_a, row.judge_b)] = values[(row.judge_b, row.judge_a)] = (value, row.n)
    name = statistic.replace("_", " ")

    def at(a: str, b: str) -> GridCell:
        value, n = values.get((a, b), (None, 0))
        tip = f"{a} vs {b}: {name} " + ("no data" if value is None else f"{value:.3f}, n {n}")
        return GridCell(value, tip, {"judge-a": a, "judge-b": b, "statistic": statistic})

    cells = [[at(a, b) for b in raters] for a in raters]
    label = f"Agreement ({name}, all skills)"
    return grid("agreement", label, raters, raters, cells, Colours((-1.0, 1.0), RDBU, 3))
