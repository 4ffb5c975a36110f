"""The report with intervals: rows, paired comparisons, agreement; JSON, CSV and text.

``to_json`` keeps the contract of ``report.render.to_json`` (``{"run", "rows": [...]}``,
rows with ``model, judge, dimension, key, mean, n, n_na, n_failed``) and adds
``ci_low``/``ci_high`` to each row, plus the ``comparisons``, ``agreement`` and
``bootstrap`` keys. JSON and CSV keep full precision; text tables round to 2 decimals.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from report.agreement import FIELDS as AGREEMENT_FIELDS
from report.agreement import Agreement
from report.intervals import Comparison, Intervals
from report.metrics import (
    ABILITY,
    DIFFICULTY,
    DOMAIN,
    OVERALL,
    SKILL,
    Row,
)
from report.render import FIELDS as ROW_FIELDS

FIELDS: tuple[str, ...] = (*ROW_FIELDS, "ci_low", "ci_high")
COMPARISON_FIELDS: tuple[str, ...] = (
    "judge",
    "model_a",
    "model_b",
    "dimension",
    "key",
    "n_instances",
    "mean_a",
    "mean_b",
    "diff",
    "ci_low",
    "ci_high",
)
SECTIONS: tuple[tuple[str, str], ...] = (
    (OVERALL, "Overall"),
    (ABILITY, "Abilities"),
    (SKILL, "Skills"),
    (DOMAIN, "Domains"),
    (DIFFICULTY, "Difficulty"),
)


@dataclass(frozen=True)
class ReportRow(Row):
    """A report row (see :class:`report.metrics.Row`) with its bootstrap interval."""

    ci_low: float | None = None
    ci_high: float | None = None

    @classmethod
    def of(cls, row: Row, interval: tuple[float, float] | None) -> ReportRow:
        lo, hi = interval if interval is not None and row.mean is not None else (None, None)
        return cls(**vars(row), ci_low=lo, ci_high=hi)

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in FIELDS}


def with_intervals(rows: Sequence[Row], intervals: Intervals) -> list[ReportRow]:
    return [ReportRow.of(r, intervals.get((r.model, r.judge, r.dimension, r.key))) for r in rows]


@dataclass
class Report:
    """Everything a report shows, for one run."""

    run: str
    rows: list[ReportRow]
    comparisons: list[Comparison] = field(default_factory=list)
    agreement: list[Agreement] = field(default_factory=list)
    bootstrap: dict[str, Any] = field(default_factory=dict)
    coverage: dict[str, tuple[int, int]] = field(default_factory=dict)
    models: list[str] = field(default_factory=list)
    judges: list[str] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)
    abilities: list[str] = field(default_factory=list)
    ability_of: Mapping[str, str] = field(default_factory=dict)
    domains: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "rows": [r.as_dict() for r in self.rows],
            "comparisons": [c.as_dict() for c in self.comparisons],
            "agreement": [a.as_dict() for a in self.agreement],
            "bootstrap": self.bootstrap,
        }


def to_json(report: Report) -> str:
    return json.dumps(report.as_dict(), indent=2, ensure_ascii=False) + "\n"


def _csv(fields: Sequence[str], records: Sequence[Mapping[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(fields)
    for rec in records:
        writer.writerow(
            [
                "" if rec[f] is None else repr(rec[f]) if isinstance(rec[f], float) else rec[f]
                for f in fields
            ]
        )
    return buffer.getvalue()


def rows_csv(rows: Sequence[ReportRow]) -> str:
    """The report rows as CSV: the columns of ``report.render.to_csv`` plus the interval."""
    return _csv(FIELDS, [r.as_dict() for r in rows])


def comparisons_csv(comparisons: Sequence[Comparison]) -> str:
    return _csv(COMPARISON_FIELDS, [c.as_dict() for c in comparisons])


def agreement_csv(rows: Sequence[Agreement]) -> str:
    return _csv(AGREEMENT_FIELDS, [a.as_dict() for a in rows])


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def fmt_interval(low: float | None, high: float | None, digits: int = 2) -> str:
    return "" if low is None or high is None else f"[{low:.{digits}f}, {high:.{digits}f}]"


def to_table(report: Report) -> str:
    """Plain-text tables, one block per (model, judge), with the intervals."""
    level = round(100 * float(report.bootstrap.get("confidence", 0.95)))
    blocks: list[str] = []
    pairs = list(dict.fromkeys((r.model, r.judge) for r in report.rows))
    for model, judge in pairs:
        mine = [r for r in report.rows if r.model == model and r.judge == judge]
        width = min(max([3, *(len(r.key) for r in mine if r.dimension != "skill_difficulty")]), 40)
        title = f"Model: {model}  |  Judge: {judge}"
        lines = [title, "=" * min(len(title), 100)]
        for dimension, name in SECTIONS:
            section = [r for r in mine if r.dimension == dimension]
            if not section:
                continue
            lines.append(name)
            head = f"{level}% CI"
            lines.append(
                f"  {'':<{width}}  {'mean':>6}  {head:<14}  {'n':>7}  {'N/A':>6}  {'failed':>6}"
            )
            for r in section:
                key = r.key if len(r.key) <= width else r.key[: width - 3] + "..."
                lines.append(
                    f"  {key:<{width}}  {fmt(r.mean):>6}  {fmt_interval(r.ci_low, r.ci_high):<14}"
                    f"  {r.n:>7}  {r.n_na:>6}  {r.n_failed:>6}"
                )
            lines.append("")
        blocks.append("\n".join(lines).rstrip("\n"))
    text = "\n\n".join(blocks)
    if report.comparisons:
        lines = ["", "", f"Paired comparisons (overall, mean A - mean B, {level}% CI)"]
        for c in report.comparisons:
            lines.append(
                f"  {c.judge}: {c.model_a} - {c.model_b} = {fmt(c.diff):>5} "
                f"{fmt_interval(c.ci_low, c.ci_high)}  ({c.n_instances} instances)"
            )
        text += "\n".join(lines)
    return text + "\n" if text else ""


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def agreement_table(rows: Sequence[Agreement]) -> str:
    """Judge agreement as a plain-text table (``all`` for all skills)."""
    if not rows:
        return ""
    wa = min(max(7, *(len(r.judge_a) for r in rows)), 40)
    wb = min(max(7, *(len(r.judge_b) for r in rows)), 40)
    ws = min(max(5, *(len(r.skill or "all") for r in rows)), 26)
    head = (
        f"{'judge A':<{wa}}  {'judge B':<{wb}}  {'skill':<{ws}}  {'n':>7}  {'pearson':>7}  "
        f"{'spearman':>8}  {'tau_b':>6}  {'alpha':>6}  {'exact':>6}  {'within1':>7}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{_clip(r.judge_a, wa):<{wa}}  {_clip(r.judge_b, wb):<{wb}}  "
            f"{_clip(r.skill or 'all', ws):<{ws}}  {r.n:>7}  "
            f"{fmt(r.pearson, 3):>7}  {fmt(r.spearman, 3):>8}  {fmt(r.kendall_tau_b, 3):>6}  "
            f"{fmt(r.krippendorff_alpha, 3):>6}  {fmt(r.exact, 3):>6}  {fmt(r.within1, 3):>7}"
        )
    return "\n".join(lines) + "\n"
