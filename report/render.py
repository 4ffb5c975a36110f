"""Rendering of report rows as JSON, CSV and plain-text tables (pure: strings only).

JSON and CSV keep full float precision; only the text tables round (2 decimals).
"""

from __future__ import annotations

import csv
import heapq
import io
import itertools
import json
from collections.abc import Sequence

from report.metrics import (
    ABILITY,
    DIFFICULTY,
    DOMAIN,
    KEY_SEP,
    OVERALL,
    SKILL,
    SKILL_DIFFICULTY,
    Row,
)

#: CSV columns, also the keys of :meth:`Row.as_dict`.
FIELDS: tuple[str, ...] = ("model", "judge", "dimension", "key", "mean", "n", "n_na", "n_failed")

#: Sections of :func:`to_table`, in order: (dimension, title).
SECTIONS: tuple[tuple[str, str], ...] = (
    (OVERALL, "Overall"),
    (ABILITY, "Abilities"),
    (SKILL, "Skills"),
    (DOMAIN, "Domains"),
    (DIFFICULTY, "Difficulty"),
)

NONE_TEXT = "-"
MAX_KEY_WIDTH = 40
DEFAULT_WIDTH = 100


def to_json(run: str, rows: Sequence[Row]) -> str:
    """``{"run": run, "rows": [...]}``, each row with the keys of :data:`FIELDS`."""
    payload = {"run": run, "rows": [row.as_dict() for row in rows]}
    return json.dumps(payload, indent=2, ensure_ascii=False) + "\n"


