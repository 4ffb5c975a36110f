"""A run comparison (``report.compare.Comparison``) as text, JSON, JUnit XML or Markdown
(pure: strings in, strings out; the command writes them)."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from flask_eval.report.compare import (
    REGRESSION,
    UNTESTABLE,
    CompareRow,
    Comparison,
)
from flask_eval.report.serial import dumps

FORMATS = ("text", "json", "junit", "markdown")
HEADER = ("model", "dimension", "key", "n", "base", "new", "effect [CI]", "p adj", "MDE", "verdict")
#: the verdicts in the order a reader wants them (regressions first)
_RANK = {REGRESSION: 0, "drop below min-effect": 1, "improvement": 2}


def _num(value: float, digits: int = 3) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def _signed(value: float, digits: int = 3) -> str:
    return "-" if math.isnan(value) else f"{value:+.{digits}f}"


def _p(value: float) -> str:
    if math.isnan(value):
        return "-"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _effect(r: CompareRow) -> str:
    if math.isnan(r.low):
        return _signed(r.effect)
    return f"{_signed(r.effect)} [{_signed(r.low)}, {_signed(r.high)}]"


def _p_shown(r: CompareRow) -> str:
    """The adjusted p-value the verdict rests on: the gate's for a regression, else the
    two-sided one."""
    return _p(r.p_regression_adjusted if r.verdict == REGRESSION else r.p_adjusted)


def cells(r: CompareRow) -> list[str]:
    """One row's columns (:data:`HEADER`)."""
    return [
        r.model,
        r.dimension,
        r.key,
        str(r.n),
        _num(r.base),
        _num(r.new),
        _effect(r),
        _p_shown(r),
        _num(r.mde),
        r.verdict,
    ]


def _grid(rows: Sequence[Sequence[str]], right: Sequence[int] = (3, 4, 5, 7, 8)) -> str:
    widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]))]
    lines = []
    for row in rows:
        parts = [
            v.rjust(w) if k in right else v.ljust(w)
            for k, (v, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines) + "\n"


def _settings_line(c: Comparison) -> str:
    s = c.settings
    return (
        f"{c.tests} tests, {s.correction} across all of them; alpha {s.alpha:g}, "
        f"min-effect {s.min_effect:g}, {s.confidence:.0%} intervals; MDE: the smallest "
        f"drop a test at alpha/{max(c.tests, 1)} detects with power {s.power:g}; judges: "
        f"{', '.join(c.judges) or 'none'}"
    )


def text(c: Comparison) -> str:
    """The headline, the table of every test, the per-judge rows and what was left out."""
    out = [c.headline, _settings_line(c), ""]
    if c.rows:
        out.append(_grid([HEADER, *(cells(r) for r in c.rows)]))
    if c.judge_rows:
        out += ["per judge (overall; a family of its own, outside the gate):", ""]
        header = ("model", "judge", "n", "base", "new", "effect [CI]", "p adj", "verdict")
        rows = [
            (
                r.model,
                r.judge,
                str(r.n),
                _num(r.base),
                _num(r.new),
                _effect(r),
                _p_shown(r),
                r.verdict,
            )
            for r in c.judge_rows
        ]
        out.append(_grid([header, *rows], right=(2, 3, 4, 6)))
    out += [f"note: {n}" for n in c.notes]
    return "\n".join(out).rstrip("\n") + "\n"


def as_dict(c: Comparison) -> dict[str, Any]:
    """Everything, machine-readable (NaN as null)."""
    return {
        "base": c.base,
        "new": c.new,
        "headline": c.headline,
        "gate_failed": c.gate_failed,
        "tests": c.tests,
        "settings": asdict(c.settings),
        "judges": list(c.judges),
        "pairs": [{"base": p.base, "new": p.new, "label": p.label} for p in c.pairs],
        "regressions": len(c.regressions),
        "improvements": len(c.improvements),
        "rows": [asdict(r) for r in c.rows],
        "judge_rows": [asdict(r) for r in c.judge_rows],
        "dropped": [{**asdict(d), "pair": d.pair.label} for d in c.dropped],
        "notes": list(c.notes),
    }


def json_text(c: Comparison) -> str:
    return dumps(as_dict(c))


def _numbers(r: CompareRow) -> str:
    return (
        f"n={r.n} instances ({r.judgments} paired judgments); base={_num(r.base)} "
        f"new={_num(r.new)} effect={_effect(r)}; p={_p(r.p_value)} p_adj={_p(r.p_adjusted)} "
        f"p_regression={_p(r.p_regression)} p_regression_adj={_p(r.p_regression_adjusted)}; "
        f"mde={_num(r.mde)}; {r.verdict}"
    )


def junit(c: Comparison) -> str:
    """One <testsuite>; one <testcase> per (model, dimension, key) of the gate's family,
    a <failure> for each significant regression, <skipped> for an untestable key."""
    failures = len(c.regressions)
    skipped = sum(1 for r in c.rows if r.verdict == UNTESTABLE)
    suite = ET.Element(
        "testsuite",
        {
            "name": f"flask-eval compare {c.base} {c.new}",
            "tests": str(len(c.rows)),
            "failures": str(failures),
            "errors": "0",
            "skipped": str(skipped),
            "time": "0",
        },
    )
    props = ET.SubElement(suite, "properties")
    s = c.settings
    for name, value in (
        ("base", c.base),
        ("new", c.new),
        ("alpha", f"{s.alpha:g}"),
        ("min_effect", f"{s.min_effect:g}"),
        ("correction", s.correction),
        ("confidence", f"{s.confidence:g}"),
        ("family_tests", str(c.tests)),
        ("judges", ",".join(c.judges)),
    ):
        ET.SubElement(props, "property", {"name": name, "value": value})
    for r in c.rows:
        case = ET.SubElement(
            suite,
            "testcase",
            {"classname": f"{r.model}.{r.dimension}", "name": r.key, "time": "0"},
        )
        if r.verdict == REGRESSION:
            failure = ET.SubElement(
                case,
                "failure",
                {
                    "type": "regression",
                    "message": (
                        f"{r.model} {r.dimension}={r.key}: {_effect(r)}, adjusted "
                        f"p={_p(r.p_regression_adjusted)} < {s.alpha:g}"
                    ),
                },
            )
            failure.text = _numbers(r)
        elif r.verdict == UNTESTABLE:
            ET.SubElement(case, "skipped", {"message": f"untestable: {r.n} paired instance(s)"})
        ET.SubElement(case, "system-out").text = _numbers(r)
    ET.SubElement(suite, "system-out").text = "\n".join([c.headline, *c.notes])
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, "unicode") + "\n"


