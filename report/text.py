"""A report as plain text (pure: strings only), made to read well with many models.

:func:`to_table` prints, in order:

- the header: run, how each judge was sampled, coverage, definitions, interval method;
- the **leaderboard**: models best first, one column per judge with the headline mean
  and its interval (FLASK's pooled overall; BiGGen's overall, the mean of capability
  means, when the instances carry capabilities), one per reference rater, then the
  judgments scored, N/A and failed;
- per judge, **models as columns** (best first) by ability, skill, capability, task
  (under its capability), domain and difficulty: means only (the intervals are in the
  JSON, CSV and HTML reports, and in ``details``), drawn by ``report.textcolumns``;
- the paired comparisons as one matrix per judge (row minus column, ``*`` when the
  interval excludes 0);
- each judge's self-consistency, for a run of repeated judgments (``run --samples``);
- the pairwise part of a pairwise run (``report.pairwise_render``);
- MT-Bench's scores as FastChat computes them, for a run of conversations
  (``report.mtbench_render``);
- the People section when people rated items of the run (``report.people_render``: their
  means, their agreement with each other, each judge against them, the largest
  disagreements), and the notes;
- with ``details``, one block per (model, judge) with every key's interval and counts,
  and its skill x difficulty matrix (``report.textblocks``).

The tables are ``report.textgrid.grid``'s: names are never cut in column heads (a long
model or judge name wraps over several lines, at ``/``, ``-``, ``_`` where it can), and
columns that do not fit in 100 characters continue in a second table. 8 models x 2
judges on FLASK's skills take ~120 lines (the per-block layout took 1,127).
"""

from __future__ import annotations

import shlex
import textwrap
from collections.abc import Mapping, Sequence

from flask_eval.report.document import (
    Report,
    ReportRow,
    as_report,
    headline_key,
    ranked_models,
)
from flask_eval.report.metrics import (
    BIGGEN_KEY,
    OVERALL,
    OVERALL_KEY,
    Row,
)
from flask_eval.report.textblocks import (
    agreement_table,
    confidence_level,
    detail_blocks,
    self_consistency_table,
)
from flask_eval.report.textcolumns import comparison_matrix, judge_tables, judges_in
from flask_eval.report.textgrid import (
    DEFAULT_WIDTH,
    MAX_KEY_WIDTH,
    NONE_TEXT,
    clip,
    column_width,
    fmt,
    fmt_interval,
    wrap_name,
)

__all__ = [
    "agreement_table",
    "fmt",
    "fmt_interval",
    "leaderboard",
    "run_summary",
    "to_table",
]

# -- header ---------------------------------------------------------------------------------


def header(report: Report) -> list[str]:
    """Run (and, in progress, its pending count), how each judge was sampled, coverage
    and the interval method (text lines)."""
    lines = [f"Run: {report.run}"] if report.run else []
    lines += _in_progress(report)
    if report.judge_settings:
        lines.append("Judges (name: spec, sampling):")
        lines += [f"  {j.name}: {j.describe()}" for j in report.judge_settings]
    if report.costs:
        lines.append("Cost (paid calls, USD at each judge's price):")
        lines += [f"  {c.judge}: {c.describe()}" for c in report.costs]
    if report.coverage:
        covered = ", ".join(f"{m} {a}/{t}" for m, (a, t) in report.coverage.items())
        lines += textwrap.wrap(
            f"Coverage (instances answered): {covered}", DEFAULT_WIDTH, subsequent_indent="  "
        )
    lines += [f"{d['label']}: {d['definition']}" for d in report.definitions]
    boot = report.bootstrap
    if boot.get("replicates"):
        lines.append(
            f"Intervals: {confidence_level(report)}% percentile bootstrap, {boot['replicates']} "
            f"replicates resampling {boot.get('instances')} instances (seed {boot.get('seed')})"
        )
    return lines


