"""The one renderer of a report as JSON, CSV and plain text (pure: strings only).

JSON is ``{"run", "judges", "rows": [...], "comparisons", "agreement", "bootstrap"}``,
each row with the keys of :data:`report.document.FIELDS`. JSON and CSV keep full float
precision and go through :func:`plain`, so a numpy number is written as a plain number
whatever its type; only the text tables round (2 decimals). Text tables show models best
first and difficulty levels with FLASK's names; JSON and CSV keep the keys "1".."5".

The row contract (JSON ``rows`` and CSV lines alike): each row is one (model, judge,
``dimension``, ``key``) with ``mean``, ``n``, ``n_na``, ``n_failed`` and the interval.
``dimension`` is one of

- ``overall``: key ``all``, every judgment pooled (FLASK's overall); and, when the
  instances carry capabilities, key ``biggen``: overall = mean of capability means, as
  BiGGen Bench's report computes it (each capability's mean counts once, however many
  judgments it has; its interval comes from the same replicates, recomputed the same way);
- ``skill``: one key per criterion (FLASK's skills, custom criteria, or an instance
  rubric's name: instances whose own rubrics share a name make one key);
- ``ability``: FLASK's abilities (criteria without one are in no ability row);
- ``capability``, ``task``: BiGGen Bench's groups (only when instances carry them);
- ``domain``, ``difficulty`` (keys ``"1"``..``"5"``), ``skill_difficulty``
  (``"skill|level"``).

A pairwise run's report adds the dimensions ``pairwise`` (key ``"A vs B"``: A's win,
tie and loss rates and score), ``rating`` (key = model: its Bradley-Terry rating),
``position`` (key = judge: position consistency and first-position preference) and
``length_bias`` (key = a bin of the length difference), each row with a ``criterion``
and the extra fields of its dimension, and a ``pairwise`` summary (models, anchor, judge
agreement, notes); :mod:`report.pairwise_report` defines them.

The JSON document also has ``definitions`` when some row needs saying what it is (BiGGen's
overall); the text header prints them.
"""

from __future__ import annotations

import csv
import io
import json
import math
import numbers
import shlex
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

import numpy as np

from flask_eval.report.agreement import FIELDS as AGREEMENT_FIELDS
from flask_eval.report.agreement import Agreement
from flask_eval.report.document import (
    FIELDS,
    Report,
    ReportRow,
    as_report,
    key_label,
    level_label,
    ranked_models,
)
from flask_eval.report.intervals import Comparison
from flask_eval.report.metrics import (
    ABILITY,
    CAPABILITY,
    DIFFICULTY,
    DOMAIN,
    KEY_SEP,
    OVERALL,
    OVERALL_KEY,
    SKILL,
    SKILL_DIFFICULTY,
    TASK,
    Row,
)

COMPARISON_FIELDS: tuple[str, ...] = ("judge", "model_a", "model_b", "dimension", "key",
    "n_instances", "mean_a", "mean_b", "diff", "ci_low", "ci_high")  # fmt: skip

#: Sections of :func:`to_table`, in order: (dimension, title).
SECTIONS: tuple[tuple[str, str], ...] = (
    (OVERALL, "Overall"),
    (ABILITY, "Abilities"),
    (SKILL, "Skills"),
    (CAPABILITY, "Capabilities"),
    (TASK, "Tasks"),
    (DOMAIN, "Domains"),
    (DIFFICULTY, "Difficulty"),
)

NONE_TEXT = "-"
MAX_KEY_WIDTH = 40
DEFAULT_WIDTH = 100


# -- JSON and CSV ---------------------------------------------------------------------


_AS_IS = frozenset({str, int, bool, type(None)})


