"""What the report's figures of one judge's rows share (pure): each model's colour, a
mark's tooltip and :class:`Figure`, the rows of one dimension and how to draw and link
them; :mod:`report.svg` is the interface of the figures.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from flask_eval.report.document import Report, ReportRow, ranked_models
from flask_eval.report.svg_draw import Cell, Href, cell_data, mark, num, palette, text

#: at most this many tick labels on a score axis
SCORE_TICKS = 10


def colors(report: Report) -> dict[str, str]:
    """The colour of each model of ``report`` in every figure (best first)."""
    return palette(ranked_models(report.rows, report.models))


def title(model: str, label: str, row: ReportRow | None) -> str:
    """A mark's tooltip: model, key, mean, n and interval, or "no data"."""
    if row is None or row.mean is None:
        why = "" if row is None else f" ({row.n_na} N/A, {row.n_failed} failed)"
        return f"{model} — {label}: no data{why}"
    ci = (
        ""
        if row.ci_low is None or row.ci_high is None
        else (f", interval {row.ci_low:.2f}–{row.ci_high:.2f}")
    )
    return f"{model} — {label}: mean {row.mean:.2f}, n {row.n}{ci}"


class Figure:
    """One judge's rows of one dimension of a report, and how to draw and link them."""

    def __init__(self, report: Report, judge: str, dimension: str, href: Href | None) -> None:
        self.report, self.judge, self.dimension, self.href = report, judge, dimension, href
        self.cells = {
            (r.model, r.key): r
            for r in report.rows
            if r.judge == judge and r.dimension == dimension
        }
        self.colour = colors(report)
        self.lo, self.hi = float(report.scale.low), float(report.scale.high)
        levels = list(report.scale.levels)
        self.ticks = levels[:: max(1, math.ceil(len(levels) / SCORE_TICKS))]

    def mean(self, model: str, key: str) -> float | None:
        row = self.cells.get((model, key))
        return None if row is None else row.mean

    def select(self, order: Sequence[str]) -> tuple[list[str], list[str]]:
        """The keys of ``order`` some model has a mean on, and those models, best first."""
        models = self.report.models
        keys = [k for k in dict.fromkeys(order) if any(self.mean(m, k) is not None for m in models)]
        ranked = ranked_models(self.report.rows, models)
        return keys, [m for m in ranked if any(self.mean(m, k) is not None for k in keys)]

    def unit(self, value: float) -> float:
        """``value``'s place on the score axis, 0 (lowest score) to 1 (highest)."""
        return min(max((value - self.lo) / (self.hi - self.lo), 0.0), 1.0)

    def mark(self, shape: str, attrs: str, model: str, key: str, label: str) -> str:
        row, cell = self.cells.get((model, key)), Cell(model, self.judge, self.dimension, key)
        url = self.href(cell) if self.href is not None and row is not None else None
        missing = row is None or row.mean is None
        return mark(shape, attrs, title(model, label, row), url, cell_data(cell), missing)

    def score_axis(
        self, box: tuple[float, float, float, float], labels: bool = True
    ) -> tuple[list[str], Callable[[float], float]]:
        """Grid lines at the score ticks over ``box`` (x0, y0, x1, y1), their labels at
        its left; and the map from a score to its y."""
        x0, y0, x1, y1 = box

        def y(v: float) -> float:
            return y1 - (y1 - y0) * self.unit(v)

        out = [
            f'<rect x="{num(x0)}" y="{num(y0)}" width="{num(x1 - x0)}" '
            f'height="{num(y1 - y0)}" fill="none" stroke="#bbb"/>'
        ]
        for t in self.ticks:
            out.append(
                f'<line x1="{num(x0)}" x2="{num(x1)}" y1="{num(y(t))}" y2="{num(y(t))}" '
                'stroke="#000" stroke-opacity="0.1"/>'
            )
            if labels:
                out.append(text(x0 - 4, y(t) + 3, str(t), "end", ' font-size="9" fill="#444"'))
        return out, y


def path(points: Sequence[tuple[float, float] | None], close: bool = False) -> str:
    """A path through ``points``, lifting the pen over each None; ``close`` returns to the
    first point when it and the last are drawn."""
    seq = [*points, points[0]] if close and points else list(points)
    parts, pen = [], False
    for p in seq:
        if p is not None:
            parts.append(f"{'L' if pen else 'M'}{num(p[0])},{num(p[1])}")
        pen = p is not None
    return "".join(parts)