def to_csv(rows: Sequence[Row]) -> str:
    """CSV with a header of :data:`FIELDS`; a None mean is an empty field."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(FIELDS)
    for row in rows:
        writer.writerow(
            [
                row.model,
                row.judge,
                row.dimension,
                row.key,
                "" if row.mean is None else repr(row.mean),
                row.n,
                row.n_na,
                row.n_failed,
            ]
        )
    return buffer.getvalue()


def fmt_mean(mean: float | None) -> str:
    """A mean for display: 2 decimals, or "-" for None."""
    return NONE_TEXT if mean is None else f"{mean:.2f}"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 3, 1)] + "..."


def _level_order(level: str) -> tuple[bool, int, str]:
    """Sort key of difficulty level texts: numerically, anything non-numeric last."""
    return (not level.isdigit(), int(level) if level.isdigit() else 0, level)


def _merge_orders(sequences: Sequence[Sequence[str]]) -> list[str]:
    """One order of the keys of all ``sequences`` that respects each sequence's own order.

    A topological merge (ties broken by first appearance), so that a key missing from the
    first (model, judge) block still lands between its neighbours of the other blocks.
    """
    first: dict[str, int] = {}
    successors: dict[str, set[str]] = {}
    indegree: dict[str, int] = {}
    for sequence in sequences:
        for key in sequence:
            if key not in first:
                first[key] = len(first)
                successors[key] = set()
                indegree[key] = 0
        for before, after in itertools.pairwise(sequence):
            if before != after and after not in successors[before]:
                successors[before].add(after)
                indegree[after] += 1
    ready = [(first[key], key) for key in first if indegree[key] == 0]
    heapq.heapify(ready)
    merged: list[str] = []
    while ready:
        _, key = heapq.heappop(ready)
        merged.append(key)
        for after in successors[key]:
            indegree[after] -= 1
            if indegree[after] == 0:
                heapq.heappush(ready, (first[after], after))
    if len(merged) < len(first):  # inconsistent orders (a cycle): first appearance
        done = set(merged)
        merged.extend(key for key in first if key not in done)
    return merged


def _pairs(rows: Sequence[Row]) -> list[tuple[str, str]]:
    """The (model, judge) pairs of ``rows``, in order of first appearance."""
    return list(dict.fromkeys((row.model, row.judge) for row in rows))


def _section(title: str, rows: Sequence[Row], key_width: int) -> list[str]:
    lines = [title]
    lines.append(f"  {'':<{key_width}}  {'mean':>6}  {'n':>7}  {'N/A':>6}  {'failed':>6}")
    for row in rows:
        key = _clip(row.key, key_width)
        lines.append(
            f"  {key:<{key_width}}  {fmt_mean(row.mean):>6}  {row.n:>7}"
            f"  {row.n_na:>6}  {row.n_failed:>6}"
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
    ordered_levels = sorted(levels, key=_level_order)
    key_width = min(max([len("skill"), *(len(s) for s in skills)]), MAX_KEY_WIDTH)
    header = f"  {'skill':<{key_width}}" + "".join(f"  {'L' + lv:>6}" for lv in ordered_levels)
    lines = ["Skill x difficulty (mean)", header]
    for skill in skills:
        cells = "".join(f"  {fmt_mean(means.get((skill, lv))):>6}" for lv in ordered_levels)
        lines.append(f"  {_clip(skill, key_width):<{key_width}}{cells}")
    return lines


def to_table(rows: Sequence[Row]) -> str:
    """Plain-text tables, one block per (model, judge), fitting in 100 columns.

    Each block has the sections Overall, Abilities, Skills, Domains and Difficulty (mean
    with 2 decimals, scored n, N/A and failed counts; "-" for no mean), then a compact
    skill x difficulty matrix of means. Empty sections are left out.
    """
    blocks: list[str] = []
    for model, judge in _pairs(rows):
        mine = [row for row in rows if row.model == model and row.judge == judge]
        tabled = [row for row in mine if row.dimension != SKILL_DIFFICULTY]
        key_width = min(max([len("key"), *(len(row.key) for row in tabled)]), MAX_KEY_WIDTH)
        title = f"Model: {model}  |  Judge: {judge}"
        lines = [title, "=" * min(len(title), DEFAULT_WIDTH)]
        for dimension, section_title in SECTIONS:
            section_rows = [row for row in mine if row.dimension == dimension]
            if section_rows:
                lines.extend(_section(section_title, section_rows, key_width))
                lines.append("")
        matrix_rows = [row for row in mine if row.dimension == SKILL_DIFFICULTY]
        if matrix_rows:
            lines.extend(_skill_difficulty_matrix(matrix_rows))
            lines.append("")
        blocks.append("\n".join(lines).rstrip("\n"))
    return "\n\n".join(blocks) + "\n" if blocks else ""


def comparison_table(
    rows: Sequence[Row],
    dimension: str,
    key_order: Sequence[str] = (),
    width: int = DEFAULT_WIDTH,
) -> str:
    """One dimension compared across all (model, judge) pairs: keys as rows, pairs as columns.

    Column headers take two lines (model, then judge); cells are means with 2 decimals, "-"
    when a pair has no mean (or no row) for a key. Keys come in ``key_order`` first, then in
    the order the rows list them (merged over all pairs; difficulty levels numerically).
    When the columns do not fit in ``width`` characters they are split into several tables.
    """
    selected = [row for row in rows if row.dimension == dimension]
    if not selected:
        return ""
    pairs = _pairs(selected)
    means = {(row.model, row.judge, row.key): row.mean for row in selected}
    keys = _merge_orders(
        [[row.key for row in selected if (row.model, row.judge) == pair] for pair in pairs]
    )
    if dimension == DIFFICULTY:
        keys.sort(key=_level_order)
    position = {key: i for i, key in enumerate(key_order)}
    keys.sort(key=lambda k: position.get(k, len(position)))  # stable: keeps the rest in order

    key_width = min(max([len(dimension), *(len(k) for k in keys)]), MAX_KEY_WIDTH)
    col_widths = [max(6, len(model), len(judge)) for model, judge in pairs]

    chunks: list[list[int]] = [[]]
    used = 2 + key_width
    for index, col_width in enumerate(col_widths):
        if chunks[-1] and used + 2 + col_width > width:
            chunks.append([])
            used = 2 + key_width
        chunks[-1].append(index)
        used += 2 + col_width

    tables: list[str] = []
    for chunk in chunks:
        model_line = f"  {'model':<{key_width}}"
        judge_line = f"  {'judge':<{key_width}}"
        rule = f"  {'-' * key_width}"
        for i in chunk:
            model, judge = pairs[i]
            model_line += f"  {model:>{col_widths[i]}}"
            judge_line += f"  {judge:>{col_widths[i]}}"
            rule += "  " + "-" * col_widths[i]
        lines = [f"{dimension} (mean)", model_line, judge_line, rule]
        for key in keys:
            line = f"  {_clip(key, key_width):<{key_width}}"
            for i in chunk:
                model, judge = pairs[i]
                line += f"  {fmt_mean(means.get((model, judge, key))):>{col_widths[i]}}"
            lines.append(line)
        tables.append("\n".join(lines))
    return "\n\n".join(tables) + "\n"
