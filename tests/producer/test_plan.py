"""Planning and dispatch without workers: the in-memory dispatcher records the batches."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from flask_eval.app import pipeline
from flask_eval.core import settings as settings_mod
from flask_eval.core.spec import run_spec
from flask_eval.core.types import Price
from flask_eval.producer.dispatch import MemoryTransport
from flask_eval.producer.plan import open_calls, planned_calls
from flask_eval.storage.store import Store
from tests.conftest import EXAMPLES

RESPONSES = [f"model_a={EXAMPLES / 'model_a.jsonl'}", f"model_b={EXAMPLES / 'model_b.jsonl'}"]


def plan(judges: tuple[str, ...] = ("memory/j1", "memory/j2")) -> pipeline.Plan:
    return pipeline.prepare(
        run_spec(
            instances=str(EXAMPLES / "instances.jsonl"),
            responses=RESPONSES,
            judges=judges,
            run_name="p",
        )
    )


def test_every_open_row_is_dispatched_once_in_bounded_batches(tmp_path: Path) -> None:
    settings = replace(settings_mod.load(), calls_per_message=5)
    store = Store(f"sqlite:///{tmp_path / 'p.db'}")
    sent = MemoryTransport()
    started = pipeline.start(plan(), store, sent, settings)
    ids = [i for _, batch in sent.sent for call in batch for i in call]
    assert started.dispatched.sent == (27 + 25) * 2  # one call per (model, instance, judge)
    assert all(len(batch) <= 5 for _, batch in sent.sent)
    assert sorted(ids) == sorted(set(ids))
    assert len(ids) == sum(len(c.ids) for c in open_calls(store, started.run))
    again = MemoryTransport()
    resumed = pipeline.start(plan(), store, again, settings)  # nothing done yet: all again
    assert (resumed.created, resumed.dispatched.sent) == (False, started.dispatched.sent)


def test_max_cost_holds_back_the_calls_past_the_budget(tmp_path: Path) -> None:
    base = plan(("memory/j1",))
    priced = replace(
        base, judges=tuple(replace(j, price=Price(1000.0, 1000.0)) for j in base.judges)
    )
    first = planned_calls(priced.inputs, priced.context())[0]
    one_call = next(priced.estimator().each([first])).cost
    sent = MemoryTransport()
    store = Store(f"sqlite:///{tmp_path / 'c.db'}")
    started = pipeline.start(priced, store, sent, settings_mod.load(), max_cost=one_call * 3.5)
    result = started.dispatched
    assert 1 <= result.sent <= 4 and result.held_back == 27 + 25 - result.sent
    assert result.estimated_cost <= one_call * 3.5


def test_calls_sent_again_are_not_estimated_again(tmp_path: Path) -> None:
    """The sweeper re-sends calls whose messages the broker lost: they were counted in
    the budget when first sent, so they go without an estimate (which would read every
    text of the run into the worker)."""
    from flask_eval.producer.dispatch import dispatch_open

    base = plan(("memory/j1",))
    priced = replace(
        base, judges=tuple(replace(j, price=Price(1000.0, 1000.0)) for j in base.judges)
    )
    store = Store(f"sqlite:///{tmp_path / 'c.db'}")
    started = pipeline.start(priced, store, MemoryTransport(), settings_mod.load(), max_cost=1e9)
    assert started.dispatched.estimated_cost > 0
    again = MemoryTransport()
    result = dispatch_open(store, started.run, again, 5, meter=False)
    assert result.sent == 27 + 25 and result.held_back == 0 and result.estimated_cost == 0
    assert sum(len(b) for _, b in again.sent) == 27 + 25
