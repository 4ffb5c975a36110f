"""The score-vs-difficulty figure of a report (pure): a panel per skill, a line per
model with its interval as a band; :mod:`report.svg` is the interface of the figures.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from flask_eval.report.document import Report, level_label
from flask_eval.report.metrics import KEY_SEP, SKILL_DIFFICULTY
from flask_eval.report.svg_draw import Href, esc, heading, legend, note, num, short, svg, text
from flask_eval.report.svg_figure import Figure, path

#: FLASK's difficulty levels (the x axis of the difficulty curves)
LEVELS = (1, 2, 3, 4, 5)


def difficulty_curves(report: Report, judge: str, href: Href | None = None) -> str:
    """Mean per difficulty level, one panel per skill (four a row), a line per model (best
    first) with its interval as a band; FLASK's level names in a footer."""
    fig = Figure(report, judge, SKILL_DIFFICULTY, href)
    named = [*report.skills, *(k.rpartition(KEY_SEP)[0] for _, k in fig.cells)]
    keys, models = fig.select([f"{s}{KEY_SEP}{lv}" for s in dict.fromkeys(named) for lv in LEVELS])
    skills = list(dict.fromkeys(k.rpartition(KEY_SEP)[0] for k in keys))
    label = f"Score vs difficulty (1-5) per skill — judge {judge}"
    if not skills:
        return note("difficulty", label, f"{label}: no skill has a mean per level")
    legend_items, top = legend(models, fig.colour, 40, 30, 780)
    top, pw, ph, cols = top + 54, 170.0, 120.0, 4
    body = [heading(420, label), *legend_items]
    for idx, skill in enumerate(skills):
        x0, y0 = 40 + (idx % cols) * (pw + 30), top + (idx // cols) * (ph + 50)
        body.append(text(x0 + pw / 2, y0 - 6, short(skill, 28), full=skill))
        axis, y = fig.score_axis((x0, y0, x0 + pw, y0 + ph), labels=idx % cols == 0)
        xs = {lv: x0 + pw * (lv - 0.5) / len(LEVELS) for lv in LEVELS}
        body += axis
        body += [text(xs[lv], y0 + ph + 12, str(lv), extra=' font-size="9"') for lv in LEVELS]
        shown = [lv for lv in LEVELS if f"{skill}{KEY_SEP}{lv}" in keys]
        for model in models:
            rows = {lv: fig.cells.get((model, f"{skill}{KEY_SEP}{lv}")) for lv in LEVELS}
            means = {lv: r.mean for lv, r in rows.items() if r is not None and r.mean is not None}
            if not means:
                continue
            colour = fig.colour[model]
            body.append(f'<g class="series" data-model="{esc(model)}" stroke="{colour}">')
            band = [
                (r.ci_low, r.ci_high)
                if lv in means and r is not None and r.ci_low is not None and r.ci_high is not None
                else None
                for lv, r in rows.items()
            ]
            runs = "".join(_band(band, [xs[lv] for lv in LEVELS], y))
            if runs:
                body.append(
                    f'<path class="band" d="{runs}" fill="{colour}" fill-opacity="0.12" '
                    'stroke="none"/>'
                )
            line = [(xs[lv], y(means[lv])) if lv in means else None for lv in LEVELS]
            body.append(f'<path d="{path(line)}" fill="none" stroke-width="1.5"/>')
            for lv in shown:
                v = means.get(lv)
                at = (
                    f'cy="{num(y0 + ph - 4)}" fill="none" stroke="#999"'
                    if v is None
                    else f'cy="{num(y(v))}" fill="{colour}"'
                )
                body.append(
                    fig.mark(
                        "circle",
                        f'cx="{num(xs[lv])}" {at} r="3"',
                        model,
                        f"{skill}{KEY_SEP}{lv}",
                        f"{skill}, level {level_label(str(lv))}",
                    )
                )
            body.append("</g>")
    bottom = top + math.ceil(len(skills) / cols) * (ph + 50) - 10
    names = [level_label(str(lv)) for lv in LEVELS]
    small = ' font-size="9" fill="#444"'
    body += [
        text(420, bottom, "difficulty level", extra=' font-size="10"'),
        text(420, bottom + 16, "Levels: " + "   ".join(names[:3]), extra=small),
        text(420, bottom + 28, "   ".join(names[3:]), extra=small),
    ]
    return svg("difficulty", 840, bottom + 36, label, body)


def _band(
    intervals: Sequence[tuple[float, float] | None],
    xs: Sequence[float],
    y: Callable[[float], float],
) -> list[str]:
    """Closed subpaths, one per run of consecutive levels with an interval."""
    out, run = [], []
    for k, ci in enumerate([*intervals, None]):
        if ci is not None:
            run.append((xs[k], ci))
        elif run:
            edge = [(x, y(lo)) for x, (lo, _) in run] + [(x, y(hi)) for x, (_, hi) in run[::-1]]
            out.append(path(edge) + "Z")
            run = []
    return out
