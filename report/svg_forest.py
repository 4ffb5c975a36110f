"""A forest plot as SVG (pure): one row per estimate, a dot at it and its interval as a
whisker, a dashed line at zero; drawn with :mod:`report.svg_draw`, each dot a data mark
with its tooltip and, when the caller gives one, its link.

Import the figures from :mod:`report.svg`, the public interface of all of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from flask_eval.report.svg_draw import CHAR, heading, mark, note, num, short, svg, text, tick_step

#: a row's dot: failed a gate, significant, neither
FAILS, SIGNIFICANT, PLAIN = "#d62728", "#1f77b4", "#999999"


@dataclass(frozen=True)
class ForestRow:
    """One estimate of a forest plot: its label (left), value and interval, tooltip, link
    (None: none), data attributes, and whether it is significant or failed a gate."""

    label: str
    estimate: float
    low: float
    high: float
    title: str
    url: str | None = None
    data: dict[str, str] = field(default_factory=dict)
    significant: bool = False
    fails: bool = False


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if math.isfinite(v)]


def forest(rows: Sequence[ForestRow], label: str, kind: str = "forest") -> str:
    """``rows`` top to bottom on one axis that always shows zero (``class="zero"``); a
    figure that says so when there is nothing to draw."""
    values = _finite([v for r in rows for v in (r.estimate, r.low, r.high)])
    if not rows or not values:
        return note(kind, label, f"{label}: no estimate")
    lo, hi = min([*values, 0.0]), max([*values, 0.0])
    pad = max((hi - lo) * 0.05, 0.05)
    lo, hi = lo - pad, hi + pad
    left = 24 + CHAR * min(max(len(r.label) for r in rows), 36)
    x0, x1, top, rh = left, left + 360, 40.0, 22.0
    bottom = top + rh * len(rows)

    def x(v: float) -> float:
        return x0 + (x1 - x0) * (min(max(v, lo), hi) - lo) / (hi - lo)

    body = [heading((x0 + x1) / 2, label)]
    step = tick_step(hi - lo)
    for k in range(math.ceil(lo / step), math.floor(hi / step) + 1):
        t = k * step
        body += [
            f'<line x1="{num(x(t))}" x2="{num(x(t))}" y1="{num(top)}" y2="{num(bottom)}" '
            'stroke="#000" stroke-opacity="0.1"/>',
            text(x(t), bottom + 14, f"{t:g}", extra=' font-size="9"'),
        ]
    body.append(
        f'<line class="zero" x1="{num(x(0))}" x2="{num(x(0))}" y1="{num(top - 4)}" '
        f'y2="{num(bottom)}" stroke="#555" stroke-dasharray="4 3"/>'
    )
    for i, r in enumerate(rows):
        y = top + rh * (i + 0.5)
        body.append(text(x0 - 8, y + 4, short(r.label, 36), "end", full=r.label))
        if math.isfinite(r.low) and math.isfinite(r.high):
            a, b = x(r.low), x(r.high)
            body.append(
                f'<path class="whisker" d="M{num(a)},{num(y)}H{num(b)}'
                f'M{num(a)},{num(y - 3)}v6M{num(b)},{num(y - 3)}v6" stroke="#333" fill="none"/>'
            )
        if not math.isfinite(r.estimate):
            attrs = f'cx="{num(x0 + 6)}" cy="{num(y)}" r="4" fill="none" stroke="#999"'
            body.append(mark("circle", attrs, r.title, r.url, r.data, missing=True))
            continue
        fill = FAILS if r.fails else SIGNIFICANT if r.significant else PLAIN
        attrs = f'cx="{num(x(r.estimate))}" cy="{num(y)}" r="5" fill="{fill}"'
        body.append(mark("circle", attrs, r.title, r.url, r.data))
    return svg(kind, x1 + 30, bottom + 30, label, body)
