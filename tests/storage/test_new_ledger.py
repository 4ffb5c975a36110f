"""A new run's ledger (issue 24): written in its unique index's order, its ids known from
the load itself, and its calls dispatched from the plan, the very calls that reading the
ledger back would make; when another writer took an id in between, they are read back."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Table, create_engine, select
from sqlalchemy.engine import Connection

from flask_eval.app import pipeline
from flask_eval.core import settings as settings_mod
from flask_eval.core.errors import InputError
from flask_eval.core.spec import run_spec
from flask_eval.producer.dispatch import MemoryTransport
from flask_eval.producer.plan import open_calls
from flask_eval.producer.synthetic import write_inputs
from flask_eval.storage.models import JUDGMENT, RUN
from flask_eval.storage.store import Store

MODELS = ("zeta", "alpha", "m10", "m9")  # given out of order: the ledger sorts them


def plan_of(folder: Path, name: str | None = "new", **options: Any) -> pipeline.Plan:
    """A plan of 4 models' responses to 12 instances, 2 judges; ``name`` None: the run's
    name is its fingerprint's, computed at once (a named run's is computed later)."""
    instances, responses = write_inputs(folder, 12, models=MODELS)
    return pipeline.prepare(
        run_spec(
            instances=str(instances),
            responses=responses,
            judges=["memory/j1", "memory/j2"],
            run_name=name,
            **options,
        )
    )


@pytest.mark.parametrize(
    "options", [{}, {"mode": "skill"}, {"pairwise": "all"}], ids=["instance", "skill", "pairwise"]
)
def test_a_new_run_sends_the_calls_its_ledger_reads_back(
    database_url: str, tmp_path: Path, options: dict[str, Any]
) -> None:
    plan = plan_of(tmp_path, **options)
    store = Store(database_url)
    sent = MemoryTransport()
    started = pipeline.start(plan, store, sent, settings_mod.load())
    assert started.created and started.run.ledger is not None  # the ids were known
    calls = open_calls(store, started.run)
    read_back = [c.ids for c in calls]
    assert [call for _, batch in sent.sent for call in batch] == read_back
    assert len(started.run.ledger) == sum(len(ids) for ids in read_back)
    # what an estimate reads of a call too: its model(s), instance, judge and criteria
    assert list(plan.new_calls(started.run.ledger)) == calls
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(JUDGMENT.c.model, JUDGMENT.c.instance_id).order_by(JUDGMENT.c.id)
        ).all()
        stored = conn.execute(select(RUN.c.fingerprint)).scalar_one()
    if "pairwise" not in options:  # absolute: by model, then instance id, as the index
        assert rows == sorted(rows) and rows[0].model == "alpha"
    # the fingerprint, computed while the ledger loaded, is the one computed at once
    assert stored == plan_of(tmp_path, None, **options).fingerprint
    assert pipeline.start(plan, store, MemoryTransport(), settings_mod.load()).created is False


def test_an_id_taken_by_another_writer_meanwhile_reads_the_calls_back(
    postgres_url: str, tmp_path: Path
) -> None:
    """Another session takes an id of the ledger's sequence while the new ledger loads:
    the ids are not one range, and the calls sent are those read from the ledger."""
    plan = plan_of(tmp_path)
    store = Store(postgres_url)
    other = create_engine(postgres_url.replace("postgresql://", "postgresql+psycopg://"))
    load = store._bulk_load

    def interleaved(conn: Connection, table: Table, columns: Any, rows: Iterable[Any]) -> None:
        if table.name == "judgment":
            with other.connect() as session:
                session.exec_driver_sql("SELECT nextval('judgment_id_seq')")
        load(conn, table, columns, rows)

    store._bulk_load = interleaved  # type: ignore[method-assign]
    sent = MemoryTransport()
    try:
        started = pipeline.start(plan, store, sent, settings_mod.load())
    finally:
        other.dispose()
    assert started.created and started.run.ledger is None
    read_back = [c.ids for c in open_calls(store, started.run)]
    assert [call for _, batch in sent.sent for call in batch] == read_back
    assert sum(len(ids) for ids in read_back) == plan.size()


def test_a_fingerprint_computed_aside_raises_its_error_where_it_is_asked_for(
    tmp_path: Path,
) -> None:
    """A named run's fingerprint is read in a thread while the ledger loads: a responses
    file changed since its validation raises there, when the write asks for it."""
    plan = plan_of(tmp_path)
    soon = plan.fingerprint_soon()
    assert callable(soon) and soon() == plan_of(tmp_path, None).fingerprint
    changed = plan_of(tmp_path / "changed")
    path = Path(changed.inputs.response_sets[0].path)
    path.write_text(path.read_text().replace('"text": "', '"text": "changed ', 1))
    with pytest.raises(InputError, match="changed after it was validated"):
        later = changed.fingerprint_soon()
        assert callable(later)
        later()
    assert isinstance(plan_of(tmp_path, None).fingerprint_soon(), str)  # known at once
