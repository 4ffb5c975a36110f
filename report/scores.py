"""The score table: every judgment of a run as numpy arrays (pure: no database, no I/O).

One row per *cell* (model, instance, skill); one column per judge. A judge's entry is a
state (:data:`NONE`, :data:`SCORED`, :data:`NA`, :data:`FAILED`) and, when scored, a score.
This is the contract between ``storage.analytics`` (which fills it with one ``GROUP BY``
query) and the statistics of ``report`` (means and bootstrap intervals through
``report.breakdown``, ensembles, agreement), which all work on whole columns at once.

Instances carry their difficulty (0 = unknown), a domain membership matrix, their
capability and task (BiGGen Bench's groups, MT-Bench's category; -1 = none) and their turn
of a conversation (0 = a one-shot instruction), so the report's breakdowns need no further
query.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from flask_eval.core.types import STATE_FAILED, STATE_NA, STATE_NONE, STATE_SCORED

#: Judgment states in a :class:`ScoreTable` (int8).
NONE = STATE_NONE  # no judgment, or not finished (pending, running): ignored
SCORED = STATE_SCORED  # done with a numeric score
NA = STATE_NA  # done, N/A
FAILED = STATE_FAILED  # failed

#: Difficulty level meaning "unknown".
UNKNOWN_LEVEL = 0

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
StateArray = npt.NDArray[np.int8]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class ScoreTable:
    """Judgments of one run, cell by judge.

    ``model``, ``instance`` and ``skill`` index ``models``, ``instances`` and ``skills``;
    ``state`` and ``score`` have one column per judge (``score`` is NaN unless SCORED).
    ``difficulty[i]`` is instance i's level (0 = unknown); ``domain_member[i, d]`` says
    whether instance i belongs to ``domains[d]``; ``capability[i]`` indexes
    ``capabilities`` and ``task[i]`` indexes ``tasks`` (-1: the instance has none; an
    empty array, the default, means no instance has one); ``turn[i]`` is instance i's turn
    of a conversation, 1-based (0: a one-shot instruction; empty, the default: none has
    one).
    """

    models: tuple[str, ...]
    instances: tuple[str, ...]
    skills: tuple[str, ...]
    judges: tuple[str, ...]
    model: IntArray
    instance: IntArray
    skill: IntArray
    state: StateArray
    score: FloatArray
    difficulty: IntArray
    domains: tuple[str, ...]
    domain_member: BoolArray
    capabilities: tuple[str, ...] = ()
    capability: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    tasks: tuple[str, ...] = ()
    task: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    turn: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def __post_init__(self) -> None:
        for name in ("capability", "task"):
            if len(getattr(self, name)) == 0 and self.instances:
                object.__setattr__(self, name, np.full(len(self.instances), -1, dtype=np.int64))
        if len(self.turn) == 0 and self.instances:
            object.__setattr__(self, "turn", np.zeros(len(self.instances), dtype=np.int64))
        if self.turn.shape != (len(self.instances),) or int(self.turn.min(initial=0)) < 0:
            raise ValueError("turn needs one entry >= 0 per instance (0: none)")
        cells, judges = len(self.model), len(self.judges)
        if not (len(self.instance) == len(self.skill) == cells):
            raise ValueError("model, instance and skill must have one entry per cell")
        if self.state.shape != (cells, judges) or self.score.shape != (cells, judges):
            raise ValueError("state and score must be (cells, judges)")
        if self.difficulty.shape != (len(self.instances),):
            raise ValueError("difficulty must have one entry per instance")
        if self.domain_member.shape != (len(self.instances), len(self.domains)):
            raise ValueError("domain_member must be (instances, domains)")
        if len(set(self.judges)) != judges:
            raise ValueError("judge names must be unique")
        for codes, labels in ((self.capability, self.capabilities), (self.task, self.tasks)):
            if codes.shape != (len(self.instances),) or int(codes.max(initial=-1)) >= len(labels):
                raise ValueError("capability and task need one code per instance (-1: none)")

    @property
    def conversations(self) -> bool:
        """Whether the instances are turns of conversations (any has a turn)."""
        return bool(len(self.turn)) and int(self.turn.max()) > 0

    @property
    def n_cells(self) -> int:
        return len(self.model)

    def judge_index(self, name: str) -> int:
        try:
            return self.judges.index(name)
        except ValueError:
            raise KeyError(f"unknown judge {name!r}") from None

    def with_judges(self, names: Sequence[str], state: StateArray, score: FloatArray) -> ScoreTable:
        """This table with more judge columns (ensembles, reference raters)."""
        if state.shape != (self.n_cells, len(names)) or score.shape != state.shape:
            raise ValueError("new judge columns must be (cells, len(names))")
        return replace(
            self,
            judges=(*self.judges, *names),
            state=np.concatenate([self.state, state.astype(np.int8)], axis=1),
            score=np.concatenate([self.score, score.astype(np.float64)], axis=1),
        )


def _codes(values: Iterable[str]) -> tuple[tuple[str, ...], IntArray]:
    names, inverse = np.unique(
        np.array(list(values), dtype=object).astype(str), return_inverse=True
    )
    return tuple(str(n) for n in names), inverse.astype(np.int64).reshape(-1)


def _groups(
    instances: Sequence[str], group_of: Mapping[str, str | None]
) -> tuple[tuple[str, ...], IntArray]:
    """(sorted labels, each instance's code, -1 for none) of a single-valued grouping."""
    labels = tuple(sorted({g for iid in instances if (g := group_of.get(iid)) is not None}))
    position = {label: k for k, label in enumerate(labels)}
    codes = [
        position.get(g, -1) if (g := group_of.get(iid)) is not None else -1 for iid in instances
    ]
    return labels, np.array(codes, dtype=np.int64).reshape(-1)


@dataclass(frozen=True)
class InstanceGroups:
    """What the report groups instances by, each keyed by instance id (missing or None:
    unknown): difficulty, domains (those of ``domain_order`` first, in its order), and
    BiGGen Bench's capability and task (MT-Bench's category is a capability), and the turn
    of a conversation."""

    difficulty: Mapping[str, int | None] = field(default_factory=dict)
    domains_of: Mapping[str, Sequence[str]] = field(default_factory=dict)
    domain_order: Sequence[str] = ()
    capability_of: Mapping[str, str | None] | None = None
    task_of: Mapping[str, str | None] | None = None
    #: the turn of a conversation (None or missing: a one-shot instruction)
    turn_of: Mapping[str, int | None] | None = None


def build(
    cells: Sequence[tuple[str, str, str]],
    judges: Sequence[str],
    state: StateArray,
    score: FloatArray,
    groups: InstanceGroups | None = None,
) -> ScoreTable:
    """A table from (model, instance_id, skill) cells and their (cells, judges) columns.

    Models, instances and skills are numbered in sorted order (so equal inputs give equal
    tables, whatever order a database returned them in); the cells are sorted the same way.
    ``groups`` are keyed by instance id (None: none known); capabilities and tasks are
    numbered sorted.
    """
    if len(cells) == 0:
        models: tuple[str, ...] = ()
        instances: tuple[str, ...] = ()
        skills: tuple[str, ...] = ()
        m = i = s = np.zeros(0, dtype=np.int64)
    else:
        models, m = _codes(c[0] for c in cells)
        instances, i = _codes(c[1] for c in cells)
        skills, s = _codes(c[2] for c in cells)
    return build_coded((models, instances, skills), (m, i, s), judges, state, score, groups)


def _sorted_used(labels: Sequence[str], codes: IntArray) -> tuple[tuple[str, ...], IntArray]:
    """``labels`` sorted and only those ``codes`` use, ``codes`` renumbered to match."""
    codes = np.asarray(codes, dtype=np.int64).reshape(-1)
    used = np.bincount(codes, minlength=len(labels)) > 0 if len(codes) else np.zeros(0, bool)
    keep = sorted((k for k in range(len(labels)) if used[k]), key=lambda k: labels[k])
    if len(keep) == len(labels) and keep == list(range(len(labels))):
        return tuple(labels), codes
    renumber = np.full(len(labels), -1, dtype=np.int64)
    renumber[keep] = np.arange(len(keep))
    return tuple(labels[k] for k in keep), renumber[codes]


def build_coded(
    labels: tuple[Sequence[str], Sequence[str], Sequence[str]],
    codes: tuple[IntArray, IntArray, IntArray],
    judges: Sequence[str],
    state: StateArray,
    score: FloatArray,
    groups: InstanceGroups | None = None,
) -> ScoreTable:
    """:func:`build` from cells given as codes: ``codes`` (model, instance, skill) index
    ``labels`` (distinct names; the table keeps those used, sorted, as :func:`build`)."""
    groups = InstanceGroups() if groups is None else groups
    difficulty, domains_of = groups.difficulty, groups.domains_of
    domain_order, capability_of, task_of = groups.domain_order, groups.capability_of, groups.task_of
    (models, m), (instances, i), (skills, s) = (
        _sorted_used(names, values) for names, values in zip(labels, codes, strict=True)
    )
    # by model, instance, skill: as np.lexsort((s, i, m)), in one key when it fits
    n_i, n_s = max(len(instances), 1), max(len(skills), 1)
    if float(max(len(models), 1)) * n_i * n_s < 2.0**62:
        order = np.argsort((m * n_i + i) * n_s + s, kind="stable")
    else:
        order = np.lexsort((s, i, m))
    seen = dict.fromkeys(domain_order)
    for iid in instances:
        seen.update(dict.fromkeys(domains_of.get(iid, ())))
    domains = tuple(seen)
    member = np.zeros((len(instances), len(domains)), dtype=bool)
    position = {d: k for k, d in enumerate(domains)}
    for k, iid in enumerate(instances):
        for d in domains_of.get(iid, ()):
            member[k, position[d]] = True
    levels = np.array(
        [difficulty.get(iid) or UNKNOWN_LEVEL for iid in instances], dtype=np.int64
    ).reshape(-1)
    # the cells in order, then NaN where not scored, in place (one copy of each array)
    ordered_state = np.asarray(state)[order].astype(np.int8, copy=False)
    ordered_state = ordered_state.reshape(len(order), len(judges))
    ordered_score = np.asarray(score, dtype=np.float64)[order].reshape(len(order), len(judges))
    ordered_score[ordered_state != SCORED] = np.nan
    capabilities, capability = _groups(instances, capability_of or {})
    tasks, task = _groups(instances, task_of or {})
    turn_of = groups.turn_of or {}
    turns = np.array([turn_of.get(iid) or 0 for iid in instances], dtype=np.int64).reshape(-1)
    return ScoreTable(
        models=models,
        instances=instances,
        skills=skills,
        judges=tuple(judges),
        model=m[order],
        instance=i[order],
        skill=s[order],
        state=ordered_state,
        score=ordered_score,
        difficulty=levels,
        domains=domains,
        domain_member=member,
        capabilities=capabilities,
        capability=capability,
        tasks=tasks,
        task=task,
        turn=turns,
    )
