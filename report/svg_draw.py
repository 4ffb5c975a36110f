"""The drawing every SVG figure shares (:mod:`report.svg`, :mod:`report.svg_pairwise`):
marks with tooltips and links, escaping, the models' colours, colour maps, legends, the
heatmap grid, and a figure as a file of its own (pure).

Import the figures from :mod:`report.svg`, the public interface of all of them.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Cell:
    """One clickable thing of a figure: a report row's (model, judge, dimension, key)."""

    model: str
    judge: str
    dimension: str
    key: str


@dataclass(frozen=True)
class PairCell:
    """One cell of a win-rate matrix: ``model_a``'s score against ``model_b``."""

    model_a: str
    model_b: str
    judge: str
    criterion: str


Href = Callable[[Cell], str | None]
PairHref = Callable[[PairCell], str | None]

TAB10 = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
TAB20 = (
    "#1f77b4",
    "#aec7e8",
    "#ff7f0e",
    "#ffbb78",
    "#2ca02c",
    "#98df8a",
    "#d62728",
    "#ff9896",
    "#9467bd",
    "#c5b0d5",
    "#8c564b",
    "#c49c94",
    "#e377c2",
    "#f7b6d2",
    "#7f7f7f",
    "#c7c7c7",
    "#bcbd22",
    "#dbdb8d",
    "#17becf",
    "#9edae5",
)
#: matplotlib's viridis and RdYlGn at 0, 0.1, ..., 1 (interpolated linearly between)
VIRIDIS = (
    "#440154",
    "#482475",
    "#414487",
    "#355f8d",
    "#2a788e",
    "#21918c",
    "#22a884",
    "#44bf70",
    "#7ad151",
    "#bddf26",
    "#fde725",
)
RDYLGN = (
    "#a50026",
    "#d62f27",
    "#f46d43",
    "#fdad60",
    "#fee08b",
    "#feffbe",
    "#d9ef8b",
    "#a5d86a",
    "#66bd63",
    "#199750",
    "#006837",
)
RDBU = (
    "#67001f",
    "#b1182b",
    "#d6604d",
    "#f3a481",
    "#fddbc7",
    "#f6f7f7",
    "#d1e5f0",
    "#90c4dd",
    "#4393c3",
    "#2065ab",
    "#053061",
)
MISSING = "#e6e6e6"
CHAR = 6.2  # the width of one character at the figures' 11px font, roughly
_BAD_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_BAD_SCHEME = re.compile(r"^\s*(javascript|data|vbscript):", re.IGNORECASE)


def esc(text: object) -> str:
    """``text`` as XML character data or attribute value (characters XML forbids dropped)."""
    return html.escape(_BAD_XML.sub("", str(text)), quote=True)


def num(x: float) -> str:
    return f"{x:.1f}"


def tick_step(span: float) -> float:
    """A round tick step giving at most six ticks over ``span``."""
    base = 10.0 ** math.floor(math.log10(max(span, 1e-9) / 6))
    return next(base * k for k in (1, 2, 2.5, 5, 10) if span / (base * k) <= 6)


def value_axis(
    x: Callable[[float], float], lo: float, hi: float, top: float, bottom: float
) -> list[str]:
    """Vertical grid lines at round ticks between ``lo`` and ``hi`` (``x`` places a value),
    each labelled under the plot."""
    step = tick_step(hi - lo)
    body: list[str] = []
    for k in range(math.ceil(lo / step), math.floor(hi / step) + 1):
        t = k * step
        body += [
            f'<line x1="{num(x(t))}" x2="{num(x(t))}" y1="{num(top)}" y2="{num(bottom)}" '
            'stroke="#000" stroke-opacity="0.1"/>',
            text(x(t), bottom + 14, f"{t:g}", extra=' font-size="9"'),
        ]
    return body


def reference_line(cls: str, at: float, top: float, bottom: float, stroke: str) -> str:
    """A dashed vertical line at ``at`` (a zero, an anchor) of class ``cls``."""
    return (
        f'<line class="{cls}" x1="{num(at)}" x2="{num(at)}" y1="{num(top - 4)}" '
        f'y2="{num(bottom)}" stroke="{stroke}" stroke-dasharray="4 3"/>'
    )


def whisker(a: float, b: float, y: float) -> str:
    """An interval from ``a`` to ``b`` at height ``y``, with end caps."""
    return (
        f'<path class="whisker" d="M{num(a)},{num(y)}H{num(b)}'
        f'M{num(a)},{num(y - 3)}v6M{num(b)},{num(y - 3)}v6" stroke="#333" fill="none"/>'
    )


