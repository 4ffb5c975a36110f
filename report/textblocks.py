"""The long form of a text report (pure: strings only): one block per (model, judge)
with every key's mean, interval and counts and its skill x difficulty matrix
(``flask-eval report --details``), and the judge agreement table."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from flask_eval.report.agreement import Agreement
from flask_eval.report.consistency import SelfConsistency
from flask_eval.report.document import Report, ReportRow, key_label, level_label, ranked_models
from flask_eval.report.metrics import (
    ABILITY,
    CAPABILITY,
    DIFFICULTY,
    DOMAIN,
    KEY_SEP,
    OVERALL,
    SKILL,
    SKILL_DIFFICULTY,
    TASK,
    TURN,
    Row,
)
from flask_eval.report.textgrid import DEFAULT_WIDTH, MAX_KEY_WIDTH, clip, fmt, fmt_interval

#: Sections of a (model, judge) detail block, in order: (dimension, title).
SECTIONS: tuple[tuple[str, str], ...] = (
    (OVERALL, "Overall"),
    (TURN, "Turns"),
    (ABILITY, "Abilities"),
    (SKILL, "Skills"),
    (CAPABILITY, "Capabilities"),
    (TASK, "Tasks"),
    (DOMAIN, "Domains"),
    (DIFFICULTY, "Difficulty"),
)


def confidence_level(report: Report) -> int:
    """The report's confidence level in percent (95 for 0.95)."""
    return round(100 * float(report.bootstrap.get("confidence", 0.95)))


def _level_order(level: str) -> tuple[bool, int, str]:
    """Sort key of difficulty level texts: numerically, anything non-numeric last."""
    return (not level.isdigit(), int(level) if level.isdigit() else 0, level)


def _level_legend(levels: Sequence[str], indent: str = "  ") -> list[str]:
    named = [level_label(lv) for lv in levels if level_label(lv) != lv]
    if not named:
        return []
    text = "levels: " + ", ".join(f"L{name}" for name in named)
    return textwrap.wrap(text, DEFAULT_WIDTH, initial_indent=indent, subsequent_indent=indent * 2)


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
        lines.append(f"  {clip(skill, key_width):<{key_width}}{cells}")
    return lines + _level_legend(ordered)


def _block(rows: Sequence[ReportRow], with_ci: bool, level: int) -> list[str]:
    shown = [r for r in rows if r.dimension != SKILL_DIFFICULTY]
    keys = [key_label(r.dimension, r.key) for r in shown]
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
            key = clip(key_label(r.dimension, r.key), width)
            ci = f"  {fmt_interval(r.ci_low, r.ci_high):<14}" if with_ci else ""
            lines.append(
                f"  {key:<{width}}  {fmt(r.mean):>6}{ci}  {r.n:>7}  {r.n_na:>6}  {r.n_failed:>6}"
            )
        lines.append("")
    matrix = [r for r in rows if r.dimension == SKILL_DIFFICULTY]
    if matrix:
        lines += [*_skill_difficulty_matrix(matrix), ""]
    return lines


def ordered_pairs(report: Report) -> list[tuple[str, str]]:
    """(model, judge) pairs of the rows: models best first, judges in report order."""
    pairs = list(dict.fromkeys((r.model, r.judge) for r in report.rows))
    models = ranked_models(report.rows, list(dict.fromkeys(m for m, _ in pairs)))
    judges = list(dict.fromkeys([*report.judges, *(j for _, j in pairs)]))
    rank_m, rank_j = {m: i for i, m in enumerate(models)}, {j: i for i, j in enumerate(judges)}
    return sorted(pairs, key=lambda p: (rank_m[p[0]], rank_j[p[1]]))


def detail_blocks(report: Report) -> list[str]:
    """One block per (model, judge), models best first: every key with its interval and
    counts, then the skill x difficulty matrix."""
    with_ci, level = bool(report.bootstrap.get("replicates")), confidence_level(report)
    blocks: list[str] = []
    for model, judge in ordered_pairs(report):
        mine = [r for r in report.rows if r.model == model and r.judge == judge]
        title = f"Model: {model}  |  Judge: {judge}"
        lines = [title, "=" * min(len(title), DEFAULT_WIDTH), *_block(mine, with_ci, level)]
        blocks.append("\n".join(lines).rstrip("\n"))
    return blocks


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
            f"{clip(r.judge_a, wa):<{wa}}  {clip(r.judge_b, wb):<{wb}}  "
            f"{clip(r.skill or 'all', ws):<{ws}}  {r.n:>7}  "
            f"{fmt(r.pearson, 3):>7}  {fmt(r.spearman, 3):>8}  {fmt(r.kendall_tau_b, 3):>6}  "
            f"{fmt(r.krippendorff_alpha, 3):>6}  {fmt(r.exact, 3):>6}  {fmt(r.within1, 3):>7}"
        )
    return "\n".join(lines) + "\n"


def self_consistency_table(rows: Sequence[SelfConsistency]) -> list[str]:
    """Each judge's agreement with itself over its repeated judgments (``run --samples``):
    the items scored in every sample, the share of them scored alike every time, the mean
    standard deviation of an item's scores and the intraclass correlation ICC(1)."""
    if not rows:
        return []
    wj = min(max(5, *(len(r.judge) for r in rows)), 40)
    head = (
        f"{'judge':<{wj}}  {'samples':>7}  {'items':>7}  {'all equal':>9}  "
        f"{'mean sd':>7}  {'ICC(1)':>6}"
    )
    lines = [
        "Self-consistency (each judge's repeated judgments of the same item)",
        head,
        "-" * len(head),
    ]
    for r in rows:
        lines.append(
            f"{clip(r.judge, wj):<{wj}}  {r.samples:>7}  {r.items:>7}  "
            f"{fmt(r.all_equal, 3):>9}  {fmt(r.mean_sd, 3):>7}  {fmt(r.icc, 3):>6}"
        )
    return lines
