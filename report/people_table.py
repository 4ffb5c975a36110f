"""People's columns of a score table: taken out of the judges' table, and the rows of the
items they rated as the People section reads them (pure)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from flask_eval.core.people import is_person
from flask_eval.report.people_data import ScoreRow
from flask_eval.report.scores import NA, SCORED, ScoreTable


def split_people(table: ScoreTable) -> tuple[ScoreTable, list[ScoreRow]]:
    """``table`` without the people's columns (the same table when it has none), and the
    finished scores (N/A as None) of every column, people's and judges', on the cells
    (model, instance, criterion) a person scored or said N/A to."""
    people = [n for n, judge in enumerate(table.judges) if is_person(judge)]
    if not people:
        return table, []
    keep = [n for n in range(len(table.judges)) if n not in set(people)]
    judges = replace(
        table,
        judges=tuple(table.judges[n] for n in keep),
        state=np.ascontiguousarray(table.state[:, keep]),
        score=np.ascontiguousarray(table.score[:, keep]),
    )
    finished = (table.state == SCORED) | (table.state == NA)
    cells = np.flatnonzero(finished[:, people].any(axis=1))
    rows = []
    for cell in cells.tolist():
        model = table.models[int(table.model[cell])]
        instance = table.instances[int(table.instance[cell])]
        criterion = table.skills[int(table.skill[cell])]
        for column in np.flatnonzero(finished[cell]).tolist():
            scored = table.state[cell, column] == SCORED
            score = float(table.score[cell, column]) if scored else None
            rows.append(ScoreRow(table.judges[column], model, "", instance, criterion, score))
    return judges, rows