def plain(value: Any) -> Any:
    """``value`` with every number a plain ``int`` or ``float`` (numpy scalars and arrays
    included), tuples as lists, and NaN or infinity as None: what JSON and CSV take."""
    kind = type(value)
    if kind in _AS_IS:  # the common cases first: a report has ~10^5 values
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is dict:
        return {str(k): plain(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [plain(v) for v in value]
    if isinstance(value, np.generic | np.ndarray):
        return plain(value.tolist())
    if isinstance(value, bool | str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def dumps(payload: Any) -> str:
    """Indented JSON of ``payload`` through :func:`plain` (strict: never NaN)."""
    return json.dumps(plain(payload), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def to_json(report: Report) -> str:
    return dumps(report.as_dict())


def _csv_field(value: Any) -> str:
    value = plain(value)
    if value is None:
        return ""
    return repr(value) if isinstance(value, float) else str(value)


def write_csv(out: TextIO, fields: Sequence[str], records: Iterable[Mapping[str, Any]]) -> None:
    """CSV with a header of ``fields``, streamed to ``out``: None (or a field a record
    lacks) is an empty field, floats at full precision. The one CSV writer: reports and
    ``flask-eval export`` both write through it."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(fields)
    for rec in records:
        writer.writerow([_csv_field(rec.get(f)) for f in fields])


def write_jsonl(out: TextIO, records: Iterable[Mapping[str, Any]]) -> None:
    """One JSON object per line, streamed to ``out`` (UTF-8 text as is, never NaN)."""
    for rec in records:
        out.write(json.dumps(plain(rec), ensure_ascii=False, allow_nan=False) + "\n")


def csv_text(fields: Sequence[str], records: Sequence[Mapping[str, Any]]) -> str:
    """:func:`write_csv` into a string."""
    buffer = io.StringIO()
    write_csv(buffer, fields, records)
    return buffer.getvalue()


def rows_csv(rows: Sequence[Row]) -> str:
    """Report rows as CSV: the row fields plus the interval (empty without one)."""
    return csv_text(FIELDS, [r.as_dict() for r in as_report(rows).rows])


def report_csv(report: Report) -> str:
    """All rows of a report as CSV: :func:`rows_csv`, or for a pairwise run every row
    (absolute and pairwise dimensions) with the wider ``PAIRWISE_FIELDS``."""
    if report.pairwise is None:
        return rows_csv(report.rows)
    from flask_eval.report.pairwise_report import PAIRWISE_FIELDS

    plain_rows = [dict.fromkeys(PAIRWISE_FIELDS) | r.as_dict() for r in report.rows]
    return csv_text(PAIRWISE_FIELDS, [*plain_rows, *report.pairwise.rows()])


def comparisons_csv(comparisons: Sequence[Comparison]) -> str:
    return csv_text(COMPARISON_FIELDS, [c.as_dict() for c in comparisons])


def agreement_csv(rows: Sequence[Agreement]) -> str:
    return csv_text(AGREEMENT_FIELDS, [a.as_dict() for a in rows])


# -- text -----------------------------------------------------------------------------


def fmt(value: float | None, digits: int = 2) -> str:
    """A number for display, or "-" for None."""
    return NONE_TEXT if value is None else f"{value:.{digits}f}"


def fmt_interval(low: float | None, high: float | None, digits: int = 2) -> str:
    return "" if low is None or high is None else f"[{low:.{digits}f}, {high:.{digits}f}]"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 3, 1)] + "..."


def _display_key(dimension: str, key: str) -> str:
    return key_label(dimension, key)


def _level_order(level: str) -> tuple[bool, int, str]:
    """Sort key of difficulty level texts: numerically, anything non-numeric last."""
    return (not level.isdigit(), int(level) if level.isdigit() else 0, level)


def _level_legend(levels: Sequence[str], indent: str = "  ") -> list[str]:
    named = [level_label(lv) for lv in levels if level_label(lv) != lv]
    if not named:
        return []
    text = "levels: " + ", ".join(f"L{name}" for name in named)
    return textwrap.wrap(text, DEFAULT_WIDTH, initial_indent=indent, subsequent_indent=indent * 2)


def _confidence(report: Report) -> int:
    return round(100 * float(report.bootstrap.get("confidence", 0.95)))


def header(report: Report) -> list[str]:
    """Run, how each judge was sampled, coverage and the interval method (text lines)."""
    lines = [f"Run: {report.run}"] if report.run else []
    if report.judge_settings:
        lines.append("Judges (name: spec, sampling):")
        lines += [f"  {j.name}: {j.describe()}" for j in report.judge_settings]
    lines += [f"coverage {m}: {a}/{t}" for m, (a, t) in report.coverage.items()]
    lines += [f"{d['label']}: {d['definition']}" for d in report.definitions]
    boot = report.bootstrap
    if boot.get("replicates"):
        lines.append(
            f"Intervals: {_confidence(report)}% percentile bootstrap, {boot['replicates']} "
            f"replicates resampling {boot.get('instances')} instances (seed {boot.get('seed')})"
        )
    return lines


def _skill_difficulty_matrix(rows: Sequence[Row]) -> list[str]:
    """Skills as rows, difficulty levels as columns, mean scores in the cells."""
    means: dict[tuple[str, str], float | None] = {}
    skills: dict[str, None] = {}
    levels: dict[str, None] = {}
    for row in rows:
        skill, _, level = row.key.rpartition(KEY_SEP)
        skills[skill] = None
        levels[level] = None
        means[(skill, level)] = row.mean
    ordered = sorted(levels, key=_level_order)
    key_width = min(max([len("skill"), *(len(s) for s in skills)]), MAX_KEY_WIDTH)
    head = f"  {'skill':<{key_width}}" + "".join(f"  {'L' + lv:>6}" for lv in ordered)
    lines = ["Skill x difficulty (mean)", head]
    for skill in skills:
        cells = "".join(f"  {fmt(means.get((skill, lv))):>6}" for lv in ordered)
        lines.append(f"  {_clip(skill, key_width):<{key_width}}{cells}")
    return lines + _level_legend(ordered)


def _block(rows: Sequence[ReportRow], with_ci: bool, level: int) -> list[str]:
    shown = [r for r in rows if r.dimension != SKILL_DIFFICULTY]
    keys = [_display_key(r.dimension, r.key) for r in shown]
    width = min(max([len("key"), *(len(k) for k in keys)]), MAX_KEY_WIDTH)
    lines: list[str] = []
    ci_head = f"  {f'{level}% CI':<14}" if with_ci else ""
    for dimension, title in SECTIONS:
        section = [r for r in rows if r.dimension == dimension]
        if not section:
            continue
        head = f"  {'':<{width}}  {'mean':>6}{ci_head}  {'n':>7}  {'N/A':>6}  {'failed':>6}"
        lines += [title, head]
        for r in section:
            key = _clip(_display_key(r.dimension, r.key), width)
            ci = f"  {fmt_interval(r.ci_low, r.ci_high):<14}" if with_ci else ""
            lines.append(
                f"  {key:<{width}}  {fmt(r.mean):>6}{ci}  {r.n:>7}  {r.n_na:>6}  {r.n_failed:>6}"
            )
        lines.append("")
    matrix = [r for r in rows if r.dimension == SKILL_DIFFICULTY]
    if matrix:
        lines += [*_skill_difficulty_matrix(matrix), ""]
    return lines


def _ordered_pairs(report: Report) -> list[tuple[str, str]]:
    """(model, judge) pairs of the rows: models best first, judges in report order."""
    pairs = list(dict.fromkeys((r.model, r.judge) for r in report.rows))
    models = ranked_models(report.rows, list(dict.fromkeys(m for m, _ in pairs)))
    judges = list(dict.fromkeys([*report.judges, *(j for _, j in pairs)]))
    rank_m, rank_j = {m: i for i, m in enumerate(models)}, {j: i for i, j in enumerate(judges)}
    return sorted(pairs, key=lambda p: (rank_m[p[0]], rank_j[p[1]]))


def to_table(report: Report | Sequence[Row]) -> str:
    """Plain-text tables: the header, then one block per (model, judge), models best first.

    Each block has the sections Overall, Abilities, Skills, Capabilities, Tasks, Domains
    and Difficulty (mean
    with 2 decimals, the interval when the report has a bootstrap, scored n, N/A and
    failed counts; "-" for no mean), then a compact skill x difficulty matrix of means.
    Empty sections are left out. Then the paired comparisons, if any.
    """
    report = as_report(report)
    with_ci, level = bool(report.bootstrap.get("replicates")), _confidence(report)
    blocks: list[str] = []
    for model, judge in _ordered_pairs(report):
        mine = [r for r in report.rows if r.model == model and r.judge == judge]
        title = f"Model: {model}  |  Judge: {judge}"
        lines = [title, "=" * min(len(title), DEFAULT_WIDTH), *_block(mine, with_ci, level)]
        blocks.append("\n".join(lines).rstrip("\n"))
    head = header(report)
    text = "\n\n".join(["\n".join(head)] * bool(head) + blocks)
    if report.comparisons:
        lines = ["", "", f"Paired comparisons (overall, mean A - mean B, {level}% CI)"]
        for c in report.comparisons:
            lines.append(
                f"  {c.judge}: {c.model_a} - {c.model_b} = {fmt(c.diff):>5} "
                f"{fmt_interval(c.ci_low, c.ci_high)}  ({c.n_instances} instances)"
            )
        text += "\n".join(lines)
    if report.pairwise is not None:
        from flask_eval.report.pairwise_render import text as pairwise_text

        text = (text.rstrip("\n") + "\n\n" if text.strip() else "") + pairwise_text(
            report.pairwise, level
        )
    return text + "\n" if text.strip() and not text.endswith("\n") else text


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


def run_summary(report: Report, failures: Mapping[str, int]) -> str:
    """The few lines `flask-eval run` ends with: overall mean per model x judge with its
    interval (models best first), failures by reason, and where to look next."""
    overall = {
        (r.model, r.judge): r
        for r in report.rows
        if r.dimension == OVERALL and r.key == OVERALL_KEY
    }
    pairs = [p for p in _ordered_pairs(report) if p in overall]
    level = _confidence(report)
    mw = min(max([5, *(len(m) for m, _ in pairs)]), MAX_KEY_WIDTH)
    jw = min(max([5, *(len(j) for _, j in pairs)]), MAX_KEY_WIDTH)
    if report.pairwise is not None:  # a pairwise run: its leaderboards instead
        pw = report.pairwise
        lines = [f"Run {report.run}: Bradley-Terry ratings per judge (anchor {pw.anchor} at "
                 f"1000), best first"]  # fmt: skip
        for judge in pw.judges:
            board = ", ".join(f"{r.model} {fmt(r.rating, 0)}" for r in pw.leaderboard(judge))
            lines.append(f"  {judge}: {board or 'no finished comparisons'}")
    else:
        lines = [f"Run {report.run}: overall mean per model and judge, best first"]
    if pairs:
        ci = f"{level}% CI"
        lines.append(f"  {'model':<{mw}}  {'judge':<{jw}}  {'mean':>6}  {ci:<14}  {'n':>7}")
    for model, judge in pairs:
        r = overall[(model, judge)]
        lines.append(
            f"  {_clip(model, mw):<{mw}}  {_clip(judge, jw):<{jw}}  {fmt(r.mean):>6}  "
            f"{fmt_interval(r.ci_low, r.ci_high) or NONE_TEXT:<14}  {r.n:>7}"
        )
    if not pairs and report.pairwise is None:
        lines.append("  no finished judgments")
    failed = {reason: n for reason, n in failures.items() if n}
    detail = ", ".join(f"{reason} {n}" for reason, n in sorted(failed.items(), key=lambda x: -x[1]))
    lines.append(f"Failures: {sum(failed.values())} ({detail})" if failed else "Failures: none")
    run = shlex.quote(report.run)
    hints = (
        (f"flask-eval report {run}", "every breakdown, with intervals"),
        (f"flask-eval report {run} --format html", "figures and tables in one page"),
        (f"flask-eval export {run}", "one row per judgment, with the raw judge output"),
    )
    cw = max(len(command) for command, _ in hints)
    lines.append("Where to look next:")
    lines += [f"  {command:<{cw}}  {what}" for command, what in hints]
    return "\n".join(lines) + "\n"
