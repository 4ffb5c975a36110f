"""A pairwise run's rows reach the report in one order, whatever order its judgments
finished in: the fit behind the length-controlled win rate depends on the order of its
rows, so two stores holding the same judgments must give the same numbers."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from flask_eval.storage.analytics import pairwise_rows
from flask_eval.storage.models import JUDGMENT, utcnow
from flask_eval.storage.store import Store
from tests.conftest import EXAMPLES
from tests.report.ledger import judges, planned_run

pytestmark = pytest.mark.unit


def _finished(tmp_path: Path, name: str, backwards: bool) -> list[tuple[str, ...]]:
    """The done rows of one pairwise run whose judgments finished in id order, or in the
    reverse of it (``backwards``): each row's verdict is a function of the row alone."""
    store = Store(f"sqlite:///{tmp_path / name}.db")
    run = planned_run(
        store,
        name,
        instances=str(EXAMPLES / "instances.jsonl"),
        responses=[
            f"model_a={EXAMPLES / 'model_a.jsonl'}",
            f"model_b={EXAMPLES / 'model_b.jsonl'}",
        ],
        judges=judges("j1", "j2"),
        pairwise="all",
    )
    j = JUDGMENT.c
    start = utcnow()
    with store.engine.begin() as conn:
        ids = [r[0] for r in conn.execute(JUDGMENT.select().with_only_columns(j.id).order_by(j.id))]
        for k, row_id in enumerate(reversed(ids) if backwards else ids):
            conn.execute(
                update(JUDGMENT)
                .where(j.id == row_id)
                .values(status="done", score=row_id % 3, updated_at=start + timedelta(seconds=k))
            )
    done = [tuple(map(str, row)) for row in pairwise_rows(store, run.id).done]
    store.close()
    return done


def test_the_rows_of_a_pairwise_run_come_in_one_order_whatever_order_they_finished_in(
    tmp_path: Path,
) -> None:
    forwards = _finished(tmp_path, "forwards", backwards=False)
    backwards = _finished(tmp_path, "backwards", backwards=True)
    assert len(forwards) > 10
    assert backwards == forwards