def _in_progress(report: Report) -> list[str]:
    """The line saying the report is partial, wrapped; none for a finished run."""
    if report.progress is None or not report.progress.in_progress:
        return []
    return textwrap.wrap(report.progress.describe(), DEFAULT_WIDTH, subsequent_indent="  ")


# -- leaderboard ----------------------------------------------------------------------------


def _headline(report: Report) -> tuple[str, dict[tuple[str, str], ReportRow]]:
    key = headline_key(report.rows)
    rows = {(r.model, r.judge): r for r in report.rows if r.dimension == OVERALL and r.key == key}
    return key, rows


def leaderboard(report: Report) -> list[str]:
    """Models best first, a column per judge (headline mean and interval) and per
    reference rater (its mean on the run's cells), then the judgments counted."""
    key, cells = _headline(report)
    if not cells:
        return []
    pooled = {
        (r.model, r.judge): r
        for r in report.rows
        if r.dimension == OVERALL and r.key == OVERALL_KEY
    }
    models = ranked_models(report.rows, report.models)
    models = [m for m in models if any(m == mm for mm, _ in cells)]
    judges = judges_in(report, list(cells.values()))
    refs = list(dict.fromkeys(r.name for r in report.reference_means))
    ref_mean = {(r.name, r.model): r.mean for r in report.reference_means}
    with_ci = any(r.ci_low is not None for r in cells.values())
    names = [*judges, *(f"{name} (reference)" for name in refs)]
    cw = column_width(names, 17 if with_ci else 6, 20)
    heads = [wrap_name(n, cw) for n in names]
    mw = min(max([5, *(len(m) for m in models)]), MAX_KEY_WIDTH)
    what = "overall (BiGGen: mean of capability means)" if key == BIGGEN_KEY else "overall mean"
    interval = f" with its {confidence_level(report)}% CI" if with_ci else ""
    lines = [f"Leaderboard: {what}{interval} per judge; best first by the mean over judges"]
    depth = max(len(h) for h in heads)
    counts = f"  {'scored':>7}  {'N/A':>6}  {'failed':>6}"
    for level in range(depth):
        row = "".join(
            f"  {(h[level - depth + len(h)] if level >= depth - len(h) else ''):<{cw}}"
            for h in heads
        )
        last = level == depth - 1
        lead = f"  {'#':>2}  {'model':<{mw}}" if last else f"  {'':>2}  {'':<{mw}}"
        lines.append(f"{lead}{row}{counts if last else ''}")
    for rank, model in enumerate(models, start=1):
        row = ""
        for judge in judges:
            r = cells.get((model, judge))
            text = NONE_TEXT if r is None else fmt(r.mean)
            if r is not None and with_ci and r.ci_low is not None:
                text += " " + fmt_interval(r.ci_low, r.ci_high)
            row += f"  {text:<{cw}}"
        row += "".join(f"  {fmt(ref_mean.get((name, model))):<{cw}}" for name in refs)
        mine = [pooled[(model, j)] for j in judges if (model, j) in pooled]
        n, na, failed = (sum(getattr(r, f) for r in mine) for f in ("n", "n_na", "n_failed"))
        lines.append(f"  {rank:>2}  {clip(model, mw):<{mw}}{row}  {n:>7}  {na:>6}  {failed:>6}")
    lines += _ranking_agreement(cells, judges, ref_mean, refs, models)
    return [line.rstrip() for line in lines]


def _ranking_agreement(
    cells: Mapping[tuple[str, str], Row],
    judges: Sequence[str],
    ref_mean: Mapping[tuple[str, str], float | None],
    refs: Sequence[str],
    models: Sequence[str],
) -> list[str]:
    """How each judge ranks the models against each reference rater: Kendall's tau-b of
    their means (three models or more)."""
    import numpy as np  # here: only with reference raters

    from flask_eval.report.agreement import pair_statistics

    lines = []
    for name in refs:
        parts = []
        for judge in judges:
            pairs = [
                (cells[(m, judge)].mean, ref_mean.get((name, m)))
                for m in models
                if (m, judge) in cells
            ]
            both = [(a, b) for a, b in pairs if a is not None and b is not None]
            if len(both) >= 3:
                judged, rated = np.array(both).T
                tau = pair_statistics(judged, rated)["kendall_tau_b"]
                parts.append(f"{judge} {fmt(tau)} ({len(both)} models)")
        if parts:
            lines += textwrap.wrap(
                f"Ranking agreement with {name} (Kendall's tau-b of the model "
                f"means): {', '.join(parts)}",
                DEFAULT_WIDTH,
                initial_indent="  ",
                subsequent_indent="    ",
            )
    return lines


