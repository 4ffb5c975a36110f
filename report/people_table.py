"""People's columns of a score table: taken out of the judges' table, and the rows of the
items they rated as the People section reads them (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from flask_eval.core.people import is_person
from flask_eval.report.people_data import ScoreRow
from flask_eval.report.scores import NA, SCORED, ScoreTable

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Rated:
    """The cells (model, instance, criterion) a person scored or said N/A to (indices of
    the table's cells), and every finished score on them, people's and judges'."""

    cells: IntArray
    rows: list[ScoreRow]


NONE_RATED = Rated(np.zeros(0, dtype=np.int64), [])


def split_people(table: ScoreTable) -> tuple[ScoreTable, Rated]:
    """``table`` without the people's columns (the same table when it has none), and what
    they rated (:class:`Rated`)."""
    people = [n for n, judge in enumerate(table.judges) if is_person(judge)]
    if not people:
        return table, NONE_RATED
    keep = [n for n in range(len(table.judges)) if n not in set(people)]
    judges = replace(
        table,
        judges=tuple(table.judges[n] for n in keep),
        state=np.ascontiguousarray(table.state[:, keep]),
        score=np.ascontiguousarray(table.score[:, keep]),
    )
    finished = (table.state == SCORED) | (table.state == NA)
    cells = np.flatnonzero(finished[:, people].any(axis=1)).astype(np.int64)
    return judges, Rated(cells, cell_rows(table, cells, range(len(table.judges))))


def cell_rows(table: ScoreTable, cells: IntArray, columns: Sequence[int]) -> list[ScoreRow]:
    """The finished scores (N/A as None) of ``columns`` on ``cells``, cell by cell."""
    finished = (table.state == SCORED) | (table.state == NA)
    wanted = np.zeros(len(table.judges), dtype=bool)
    wanted[list(columns)] = True
    rows = []
    for cell in cells.tolist():
        model = table.models[int(table.model[cell])]
        instance = table.instances[int(table.instance[cell])]
        criterion = table.skills[int(table.skill[cell])]
        for column in np.flatnonzero(finished[cell] & wanted).tolist():
            scored = table.state[cell, column] == SCORED
            score = float(table.score[cell, column]) if scored else None
            rows.append(ScoreRow(table.judges[column], model, "", instance, criterion, score))
    return rows


def with_columns(rated: Rated, table: ScoreTable, judges: Sequence[str]) -> Rated:
    """``rated`` with the scores of ``table``'s columns not in ``judges`` (virtual judges
    added to the judges' table, e.g. ensembles) on the same cells."""
    extra = [n for n, judge in enumerate(table.judges) if judge not in set(judges)]
    if not extra or not len(rated.cells):
        return rated
    return Rated(rated.cells, [*rated.rows, *cell_rows(table, rated.cells, extra)])
