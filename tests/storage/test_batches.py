"""The provider batches in the ledger (storage/batches.py), on SQLite and PostgreSQL: a
parked call outlives worker leases, a batch is written before it is submitted, calls
only move forward, failed calls are planned again and then fail for good, one worker
holds the lane's lease at a time."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from flask_eval.core.errors import Status
from flask_eval.storage.batch_rows import (
    COLLECTED,
    CREATED,
    FAILED,
    PLANNED,
    SUBMITTED,
    Parked,
)
from flask_eval.storage.batches import BatchLedger
from flask_eval.storage.models import JUDGMENT, utcnow
from flask_eval.storage.store import Store
from tests.storage.test_store import create, open_ids

J = JUDGMENT.c


def parked(run_id: int, rows: list[int], uid: str, tokens: int = 10) -> Parked:
    request = {"messages": [{"role": "user", "content": "x"}], "generate": {"max_tokens": 9}}
    return Parked(uid, run_id, "memory/j1", rows, "k" * 64, request, tokens)


def leases(store: Store, ids: list[int]) -> dict[int, tuple[str, object, int]]:
    with store.engine.connect() as conn:
        rows = conn.execute(select(J.id, J.status, J.lease_until, J.claims).where(J.id.in_(ids)))
        return {r.id: (r.status, r.lease_until, r.claims) for r in rows}


def test_a_parked_call_keeps_its_rows_out_of_every_worker_s_reach(database_url: str) -> None:
    """Parked rows stay running under the lane's long lease with a new claim token: no
    claim takes them, and the heartbeat of the worker that parked them no longer renews
    (shortens) their lease."""
    store = Store(database_url)
    run_id = create(store)
    ids = open_ids(store, run_id)[0]
    claimed = store.claim_contexts(run_id, ids, 60)
    ledger = BatchLedger(store)
    until = utcnow() + timedelta(days=2)
    assert ledger.park([parked(run_id, ids, "c1")], until) == 1
    assert ledger.park([parked(run_id, ids, "c1")], until) == 0  # a replay parks nothing
    assert store.claim_contexts(run_id, ids, 60) == []
    assert store.extend_leases({c.id: c.claims for c in claimed}, 60) == set()
    assert all(status == Status.RUNNING for status, _, _ in leases(store, ids).values())
    assert ledger.open_judges() == [(run_id, "memory/j1")]
    [call] = ledger.planned(run_id, "memory/j1", 10)
    assert (call.uid, call.state, call.rows, call.tries) == ("c1", PLANNED, ids, 0)


def test_a_batch_is_written_before_it_is_sent_and_moves_forward_only(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    groups = open_ids(store, run_id)
    ledger = BatchLedger(store)
    until = utcnow() + timedelta(days=2)
    ledger.park([parked(run_id, g, f"c{i}") for i, g in enumerate(groups[:3])], until)
    calls = ledger.planned(run_id, "memory/j1", 10)
    taken = ledger.create_batch("tag1", run_id, "memory/j1", "openai", [c.id for c in calls])
    assert taken == sorted(c.id for c in calls)
    # a second writer racing for the same calls gets none of them, and writes no batch
    assert ledger.create_batch("tag2", run_id, "memory/j1", "openai", taken) == []
    [batch] = ledger.open_batches()
    assert (batch.uid, batch.state, batch.provider_id, batch.size) == ("tag1", CREATED, None, 3)
    assert ledger.queued_tokens(run_id, "memory/j1") == 30
    ledger.record("tag1", "batch_abc", "in_progress", files={"input": "file-1"})
    [batch] = ledger.open_batches()
    assert (batch.state, batch.provider_id, batch.provider_state) == (
        SUBMITTED,
        "batch_abc",
        "in_progress",
    )
    ledger.mark_collected(["c0", "c1", "c2"])
    ledger.end_batch("tag1", "collected")
    assert ledger.open_batches() == [] and ledger.open_judges() == []
    ledger.end_batch("tag1", FAILED)  # an ended batch stays ended
    assert [b.state for b in ledger.batches(run_id)] == ["collected"]
    assert ledger.call_states(run_id) == {COLLECTED: 3}


def test_unanswered_calls_are_planned_again_then_fail_for_good(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    ids = open_ids(store, run_id)[0]
    store.claim_contexts(run_id, ids, 60)
    ledger = BatchLedger(store)
    ledger.park([parked(run_id, ids, "c1")], utcnow() + timedelta(days=2))
    for attempt in range(1, 4):
        [call] = ledger.planned(run_id, "memory/j1", 10)
        ledger.create_batch(f"t{attempt}", run_id, "memory/j1", "openai", [call.id])
        gone = ledger.requeue(["c1"], "batch_expired", max_tries=3)
        if attempt < 3:
            assert gone == [] and ledger.call_states(run_id) == {PLANNED: 1}
    assert [c.uid for c in gone] == ["c1"] and ledger.call_states(run_id) == {FAILED: 1}
    # the failed call's rows are taken back under a worker's lease, to be failed
    contexts = ledger.retake(ids, 60)
    assert sorted(c.id for c in contexts) == sorted(ids)
    assert all(c.claims == 3 for c in contexts)  # claimed, parked, then taken back


def test_one_worker_at_a_time_holds_the_lane(database_url: str) -> None:
    ledger = BatchLedger(Store(database_url))
    assert ledger.take_lease("lane", "w1", 60)
    assert ledger.take_lease("lane", "w1", 60)  # renewed by its holder
    assert not ledger.take_lease("lane", "w2", 60)
    assert ledger.take_lease("other", "w2", 60)
    assert ledger.take_lease("short", "w1", -1)  # already run out: anyone takes it
    assert ledger.take_lease("short", "w2", 60)


def test_deleting_a_run_deletes_its_batches(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    ids = open_ids(store, run_id)[0]
    ledger = BatchLedger(store)
    ledger.park([parked(run_id, ids, "c1")], utcnow() + timedelta(days=2))
    ledger.create_batch(
        "t", run_id, "memory/j1", "openai", [c.id for c in ledger.planned(run_id, "memory/j1", 5)]
    )
    store.delete_run(run_id)
    assert ledger.open_batches() == [] and ledger.open_judges() == []
