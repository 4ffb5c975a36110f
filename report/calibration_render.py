"""The "Calibrated to PEOPLE" section drawn: text lines (``report.text``) and an HTML
section (``report.html``); pure, strings only. JSON is :meth:`Calibration.as_dict`.

Text is compact: per judge and model, the overall row, the abilities and the skills
(``details``: every key); HTML and JSON have every key."""

from __future__ import annotations

import html
import math
import textwrap
from collections.abc import Sequence

from flask_eval.report.calibration import FEW_INSTANCES, CalibratedRow, Calibration
from flask_eval.report.textgrid import DEFAULT_WIDTH

#: the dimensions text shows by default
COMPACT = ("overall", "ability", "skill")
HEADS = ("key", "calibrated", "CI", "judge raw", "people only", "CI", "n", "N", "lam", "gain")
EXPLAIN = (
    "calibrated: the people's mean estimated from their labels and every judge score "
    "(PPI++), its interval valid for what people would say; judge raw: the judge's own "
    "mean; people only: the labels' mean alone; n labels, N unlabelled cells; gain: the "
    "effective number of labels per label"
)

FEW = (
    f"*: fewer than {FEW_INSTANCES} labelled instances; with so few, a 95% interval covers "
    "less often than 95% (about 91-93% with seven), calibrated or not: label more"
)


def _n(value: float, digits: int = 2) -> str:
    return "-" if not math.isfinite(value) else f"{value:.{digits}f}"


def _ci(low: float, high: float) -> str:
    return "" if not (math.isfinite(low) and math.isfinite(high)) else f"[{low:.2f}, {high:.2f}]"


def _key(row: CalibratedRow) -> str:
    return row.key if row.dimension == "overall" else f"{row.dimension} {row.key}"


def _cells(row: CalibratedRow) -> list[str]:
    return [
        f"{_key(row)} *" if row.few else _key(row),
        _n(row.estimate),
        _ci(row.low, row.high),
        _n(row.raw),
        _n(row.people),
        _ci(row.people_low, row.people_high),
        str(row.labelled),
        str(row.unlabelled),
        _n(row.lam),
        _n(row.gain, 1),
    ]


def _grid(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[k]) for r in [HEADS, *rows]) for k in range(len(HEADS))]
    out = []
    for r in [HEADS, *rows]:
        first = r[0].ljust(widths[0])
        rest = "  ".join(v.rjust(w) for v, w in zip(r[1:], widths[1:], strict=True))
        out.append(f"  {first}  {rest}".rstrip())
    return out


def _wrapped(text: str) -> str:
    return textwrap.fill(text, DEFAULT_WIDTH, initial_indent="  - ", subsequent_indent="    ")


def title(calibration: Calibration) -> str:
    return f"Calibrated to {calibration.people}"


def text(calibration: Calibration, details: bool = False) -> list[str]:
    """The section's text lines."""
    level = round(100 * calibration.confidence)
    lines = [f"{title(calibration)} ({level}% intervals; {', '.join(calibration.columns)})"]
    blocks: dict[tuple[str, str], list[CalibratedRow]] = {}
    for row in calibration.rows:
        if details or calibration.pairwise or row.dimension in COMPACT:
            blocks.setdefault((row.judge, row.model), []).append(row)
    for (judge, model), rows in blocks.items():
        lines += ["", f" {judge} on {model}:", *_grid([_cells(r) for r in rows])]
    if not calibration.rows:
        lines.append("  no key has enough labels")
    few = [FEW] if any(r.few for rows in blocks.values() for r in rows) else []
    lines += ["", *(_wrapped(n) for n in [*calibration.notes, EXPLAIN, *few])]
    if calibration.skipped:
        shown = calibration.skipped[:5]
        more = len(calibration.skipped) - len(shown)
        tail = f"; and {more} more (JSON lists them)" if more > 0 else ""
        lines.append(_wrapped(f"too few labels, no estimate: {'; '.join(shown)}{tail}"))
    return lines


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def html_section(calibration: Calibration) -> str:
    """The section's HTML (inside its ``<section>``): one table of every row."""
    heads = ("judge", "model", *HEADS)
    out = [
        f"<p class='meta'>{_e(', '.join(calibration.columns))}.</p>",
        "<table id='calibration'><tr>",
    ]
    out += [f"<th>{_e(h)}</th>" for h in heads]
    out.append("</tr>")
    for row in calibration.rows:
        cells = [row.judge, row.model, *_cells(row)]
        out.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>")
    out.append("</table>")
    few = [FEW] if any(r.few for r in calibration.rows) else []
    out += [f"<p class='note'>{_e(n)}</p>" for n in [*calibration.notes, EXPLAIN, *few]]
    if calibration.skipped:
        out.append(f"<p class='note'>{len(calibration.skipped)} key(s) have too few labels.</p>")
    return "".join(out)