def short(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: max(chars - 1, 1)] + "…"


def svg(kind: str, width: float, height: float, label: str, body: Iterable[str]) -> str:
    """One ``<svg>`` element: ``class="fe-figure fe-{kind}"``, scaled to its container but
    never past a quarter over its own size (a 2 x 2 heatmap stays small, its text legible)."""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {num(width)} {num(height)}" '
        f'width="100%" style="max-width: {num(width * 1.25)}px" role="img" '
        f'aria-label="{esc(label)}" class="fe-figure fe-{kind}" '
        f'font-family="sans-serif" font-size="11">{"".join(body)}</svg>'
    )


_SIZE = re.compile(r'width="100%" style="max-width: [0-9.]+px"')
_VIEWBOX = re.compile(r'viewBox="0 0 ([0-9.]+) ([0-9.]+)"')


def standalone(figure: str) -> bytes:
    """``figure`` (an :func:`svg` element) as an SVG file: an XML declaration, and its own
    size in pixels instead of its container's width; the drawing itself unchanged."""
    found = _VIEWBOX.search(figure)
    if found is None:
        raise ValueError("not a figure of report.svg")
    sized = _SIZE.sub(f'width="{found[1]}" height="{found[2]}"', figure, count=1)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n' + sized + "\n").encode()


def text(
    x: float,
    y: float,
    content: str,
    anchor: str = "middle",
    extra: str = "",
    full: str | None = None,
) -> str:
    """A ``<text>`` of ``content``; ``full`` (a longer form) as its tooltip."""
    tip = f"<title>{esc(full)}</title>" if full is not None and full != content else ""
    return (
        f'<text x="{num(x)}" y="{num(y)}" text-anchor="{anchor}"{extra}>{tip}{esc(content)}</text>'
    )


def safe_url(url: str | None) -> str | None:
    return None if not url or _BAD_SCHEME.match(url) else url


def mark(
    shape: str, attrs: str, title: str, url: str | None, data: dict[str, str], missing: bool = False
) -> str:
    """A data mark (``<rect>``, ``<circle>``...) with its tooltip, in a link if ``url``."""
    cls = "cell missing" if missing else "cell"
    data_attrs = "".join(f' data-{k}="{esc(v)}"' for k, v in data.items())
    element = f'<{shape} class="{cls}"{data_attrs} {attrs}><title>{esc(title)}</title></{shape}>'
    url = safe_url(url)
    return f'<a href="{esc(url)}">{element}</a>' if url else element


def cell_data(cell: Cell) -> dict[str, str]:
    return {"model": cell.model, "judge": cell.judge, "dimension": cell.dimension, "key": cell.key}


def palette(models: Sequence[str]) -> dict[str, str]:
    """A colour per model, in ``models``' order (matplotlib's tab10, tab20 past ten)."""
    colors = TAB10 if len(models) <= 10 else TAB20
    return {m: colors[i % len(colors)] for i, m in enumerate(models)}


def ramp(stops: Sequence[str], x: float) -> str:
    """The colour at ``x`` (0..1, clamped) of a colour map given by equally spaced stops."""
    x = min(max(x, 0.0), 1.0) if math.isfinite(x) else 0.0
    pos = x * (len(stops) - 1)
    i = min(int(pos), len(stops) - 2)
    t = pos - i
    a, b = (tuple(int(s[k : k + 2], 16) for k in (1, 3, 5)) for s in stops[i : i + 2])
    return "#" + "".join(f"{round(p + (q - p) * t):02x}" for p, q in zip(a, b, strict=True))


def legend(
    models: Sequence[str], colour: dict[str, str], x0: float, y0: float, width: float
) -> tuple[list[str], float]:
    """Swatch-and-name items flowing in rows from (x0, y0): the elements and their height."""
    out, x, y = [], x0, y0
    for model in models:
        name = short(model, 28)
        item = 18 + CHAR * len(name) + 14
        if x > x0 and x + item > x0 + width:
            x, y = x0, y + 16
        out.append(
            f'<g class="legend-item" data-model="{esc(model)}">'
            f'<rect x="{num(x)}" y="{num(y)}" width="10" height="10" '
            f'fill="{colour[model]}"/>{text(x + 14, y + 9, name, "start", full=model)}</g>'
        )
        x += item
    return out, (y - y0 + 16 if models else 0)


