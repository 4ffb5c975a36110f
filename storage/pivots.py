"""A run's judgments as a pivot (:class:`Pivot`, read by ``storage.analytics.pivot``)
and what the pivot's reads set on PostgreSQL; apart so that ``storage.positions`` and
``storage.analytics`` share them without importing each other."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from flask_eval.storage.pivot_copy import CellKeys

#: PostgreSQL: memory for the grouping, so that ten million rows (670,000 cells) group in
#: memory, hashed in parallel: at 128 MB the planner sorted them on disk instead (19.4 s
#: for the pivot of 10M judgments instead of 7.0 s; docs/design/ledger-scale.md).
POSTGRES_WORK_MEM = "512MB"


@dataclass(frozen=True)
class Pivot:
    """Every judgment of a run, one row per (model, instance, criterion) cell and one column
    per judge: ``state`` (``core.types.STATE_*``) and ``score`` (NaN unless scored), with
    each instance's difficulty (None: unknown), domains, capability and task (BiGGen
    Bench's groups; None: the instance has none). ``report.scores.build_coded`` turns it
    into the report's score table."""

    keys: CellKeys
    judges: list[str]
    state: np.ndarray
    score: np.ndarray
    difficulty: dict[str, int | None]
    domains: dict[str, list[str]]
    capability: dict[str, str | None] = field(default_factory=dict)
    task: dict[str, str | None] = field(default_factory=dict)
    #: (row ids, call hashes), each (cells, judges), when read (``pivot(calls=True)``)
    calls: tuple[np.ndarray, np.ndarray] | None = None
    #: each instance's turn of a conversation (None: a one-shot instruction)
    turn: dict[str, int | None] = field(default_factory=dict)

    @property
    def cells(self) -> list[tuple[str, str, str]]:
        """The cells as (model, instance, criterion) strings."""
        return self.keys.cells()
