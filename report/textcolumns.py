"""The models-as-columns tables of the plain-text report (pure: strings only): per judge,
its means by every breakdown (:func:`judge_tables`), every (model, judge) in one table
(:func:`overview`) and the paired comparisons as a matrix per judge
(:func:`comparison_matrix`); :func:`report.text.to_table` prints them.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

from flask_eval.report.document import Report, key_label, ranked_models
from flask_eval.report.metrics import (
    ABILITY,
    BIGGEN_KEY,
    CAPABILITY,
    DIFFICULTY,
    DOMAIN,
    OVERALL,
    OVERALL_KEY,
    SKILL,
    TASK,
    TURN,
    Row,
)
from flask_eval.report.textblocks import SECTIONS, confidence_level
from flask_eval.report.textgrid import DEFAULT_WIDTH, NONE_TEXT, Section, fmt, grid


def judges_in(report: Report, rows: Sequence[Row]) -> list[str]:
    """The judges with a row in ``rows``, in the report's order."""
    present = {r.judge for r in rows}
    return [j for j in dict.fromkeys([*report.judges, *(r.judge for r in rows)]) if j in present]


def _keys(rows: Sequence[Row], order: Sequence[str]) -> list[str]:
    present = list(dict.fromkeys(r.key for r in rows))
    known = [k for k in order if k in present]
    rest = [k for k in present if k not in known]
    if all(k.isdigit() for k in rest):
        rest.sort(key=int)
    return known + rest


def _task_rows(report: Report, keys: Sequence[str]) -> list[tuple[str | None, str]]:
    """Tasks under their capability (in the capabilities' order), each group's tasks in
    the report's order; tasks of no known capability last."""
    by_group: dict[str | None, list[str]] = {}
    for task in keys:
        by_group.setdefault(report.task_capability.get(task), []).append(task)
    order = [
        *(c for c in report.capabilities if c in by_group),
        *(c for c in by_group if c is not None and c not in report.capabilities),
    ]
    rows: list[tuple[str | None, str]] = []
    for capability in order:
        rows.append((None, f"{capability}:"))
        rows += [(task, f"  {task}") for task in by_group[capability]]
    rows += [(task, task) for task in by_group.get(None, [])]
    return rows


def breakdown_sections(report: Report, rows: Sequence[Row]) -> list[Section]:
    """The sections of a models-as-columns table of ``rows`` (one judge's, or several):
    skill and ability only when they have more than one key (one would repeat the
    overall), BiGGen's two overalls side by side when there are both."""
    sections: list[Section] = []
    overall = {r.key for r in rows if r.dimension == OVERALL}
    if BIGGEN_KEY in overall:
        sections.append(
            (
                "Overall",
                OVERALL,
                [
                    (BIGGEN_KEY, key_label(OVERALL, BIGGEN_KEY)),
                    (OVERALL_KEY, "all judgments pooled"),
                ],
            )
        )
    orders = {
        ABILITY: report.abilities,
        SKILL: report.skills,
        CAPABILITY: report.capabilities,
        TASK: report.tasks,
        DOMAIN: report.domains,
        DIFFICULTY: (),
        TURN: (),
    }
    for dimension, title in SECTIONS[1:]:
        mine = [r for r in rows if r.dimension == dimension]
        keys = _keys(mine, orders[dimension])
        if not keys or (dimension in (SKILL, ABILITY) and len(keys) < 2):
            continue
        if dimension == TASK and report.task_capability:
            sections.append((f"{title} (by capability)", dimension, _task_rows(report, keys)))
        else:
            sections.append((title, dimension, [(k, key_label(dimension, k)) for k in keys]))
    return sections


def judge_tables(report: Report) -> list[str]:
    """Per judge: its means by every breakdown, models as columns, best first."""
    models = ranked_models(report.rows, report.models)
    lines: list[str] = []
    for judge in judges_in(report, report.rows):
        rows = [r for r in report.rows if r.judge == judge]
        sections = breakdown_sections(report, rows)
        present = [m for m in models if any(r.model == m for r in rows)]
        if not sections or not present:
            continue
        mean = {(r.model, r.dimension, r.key): r.mean for r in rows}

        def cell(
            c: int,
            dim: str,
            key: str,
            present: list[str] = present,
            mean: Mapping[tuple[str, str, str], float | None] = mean,
        ) -> str:
            return fmt(mean.get((present[c], dim, key)))

        lines += [
            f"Judge {judge}: mean by breakdown, models best first",
            *grid(sections, [[m] for m in present], cell),
            "",
        ]
    return lines[:-1]


def overview(report: Report) -> list[str]:
    """Every breakdown of every (model, judge) in one table: a column per judge under each
    model (models best first), judges tagged j1, j2, ... and named below."""
    models = ranked_models(report.rows, report.models)
    judges = judges_in(report, report.rows)
    present = {(r.model, r.judge) for r in report.rows}
    cols = [(m, j) for m in models for j in judges if (m, j) in present]
    sections = [s for s in breakdown_sections(report, report.rows) if s[1] != OVERALL]
    if not cols or not sections:
        return []
    tag = {j: f"j{k}" for k, j in enumerate(judges, start=1)}
    heads = [
        [model if k == 0 or cols[k - 1][0] != model else "", tag[judge]]
        for k, (model, judge) in enumerate(cols)
    ]
    mean = {(r.model, r.judge, r.dimension, r.key): r.mean for r in report.rows}
    legend = ", ".join(f"{tag[j]} {j}" for j in judges)
    return [
        "Mean by skill, ability, domain and difficulty (a column per judge, models best first)",
        *grid(sections, heads, lambda c, dim, key: fmt(mean.get((*cols[c], dim, key)))),
        *textwrap.wrap(
            f"judges: {legend}", DEFAULT_WIDTH, initial_indent="  ", subsequent_indent="    "
        ),
    ]


def comparison_matrix(report: Report) -> list[str]:
    """Per judge, the paired overall differences (row minus column)."""
    if not report.comparisons:
        return []
    level = confidence_level(report)
    lines = textwrap.wrap(
        "Paired comparisons: overall mean of the row model minus the column model's, on the "
        f"instances both answered (* when the {level}% CI excludes 0)",
        DEFAULT_WIDTH,
    )
    by_pair = {(c.judge, c.model_a, c.model_b): c for c in report.comparisons}
    order = list(dict.fromkeys(m for c in report.comparisons for m in (c.model_a, c.model_b)))
    rows, cols = order[:-1], order[1:]
    judges = list(dict.fromkeys(c.judge for c in report.comparisons))

    def cell(c: int, judge: str, key: str) -> str:
        comp = by_pair.get((judge, key, cols[c]))
        if comp is None:
            return ""
        lo, hi = comp.ci_low, comp.ci_high
        sure = lo is not None and hi is not None and (lo > 0 or hi < 0)
        return NONE_TEXT if comp.diff is None else f"{comp.diff:+.2f}" + ("*" if sure else " ")

    sections: list[Section] = [(f"judge {j}", j, [(m, m) for m in rows]) for j in judges]
    return lines + grid(sections, [[m] for m in cols], cell, least=7)
