"""The pure reference of the report's aggregation, and test inputs as score tables.

``cells_from_records`` and ``rows_from_cells`` are a plain loop over judgment records,
the code whose numbers were matched with FLASK's own scripts; the production path
(``report.breakdown`` on a score table) is checked against them exactly.
``from_records`` builds a score table from records as ``storage.analytics`` builds one
from SQL; ``point_cells`` shapes the production sums like the reference's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from flask_eval.report.breakdown import Aggregation, Breakdown, Dimension, flask_breakdown
from flask_eval.report.metrics import (
    ABILITY,
    DIFFICULTY,
    DIMENSIONS,
    DOMAIN,
    KEY_SEP,
    OVERALL,
    OVERALL_KEY,
    SKILL,
    SKILL_DIFFICULTY,
    Row,
)
from flask_eval.report.scores import FAILED as FAILED_STATE
from flask_eval.report.scores import NA, NONE, SCORED, InstanceGroups, ScoreTable, build

DONE = "done"
FAILED = "failed"
_K = TypeVar("_K")
_SortKey = tuple[int, str, int]


@dataclass(frozen=True)
class Cell:
    """Sums over a group of judgments: ``total`` of scores, ``n`` scored, N/A, failed."""

    total: float = 0.0
    n: int = 0
    n_na: int = 0
    n_failed: int = 0

    def __add__(self, other: Cell) -> Cell:
        if not isinstance(other, Cell):
            return NotImplemented
        return Cell(
            total=self.total + other.total,
            n=self.n + other.n,
            n_na=self.n_na + other.n_na,
            n_failed=self.n_failed + other.n_failed,
        )

    @property
    def mean(self) -> float | None:
        return self.total / self.n if self.n else None

    @property
    def count(self) -> int:
        return self.n + self.n_na + self.n_failed


@dataclass(frozen=True)
class Record:
    """One judgment row as stored (``score`` None means N/A or not scored)."""

    model: str
    judge: str
    instance_id: str
    skill: str
    status: str
    score: float | None
    domains: tuple[str, ...] = ()
    difficulty: int | None = None


@dataclass
class Cells:
    """Grouped sums per (model, judge, ...) of the four breakdowns not derived from skills."""

    skill: dict[tuple[str, str, str], Cell] = field(default_factory=dict)
    domain: dict[tuple[str, str, str], Cell] = field(default_factory=dict)
    difficulty: dict[tuple[str, str, int], Cell] = field(default_factory=dict)
    skill_difficulty: dict[tuple[str, str, str, int], Cell] = field(default_factory=dict)


def cell_of(record: Record) -> Cell | None:
    if record.status == FAILED:
        return Cell(n_failed=1)
    if record.status != DONE:
        return None
    if record.score is None:
        return Cell(n_na=1)
    return Cell(total=float(record.score), n=1)


def _add(groups: dict[_K, Cell], key: _K, cell: Cell) -> None:
    groups[key] = groups.get(key, Cell()) + cell


def cells_from_records(records: Iterable[Record]) -> Cells:
    """The reference grouping: an instance counts toward each of its distinct domains;
    unknown domains and difficulties are left out of those breakdowns only."""
    cells = Cells()
    for r in records:
        cell = cell_of(r)
        if cell is None:
            continue
        _add(cells.skill, (r.model, r.judge, r.skill), cell)
        for domain in dict.fromkeys(r.domains):
            _add(cells.domain, (r.model, r.judge, domain), cell)
        if r.difficulty is not None:
            _add(cells.difficulty, (r.model, r.judge, r.difficulty), cell)
            _add(cells.skill_difficulty, (r.model, r.judge, r.skill, r.difficulty), cell)
    return cells


def _ranker(order: Sequence[str]) -> Callable[[str], int]:
    position = {key: i for i, key in enumerate(order)}
    return lambda key: position.get(key, len(position))


def rows_from_cells(
    cells: Cells,
    ability_of: Mapping[str, str],
    skill_order: Sequence[str] = (),
    ability_order: Sequence[str] = (),
    domain_order: Sequence[str] = (),
) -> list[Row]:
    """The reference rows: ``overall`` and ``ability`` are sums of skill cells; ordered by
    model, judge, dimension, then key (given orders, unknown keys alphabetically after;
    levels numerically; skill x difficulty by skill then level)."""
    missing = sorted({skill for (_, _, skill) in cells.skill} - set(ability_of))
    if missing:
        raise ValueError(f"no ability known for skill(s): {', '.join(missing)}")
    skill_rank, ability_rank = _ranker(skill_order), _ranker(ability_order)
    domain_rank = _ranker(domain_order)
    tables: dict[tuple[str, str], dict[str, dict[str, tuple[_SortKey, Cell]]]] = {}

    def put(model: str, judge: str, dimension: str, key: str, sort: _SortKey, cell: Cell) -> None:
        if cell.count == 0:
            return
        group = tables.setdefault((model, judge), {d: {} for d in DIMENSIONS})[dimension]
        previous = group.get(key)
        group[key] = (sort, cell if previous is None else previous[1] + cell)

    for (model, judge, skill), cell in cells.skill.items():
        ability = ability_of[skill]
        put(model, judge, OVERALL, OVERALL_KEY, (0, OVERALL_KEY, 0), cell)
        put(model, judge, SKILL, skill, (skill_rank(skill), skill, 0), cell)
        put(model, judge, ABILITY, ability, (ability_rank(ability), ability, 0), cell)
    for (model, judge, domain), cell in cells.domain.items():
        put(model, judge, DOMAIN, domain, (domain_rank(domain), domain, 0), cell)
    for (model, judge, level), cell in cells.difficulty.items():
        put(model, judge, DIFFICULTY, str(level), (0, "", level), cell)
    for (model, judge, skill, level), cell in cells.skill_difficulty.items():
        key = f"{skill}{KEY_SEP}{level}"
        put(model, judge, SKILL_DIFFICULTY, key, (skill_rank(skill), skill, level), cell)
    rows: list[Row] = []
    for model, judge in sorted(tables):
        for dimension in DIMENSIONS:
            group = tables[(model, judge)][dimension]
            for key, (_, c) in sorted(group.items(), key=lambda item: item[1][0]):
                rows.append(Row(model, judge, dimension, key, c.mean, c.n, c.n_na, c.n_failed))
    return rows


def aggregate(
    records: Iterable[Record],
    ability_of: Mapping[str, str],
    skill_order: Sequence[str] = (),
    ability_order: Sequence[str] = (),
    domain_order: Sequence[str] = (),
) -> list[Row]:
    """The reference report rows straight from judgment records."""
    return rows_from_cells(
        cells_from_records(records),
        ability_of,
        skill_order=skill_order,
        ability_order=ability_order,
        domain_order=domain_order,
    )


def state_of(status: str, score: float | None) -> int:
    """The table state of one ledger status and score."""
    if status == FAILED:
        return FAILED_STATE
    if status != DONE:
        return NONE
    return NA if score is None else SCORED


def from_records(records: Iterable[Record], judges: Sequence[str] = ()) -> ScoreTable:
    """A score table built from records, as ``storage.analytics`` builds it from SQL."""
    records = list(records)
    names = list(dict.fromkeys([*judges, *(r.judge for r in records)]))
    column = {j: k for k, j in enumerate(names)}
    keys = list(dict.fromkeys((r.model, r.instance_id, r.skill) for r in records))
    row = {k: n for n, k in enumerate(keys)}
    state = np.zeros((len(keys), len(names)), dtype=np.int8)
    score = np.full((len(keys), len(names)), np.nan)
    difficulty: dict[str, int | None] = {}
    domains: dict[str, Sequence[str]] = {}
    for r in records:
        n, j = row[(r.model, r.instance_id, r.skill)], column[r.judge]
        state[n, j] = state_of(r.status, r.score)
        if state[n, j] == SCORED:
            score[n, j] = float(r.score)  # type: ignore[arg-type]
        difficulty[r.instance_id] = r.difficulty
        domains[r.instance_id] = tuple(dict.fromkeys(r.domains))
    return build(keys, names, state, score, InstanceGroups(difficulty, domains))


#: The four breakdowns the reference groups itself (the others derive from skills).
BASE = Breakdown(
    (
        Dimension(SKILL, by=("skill",)),
        Dimension(DOMAIN, by=("domain",)),
        Dimension(DIFFICULTY, by=("difficulty",)),
        Dimension(SKILL_DIFFICULTY, by=("skill", "difficulty")),
    )
)


def point_cells(table: ScoreTable) -> Cells:
    """The production point sums of ``table`` (``report.breakdown``) shaped as the
    reference's :class:`Cells`, for comparing the two."""
    result = Cells()
    for r in _sum_rows(table):
        m, j, dim, key, cell = r
        if dim == SKILL:
            result.skill[(m, j, key)] = cell
        elif dim == DOMAIN:
            result.domain[(m, j, key)] = cell
        elif dim == DIFFICULTY:
            result.difficulty[(m, j, int(key))] = cell
        else:
            skill, _, level = key.rpartition(KEY_SEP)
            result.skill_difficulty[(m, j, skill, int(level))] = cell
    return result


def _sum_rows(table: ScoreTable) -> list[tuple[str, str, str, str, Cell]]:
    agg = Aggregation(table, BASE)
    out = []
    for g in agg.groupings:
        total, n, n_na, n_failed = agg.sums()[g.dimension.name]
        for k, m, j in zip(*np.nonzero(n + n_na + n_failed), strict=True):
            cell = Cell(
                float(total[k, m, j]), int(n[k, m, j]), int(n_na[k, m, j]), int(n_failed[k, m, j])
            )
            out.append((table.models[m], table.judges[j], g.dimension.name, g.keys[k], cell))
    return out


def flask_rows(
    records: Iterable[Record],
    ability_of: Mapping[str, str],
    skill_order: Sequence[str] = (),
    ability_order: Sequence[str] = (),
    domain_order: Sequence[str] = (),
) -> list[Row]:
    """The production rows of ``records`` (through a score table), after checking that
    they equal the reference's exactly."""
    records = list(records)
    orders = {
        "skill_order": skill_order,
        "ability_order": ability_order,
        "domain_order": domain_order,
    }
    breakdown = flask_breakdown(ability_of, **orders)
    rows = Aggregation(from_records(records), breakdown).rows()
    assert rows == aggregate(records, ability_of, **orders)
    return rows