def _md(value: str) -> str:
    return value.replace("|", "\\|")


def _md_table(rows: Sequence[CompareRow]) -> list[str]:
    head = [h if h != "p adj" else "p (adj.)" for h in HEADER]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(_md(v) for v in cells(r)) + " |" for r in rows]


def markdown(c: Comparison, limit: int = 30) -> str:
    """A summary for a CI page (GitHub's ``$GITHUB_STEP_SUMMARY``): the headline,
    regressions first, then a compact table of the other tested keys (at most
    ``limit`` rows), and what was left out."""
    icon = ":x:" if c.gate_failed else ":white_check_mark:"
    out = [f"### {icon} {_md(c.headline)}", "", _md(_settings_line(c)), ""]
    ordered = sorted(
        (r for r in c.rows if r.verdict != UNTESTABLE),
        key=lambda r: (_RANK.get(r.verdict, 3), r.effect),
    )
    regressions = [r for r in ordered if r.verdict == REGRESSION]
    others = [r for r in ordered if r.verdict != REGRESSION]
    if regressions:
        out += ["**Regressions**", "", *_md_table(regressions), ""]
    if others:
        title = "**Other tested keys**" if regressions else "**Tested keys**"
        out += [title, "", *_md_table(others[:limit]), ""]
    if len(others) > limit:
        out += [f"{len(others) - limit} more tested keys: see the JSON or text output.", ""]
    untestable = len(c.rows) - len(ordered)
    if untestable:
        out += [f"{untestable} keys untestable (fewer than two paired instances).", ""]
    if c.notes:
        out += [*(f"- {_md(n)}" for n in c.notes), ""]
    return "\n".join(out)


def render(c: Comparison, fmt: str) -> str:
    """``c`` in one of :data:`FORMATS`."""
    if fmt == "json":
        return json_text(c)
    if fmt == "junit":
        return junit(c)
    if fmt == "markdown":
        return markdown(c)
    return text(c)
