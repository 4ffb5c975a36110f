"""Twins out of a run's tables (pure): a probe's twin (``core.probes``, a model named
``MODEL~VARIANT``) is judged beside the originals but is no model of its own, so no
ordinary table, interval, comparison or calibration ever counts it; its judgments go to
the judge card alone (``report.probe_card``)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from flask_eval.core.probes import is_twin
from flask_eval.report.scores import ScoreTable


def without_twins(table: ScoreTable) -> ScoreTable:
    """``table`` without the cells of twins (the same table when it has none); the
    models that remain keep their order."""
    twins = [n for n, model in enumerate(table.models) if is_twin(model)]
    if not twins:
        return table
    kept_models = [n for n in range(len(table.models)) if n not in set(twins)]
    code = np.full(len(table.models), -1, dtype=np.int64)
    code[kept_models] = np.arange(len(kept_models), dtype=np.int64)
    keep = code[table.model] >= 0
    return replace(
        table,
        models=tuple(table.models[n] for n in kept_models),
        model=np.ascontiguousarray(code[table.model][keep]),
        instance=np.ascontiguousarray(table.instance[keep]),
        skill=np.ascontiguousarray(table.skill[keep]),
        state=np.ascontiguousarray(table.state[keep]),
        score=np.ascontiguousarray(table.score[keep]),
    )