# -- the whole report ---------------------------------------------------------------------------


def to_table(report: Report | Sequence[Row], details: bool = False) -> str:
    """The report as plain text (see the module docstring); "" for an empty report."""
    report = as_report(report)
    parts = [
        header(report),
        leaderboard(report),
        judge_tables(report),
        comparison_matrix(report),
        self_consistency_table(report.self_consistency),
    ]
    blocks = ["\n".join(p) for p in parts if p]
    if report.pairwise is not None:
        from flask_eval.report.pairwise_render import text as pairwise_text

        blocks.append(pairwise_text(report.pairwise, confidence_level(report)).rstrip("\n"))
    if report.mtbench is not None:
        from flask_eval.report.mtbench_render import text as mtbench_text

        blocks.append("\n".join(mtbench_text(report.mtbench)).rstrip("\n"))
    if report.people is not None:
        from flask_eval.report.people_render import text as people_text

        blocks.append("\n".join(people_text(report.people, confidence_level(report))))
    if report.calibration is not None:
        from flask_eval.report.calibration_render import text as calibration_text

        blocks.append("\n".join(calibration_text(report.calibration, details)))
    notes = [*report.notes, *(report.pairwise.notes if report.pairwise is not None else ())]
    if notes:
        blocks.append(
            "\n".join(
                ["Notes:"]
                + [
                    textwrap.fill(n, DEFAULT_WIDTH, initial_indent="  - ", subsequent_indent="    ")
                    for n in notes
                ]
            )
        )
    if details:
        blocks += detail_blocks(report)
    if (
        not report.rows
        and report.pairwise is None
        and report.people is None
        and report.calibration is None
        and not report.in_progress
    ):
        return ""
    return "\n\n".join(blocks) + "\n"


def run_summary(report: Report, failures: Mapping[str, int], more: Sequence[str] = ()) -> str:
    """The few lines `flask-eval run` ends with: the leaderboard (a pairwise run's
    Bradley-Terry ratings per judge), ``more`` lines (the demo's breakdown), the pending
    count of a run in progress, failures by reason, and where to look next."""
    lines = [f"Run {report.run}"]
    if report.pairwise is not None:
        pw = report.pairwise
        lines[0] += f": Bradley-Terry ratings per judge (anchor {pw.anchor} at 1000), best first"
        for judge in pw.judges:
            board = ", ".join(f"{r.model} {fmt(r.rating, 0)}" for r in pw.leaderboard(judge))
            lines.append(f"  {judge}: {board or 'no finished comparisons'}")
    else:
        lines += leaderboard(report) or ["  no finished judgments"]
    lines += ["", *more, ""] if more else []
    lines += _in_progress(report)
    failed = {reason: n for reason, n in failures.items() if n}
    detail = ", ".join(f"{reason} {n}" for reason, n in sorted(failed.items(), key=lambda x: -x[1]))
    lines.append(f"Failures: {sum(failed.values())} ({detail})" if failed else "Failures: none")
    run = shlex.quote(report.run)
    hints = (
        (f"flask-eval report {run}", "every breakdown, models as columns"),
        (f"flask-eval report {run} --format html", "figures and tables in one page"),
        (f"flask-eval export {run}", "one row per judgment, with the raw judge output"),
    )
    cw = max(len(command) for command, _ in hints)
    lines.append("Where to look next:")
    lines += [f"  {command:<{cw}}  {what}" for command, what in hints]
    return "\n".join(lines) + "\n"