def heading(x: float, label: str) -> str:
    """A figure's title line."""
    return text(x, 18, label, extra=' font-size="13"')


def note(kind: str, label: str, message: str) -> str:
    """A figure that only says why there is nothing to draw."""
    return svg(kind, 640, 60, label, [text(320, 34, message)])


@dataclass(frozen=True)
class GridCell:
    """One cell of a heatmap: its value (None: no data), tooltip, data attributes, URL."""

    value: float | None
    title: str
    data: dict[str, str]
    url: str | None = None


@dataclass(frozen=True)
class Colours:
    """How a heatmap colours its cells: ``stops`` (a colour map) over ``span``, the
    values written with ``digits`` decimals."""

    span: tuple[float, float]
    stops: Sequence[str]
    digits: int = 2


def grid(
    kind: str,
    label: str,
    rows: Sequence[str],
    cols: Sequence[str],
    cells: Sequence[Sequence[GridCell | None]],
    colours: Colours,
    swatches: dict[str, str] | None = None,
) -> str:
    """A heatmap: ``cells[i][j]`` at row ``rows[i]``, column ``cols[j]`` (None: nothing
    drawn there), coloured as ``colours`` says; a colour scale at the right.
    ``swatches``: a colour square beside each row or column label named in it."""
    (vmin, vmax), stops, digits = colours.span, colours.stops, colours.digits
    left = 24 + CHAR * min(max((len(r) for r in rows), default=4), 28)
    cw = max(44.0, min(90.0, (640 - left) / max(len(cols), 1)))
    ch, top = 24.0, 34.0
    bottom = top + ch * len(rows)
    depth = 24 + 0.7 * CHAR * min(max((len(c) for c in cols), default=4), 24)
    right = left + cw * len(cols)
    body = [heading((right + left) / 2, label)]
    swatches = swatches or {}
    for i, name in enumerate(rows):
        y = top + ch * (i + 0.5)
        body.append(text(left - 6, y + 4, short(name, 28), "end", full=name))
        if name in swatches:
            body.append(
                f'<rect x="4" y="{num(y - 4)}" width="8" height="8" fill="{swatches[name]}"/>'
            )
    for j, name in enumerate(cols):
        x = left + cw * (j + 0.5)
        body.append(
            text(
                x + 4,
                bottom + 12,
                short(name, 24),
                "end",
                f' transform="rotate(-40 {num(x + 4)} {num(bottom + 12)})"',
                full=name,
            )
        )
        if name in swatches:
            body.append(
                f'<rect x="{num(x - 4)}" y="{num(top - 10)}" width="8" height="8" '
                f'fill="{swatches[name]}"/>'
            )
    many = len(rows) * len(cols) > 400
    for i in range(len(rows)):
        for j in range(len(cols)):
            c = cells[i][j]
            if c is None:
                continue
            x, y = left + cw * j, top + ch * i
            x01 = math.nan if c.value is None else (c.value - vmin) / (vmax - vmin)
            fill = MISSING if c.value is None else ramp(stops, x01)
            attrs = (
                f'x="{num(x)}" y="{num(y)}" width="{num(cw)}" height="{num(ch)}" '
                f'fill="{fill}" stroke="#fff"'
            )
            body.append(mark("rect", attrs, c.title, c.url, c.data, c.value is None))
            if c.value is not None and not many:
                dark = x01 < 0.55 if stops is VIRIDIS else not 0.2 <= x01 <= 0.8
                body.append(
                    text(
                        x + cw / 2,
                        y + ch / 2 + 4,
                        f"{c.value:.{digits}f}",
                        extra=f' font-size="10" pointer-events="none" '
                        f'fill="{"#fff" if dark else "#000"}"',
                    )
                )
    for k in range(10):  # the colour scale
        y = top + (bottom - top) * k / 10
        body.append(
            f'<rect class="scale" x="{num(right + 14)}" y="{num(y)}" width="10" '
            f'height="{num((bottom - top) / 10 + 0.5)}" fill="{ramp(stops, 1 - (k + 0.5) / 10)}"/>'
        )
    body += [
        text(right + 28, top + 8, f"{vmax:g}", "start", ' font-size="9"'),
        text(right + 28, bottom, f"{vmin:g}", "start", ' font-size="9"'),
    ]
    return svg(kind, right + 60, bottom + depth, label, body)
