"""Deleting a run, and what a worker may still write for it; leases held by a claim's
token (SQLite and PostgreSQL)."""

from __future__ import annotations

import threading

from sqlalchemy import select

from flask_eval.core.errors import Status
from flask_eval.storage.models import CALL, JUDGMENT
from flask_eval.storage.records import Outcome
from flask_eval.storage.store import Store
from tests.helpers import wait_until
from tests.storage.test_store import answer, create, open_ids

J, C = JUDGMENT.c, CALL.c


def calls_of(store: Store) -> dict[str, int | None]:
    """Every paid answer in the store: uid -> the run it belongs to."""
    with store.engine.connect() as conn:
        return {r.uid: r.run_id for r in conn.execute(select(C.uid, C.run_id))}


def test_deleting_a_run_keeps_only_the_answers_other_runs_use(database_url: str) -> None:
    store = Store(database_url)
    gone, kept = create(store, "gone", "a" * 64), create(store, "kept", "b" * 64)
    mine, theirs = open_ids(store, gone)[0], open_ids(store, kept)[0]
    store.write(
        [answer(gone, "k", "good", True, "shared"), answer(gone, "l", "x", True, "own")],
        [Outcome(i, Status.DONE, score=3, call_uid="own") for i in mine],
    )
    store.write([], [Outcome(i, Status.DONE, score=4, call_uid="shared") for i in theirs])
    store.delete_run(gone)
    assert calls_of(store) == {"shared": None}  # replayed by the other run: it stays
    assert store.find_run("gone") is None and store.is_deleted(gone)
    assert store.find_run("kept") is not None and store.count_open(kept) > 0
    # SQLite gives the id of the newest run, once deleted, to the next: that one can be
    # deleted too
    last = create(store, "last", "c" * 64)
    store.delete_run(last)
    again = create(store, "again", "d" * 64)
    store.delete_run(again)
    assert store.is_deleted(again) and store.find_run("again") is None


def test_an_answer_paid_for_a_deleted_run_is_kept_attached_to_no_run(database_url: str) -> None:
    """A worker's call was on its way when the run was deleted: its paid answer is kept
    (and the answer cache may replay it), its outcomes change nothing, and a halt of the
    run's judge is not recorded; nothing raises."""
    store = Store(database_url)
    run_id = create(store)
    ids = open_ids(store, run_id)[0]
    store.claim_contexts(run_id, ids, 60)
    store.delete_run(run_id)
    late = [Outcome(i, Status.DONE, score=5, call_uid="late") for i in ids]
    finished = store.write([answer(run_id, "k", "late", True, "late")], late)
    assert finished == 0
    assert calls_of(store) == {"late": None}
    assert store.cached_calls(["k" * 64])["k" * 64].raw == "late"
    store.halt(run_id, "memory/j1", "auth", "halted")
    assert store.halts(run_id) == {}


def test_an_answer_written_while_its_run_is_being_deleted_is_kept(postgres_url: str) -> None:
    """PostgreSQL: the delete holds the run's row; a worker's answer for the run waits
    for it, finds the run gone once the delete commits, and is written again, attached
    to no run."""
    store = Store(postgres_url)
    run_id = create(store)
    ids = open_ids(store, run_id)[0]
    written: list[int] = []
    with store.engine.connect() as deleting:
        with deleting.begin():
            deleting.exec_driver_sql(f"SELECT id FROM run WHERE id = {run_id} FOR UPDATE")
            writer = threading.Thread(
                target=lambda: written.append(
                    store.write(
                        [answer(run_id, "k", "late", True, "late")],
                        [Outcome(i, Status.DONE, score=5) for i in ids],
                    )
                )
            )
            writer.start()
            wait_until(  # the write waits for the run's row
                lambda: deleting.exec_driver_sql(
                    "SELECT count(*) FROM pg_locks WHERE NOT granted"
                ).scalar(),
                lambda waiting: bool(waiting),
                timeout=30,
                what="the write to wait",
            )
            for table in ("judgment", "response", "instance_domain", "instance", "run"):
                column = "id" if table == "run" else "run_id"
                deleting.exec_driver_sql(f"DELETE FROM {table} WHERE {column} = {run_id}")
        writer.join(timeout=30)
    assert written == [0]
    assert calls_of(store) == {"late": None}


def test_a_lease_is_renewed_and_given_back_only_under_its_own_claim(database_url: str) -> None:
    """A worker whose lease ran out while it was stopped finds the rows another worker
    claimed since are no longer its own: it neither renews nor gives them back."""
    store = Store(database_url)
    run_id = create(store)
    first, second = open_ids(store, run_id)[:2]
    stale = {c.id: c.claims for c in store.claim_contexts(run_id, first, -1)}  # ran out
    mine = {c.id: c.claims for c in store.claim_contexts(run_id, second, 60)}
    taken = {c.id: c.claims for c in store.claim_contexts(run_id, first, 60)}  # another's
    assert set(taken) == set(first) and all(taken[i] == stale[i] + 1 for i in first)
    assert store.extend_leases({**stale, **mine}, 60) == set(second)
    assert store.give_back(stale) == 0
    assert store.give_back(mine) == len(second)
    with store.engine.connect() as conn:
        rows = dict(conn.execute(select(J.id, J.status).where(J.id.in_([*first, *second]))).all())
    assert rows == {**{i: "running" for i in first}, **{i: "pending" for i in second}}
    assert store.existing_runs([run_id, run_id + 99]) == {run_id}
