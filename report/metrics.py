"""FLASK's aggregation math (pure: no database, no I/O).

A *judgment* is one (model, judge, instance, skill) whose status is ``"done"`` (score 1..5,
or N/A = ``None``) or ``"failed"``; any other status (pending, running, ...) is ignored.

Means are **micro-averages** over (instance, skill) score pairs, not means of per-instance
means. N/A and failed judgments never enter a mean; they are counted in ``n_na`` and
``n_failed``.

The work is split in two so that the SQL layer can do the grouping itself:

1. grouping judgments into :class:`Cells` (four maps of :class:`Cell` sums), done here by
   :func:`cells_from_records` (the reference) or from a SQL score table by
   ``report.scores.point_cells``;
2. :func:`rows_from_cells`, which derives ``overall`` and ``ability`` by *summing* skill
   cells (so they stay micro-averages) and emits ordered :class:`Row` objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

_K = TypeVar("_K")
_SortKey = tuple[int, str, int]

#: Statuses that count as judgments; everything else is ignored.
DONE = "done"
FAILED = "failed"

#: The report dimensions, in row order.
OVERALL = "overall"
SKILL = "skill"
ABILITY = "ability"
DOMAIN = "domain"
DIFFICULTY = "difficulty"
SKILL_DIFFICULTY = "skill_difficulty"
DIMENSIONS: tuple[str, ...] = (OVERALL, SKILL, ABILITY, DOMAIN, DIFFICULTY, SKILL_DIFFICULTY)

#: The single key of the ``overall`` dimension.
OVERALL_KEY = "all"

#: Separator of ``skill_difficulty`` keys: ``f"{skill}|{level}"``.
KEY_SEP = "|"


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
        """The mean score, or None when nothing was scored."""
        return self.total / self.n if self.n else None

    @property
    def count(self) -> int:
        """All judgments in the cell: scored, N/A and failed."""
        return self.n + self.n_na + self.n_failed


@dataclass(frozen=True)
class Record:
    """One judgment row as stored (``score`` None means N/A or not scored)."""

    model: str
    judge: str
    instance_id: str
    skill: str
    status: str
    score: int | None
    domains: tuple[str, ...] = ()
    difficulty: int | None = None


@dataclass(frozen=True)
class Row:
    """One line of a report: a (model, judge, dimension, key) and its statistics."""

    model: str
    judge: str
    dimension: str
    key: str
    mean: float | None
    n: int
    n_na: int
    n_failed: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "judge": self.judge,
            "dimension": self.dimension,
            "key": self.key,
            "mean": self.mean,
            "n": self.n,
            "n_na": self.n_na,
            "n_failed": self.n_failed,
        }


@dataclass
class Cells:
    """Grouped sums per (model, judge, ...): the contract with the SQL layer."""

    skill: dict[tuple[str, str, str], Cell] = field(default_factory=dict)
    domain: dict[tuple[str, str, str], Cell] = field(default_factory=dict)
    difficulty: dict[tuple[str, str, int], Cell] = field(default_factory=dict)
    skill_difficulty: dict[tuple[str, str, str, int], Cell] = field(default_factory=dict)


def cell_of(record: Record) -> Cell | None:
    """The contribution of one record, or None if its status is ignored."""
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
    """Group judgments into cells (the pure reference for the SQL ``GROUP BY``).

    An instance counts toward each of its (distinct) domains; instances without a known
    domain are left out of ``domain`` only, and those of unknown difficulty out of
    ``difficulty`` and ``skill_difficulty`` only.
    """
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
    """Position of a key in ``order``; unknown keys share the last rank (then alphabetical)."""
    position = {key: i for i, key in enumerate(order)}
    return lambda key: position.get(key, len(position))


def rows_from_cells(
    cells: Cells,
    ability_of: Mapping[str, str],
    skill_order: Sequence[str] = (),
    ability_order: Sequence[str] = (),
    domain_order: Sequence[str] = (),
) -> list[Row]:
    """Ordered report rows from grouped cells.

    ``overall`` and ``ability`` are sums of skill cells, hence micro-averages over
    (instance, skill) pairs. A row exists for each (model, judge, dimension, key) with at
    least one judgment. Rows are ordered by model, judge, then dimension (see
    :data:`DIMENSIONS`), then key: skills, abilities and domains in the given orders with
    unknown keys alphabetically after them, difficulty levels numerically, and
    ``skill_difficulty`` by skill then level.

    Raises ValueError if a skill has no entry in ``ability_of``.
    """
    missing = sorted({skill for (_, _, skill) in cells.skill} - set(ability_of))
    if missing:
        raise ValueError(f"no ability known for skill(s): {', '.join(missing)}")

    skill_rank = _ranker(skill_order)
    ability_rank = _ranker(ability_order)
    domain_rank = _ranker(domain_order)

    # (model, judge) -> dimension -> key text -> (sort key, Cell); sort key = (rank, name, level)
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
        dims = tables[(model, judge)]
        for dimension in DIMENSIONS:
            group = dims[dimension]
            for key, (_, cell) in sorted(group.items(), key=lambda item: item[1][0]):
                rows.append(
                    Row(
                        model=model,
                        judge=judge,
                        dimension=dimension,
                        key=key,
                        mean=cell.mean,
                        n=cell.n,
                        n_na=cell.n_na,
                        n_failed=cell.n_failed,
                    )
                )
    return rows


def aggregate(
    records: Iterable[Record],
    ability_of: Mapping[str, str],
    skill_order: Sequence[str] = (),
    ability_order: Sequence[str] = (),
    domain_order: Sequence[str] = (),
) -> list[Row]:
    """Report rows straight from judgment records (see :func:`rows_from_cells`)."""
    return rows_from_cells(
        cells_from_records(records),
        ability_of,
        skill_order=skill_order,
        ability_order=ability_order,
        domain_order=domain_order,
    )
