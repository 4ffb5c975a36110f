"""The report's breakdowns as data: the cell attributes keys are made of, a dimension, a
breakdown, and the breakdowns of FLASK's report and BiGGen Bench's (pure).

``report.breakdown`` resolves a :class:`Breakdown` on a score table (and re-exports these
names); see its docstring for how point estimates and replicates share one membership.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from flask_eval.report.metrics import (
    ABILITY,
    BIGGEN_KEY,
    CAPABILITY,
    DIFFICULTY,
    DOMAIN,
    OVERALL,
    OVERALL_KEY,
    SKILL,
    SKILL_DIFFICULTY,
    TASK,
    TURN,
)
from flask_eval.report.scores import IntArray, ScoreTable


@dataclass(frozen=True)
class Attribute:
    """One property of a table's cells: ``labels[code]`` is the text of a code.

    Single-valued: ``code[cell]`` (-1: unknown, the cell counts toward no key). Multi-valued:
    ``pairs = (cells, codes)``, a cell counting toward each of its codes. Numeric labels
    sort as numbers.
    """

    labels: tuple[str, ...]
    code: IntArray | None = None
    pairs: tuple[IntArray, IntArray] | None = None
    numeric: bool = False


def _skill(table: ScoreTable) -> Attribute:
    return Attribute(table.skills, code=table.skill)


def _difficulty(table: ScoreTable) -> Attribute:
    level = table.difficulty[table.instance]
    top = int(level.max(initial=0))
    labels = tuple(str(lv) for lv in range(top + 1))  # code = level; 0 is unknown
    return Attribute(labels, code=np.where(level > 0, level, -1), numeric=True)


def _domain(table: ScoreTable) -> Attribute:
    cells, domain = np.nonzero(table.domain_member[table.instance])
    return Attribute(table.domains, pairs=(cells.astype(np.int64), domain.astype(np.int64)))


def _capability(table: ScoreTable) -> Attribute:
    return Attribute(table.capabilities, code=table.capability[table.instance])


def _task(table: ScoreTable) -> Attribute:
    return Attribute(table.tasks, code=table.task[table.instance])


def _turn(table: ScoreTable) -> Attribute:
    turn = table.turn[table.instance]
    labels = tuple(str(t) for t in range(int(turn.max(initial=0)) + 1))  # code = turn
    return Attribute(labels, code=np.where(turn > 0, turn, -1), numeric=True)


#: The attributes a dimension can be made of, read off a table. A new kind of key is one
#: more entry here.
ATTRIBUTES: dict[str, Callable[[ScoreTable], Attribute]] = {
    "skill": _skill,
    "difficulty": _difficulty,
    "domain": _domain,
    "capability": _capability,
    "task": _task,
    "turn": _turn,
}


@dataclass(frozen=True)
class Dimension:
    """One breakdown of the report.

    A cell's key joins its values of the attributes ``by`` with ``KEY_SEP``; ``by=()``
    makes one key, ``key``, for every cell. ``rename`` maps keys to coarser ones (skill ->
    ability); keys it lacks are an error, unless ``partial`` (they count toward no key).
    ``mean_of`` makes the single key's mean the mean of another dimension's key means
    instead (``by`` and ``rename`` must then be empty). ``name`` identifies the dimension
    in its breakdown; its rows carry ``label`` (default: ``name``) as their dimension.
    """

    name: str
    by: tuple[str, ...] = ()
    rename: Mapping[str, str] | None = None
    mean_of: str | None = None
    label: str | None = None
    key: str = OVERALL_KEY
    partial: bool = False

    @property
    def shown(self) -> str:
        """The dimension its rows carry."""
        return self.label or self.name


@dataclass(frozen=True)
class Breakdown:
    """The dimensions of a report, in row order, and the preferred order of keys.

    ``orders`` is keyed by attribute (skill, domain) or by dimension (for renamed keys);
    keys missing from an order come after it alphabetically; numeric keys sort as numbers.
    """

    dimensions: tuple[Dimension, ...]
    orders: Mapping[str, Sequence[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [d.name for d in self.dimensions]
        if len(set(names)) != len(names):
            raise ValueError("dimension names must be unique")
        for d in self.dimensions:
            if d.mean_of is not None and (d.by or d.rename or d.mean_of not in names):
                raise ValueError(f"dimension {d.name}: mean_of needs a known dimension alone")
        rows = [(d.shown, None if d.by else d.key) for d in self.dimensions]
        keyed = {shown for shown, key in rows if key is None}
        if len(set(rows)) != len(rows) or any(key and shown in keyed for shown, key in rows):
            raise ValueError("two dimensions would write the same rows")


#: The internal name of BiGGen's overall (its rows say ``overall``, key ``biggen``).
BIGGEN_OVERALL = "overall_biggen"


def flask_breakdown(
    ability_of: Mapping[str, str],
    skill_order: Sequence[str] = (),
    ability_order: Sequence[str] = (),
    domain_order: Sequence[str] = (),
) -> Breakdown:
    """FLASK's report: overall, skill, ability, domain, difficulty, skill x difficulty."""
    return report_breakdown(ability_of, orders=KeyOrders(skill_order, ability_order, domain_order))


@dataclass(frozen=True)
class KeyOrders:
    """The preferred order of the keys of a report's dimensions (:class:`Breakdown`'s
    ``orders``: keys missing from an order come after it)."""

    skill: Sequence[str] = ()
    ability: Sequence[str] = ()
    domain: Sequence[str] = ()
    capability: Sequence[str] = ()
    task: Sequence[str] = ()


def report_breakdown(
    ability_of: Mapping[str, str],
    *,
    orders: KeyOrders | None = None,
    capabilities: bool = False,
    tasks: bool = False,
    partial_abilities: bool = False,
    turns: bool = False,
) -> Breakdown:
    """FLASK's breakdowns (:func:`flask_breakdown`), and BiGGen Bench's when asked, their
    keys in ``orders``.

    ``capabilities`` adds BiGGen's overall (the mean of the capability means, row
    ``("overall", "biggen")``) and the capability dimension; ``tasks`` the task
    dimension. ``partial_abilities``: criteria without an ability (an instance's own
    rubric) count toward no ability instead of being an error. ``turns`` (instances that
    are turns of conversations) adds the turn dimension after the overall, and keeps the
    capability dimension (MT-Bench's categories) without BiGGen's overall, which is
    BiGGen's rule, not MT-Bench's (FastChat pools every judgment).
    """
    orders = KeyOrders() if orders is None else orders
    dims = [
        Dimension(OVERALL),
        Dimension(SKILL, by=("skill",)),
        Dimension(ABILITY, by=("skill",), rename=ability_of, partial=partial_abilities),
    ]
    if turns:
        dims.insert(1, Dimension(TURN, by=("turn",)))
    if capabilities:
        if not turns:
            biggen = Dimension(BIGGEN_OVERALL, mean_of=CAPABILITY, label=OVERALL, key=BIGGEN_KEY)
            dims.insert(1, biggen)
        dims.append(Dimension(CAPABILITY, by=("capability",)))
    if tasks:
        dims.append(Dimension(TASK, by=("task",)))
    dims += [
        Dimension(DOMAIN, by=("domain",)),
        Dimension(DIFFICULTY, by=("difficulty",)),
        Dimension(SKILL_DIFFICULTY, by=("skill", "difficulty")),
    ]
    return Breakdown(
        tuple(dims),
        orders={
            "skill": orders.skill,
            ABILITY: orders.ability,
            "domain": orders.domain,
            "capability": orders.capability,
            "task": orders.task,
        },
    )
