"""A forest plot as SVG (pure): one row per estimate, a dot at it and its interval as a
whisker, a dashed line at zero; drawn with :mod:`report.svg_draw`, each dot a data mark
with its tooltip and, when the caller gives one, its link.

Import the figures from :mod:`report.svg`, the public interface of all of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from flask_eval.report.svg_draw import (
    CHAR,
    heading,
    mark,
    note,
    num,
    reference_line,
    short,
    svg,
    text,
    value_axis,
    whisker,
)

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

    body = [heading((x0 + x1) / 2, label), *value_axis(x, lo, hi, top, bottom)]
    body.append(reference_line("zero", x(0), top, bottom, "#555"))
    for i, r in enumerate(rows):
        y = top + rh * (i + 0.5)
        body.append(text(x0 - 8, y + 4, short(r.label, 36), "end", full=r.label))
        if math.isfinite(r.low) and math.isfinite(r.high):
            a, b = x(r.low), x(r.high)
            body.append(whisker(a, b, y))
        if not math.isfinite(r.estimate):
            attrs = f'cx="{num(x0 + 6)}" cy="{num(y)}" r="4" fill="none" stroke="#999"'
            body.append(mark("circle", attrs, r.title, r.url, r.data, missing=True))
            continue
        fill = FAILS if r.fails else SIGNIFICANT if r.significant else PLAIN
        attrs = f'cx="{num(x(r.estimate))}" cy="{num(y)}" r="5" fill="{fill}"'
        body.append(mark("circle", attrs, r.title, r.url, r.data))
    return svg(kind, x1 + 30, bottom + 30, label, body)
