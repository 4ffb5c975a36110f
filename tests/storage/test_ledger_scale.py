"""The ledger at scale (issue 24, docs/design/ledger-scale.md): the PostgreSQL tallies
agree with the ledger after every kind of write; the read side's statements have an
index to follow (EXPLAIN); a run is deleted in chunks behind its tombstone, keeping the
answers other runs use, while other writers go on."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import event, func, select

from flask_eval.core.errors import Status
from flask_eval.storage import live, queries, tally
from flask_eval.storage.judgment_pages import JudgmentQuery, judgment_page
from flask_eval.storage.models import CALL, JUDGMENT
from flask_eval.storage.records import CallRecord, Outcome
from flask_eval.storage.store import Store
from tests.storage.test_leasing import calls_of
from tests.storage.test_store import answer, create, open_ids

J, C = JUDGMENT.c, CALL.c


def grouped(store: Store, run_id: int) -> tuple[list[Any], dict[str, tuple[float, ...]]]:
    """The run's counts and call sums as the ledger itself says (no tally)."""
    with store.engine.connect() as conn:
        counts = sorted(
            (str(j), str(s), r, int(n))
            for j, s, r, n in conn.execute(
                select(J.judge, J.status, J.reason, func.count())
                .where(J.run_id == run_id)
                .group_by(J.judge, J.status, J.reason)
            )
        )
        sums = {
            str(r[0]): tuple(float(v) for v in r[1:])
            for r in conn.execute(
                select(
                    C.judge,
                    func.count(),
                    func.count().filter(C.batch.is_(True)),
                    func.sum(C.prompt_tokens),
                    func.sum(C.completion_tokens),
                    func.sum(C.cached_tokens),
                    func.sum(C.cache_write_tokens),
                    func.sum(C.cost),
                )
                .where(C.run_id == run_id)
                .group_by(C.judge)
            )
        }
    return counts, sums


def tallied(store: Store, run_id: int) -> tuple[list[Any], dict[str, tuple[float, ...]]]:
    with store.engine.connect() as conn:
        counts = sorted(tally.judgment_counts(conn, run_id))
        sums = {j: tuple(v.values()) for j, v in tally.call_totals(conn, run_id).items()}
    return counts, sums


def test_the_tallies_follow_every_write(postgres_url: str) -> None:
    store = Store(postgres_url)
    run_id, other = create(store, "r1"), create(store, "r2", "e" * 64)
    calls = open_ids(store, run_id)
    assert tallied(store, run_id) == grouped(store, run_id)
    first = store.claim_contexts(run_id, calls[0] + calls[1] + calls[2], 60)
    store.release([c.id for c in first if c.id in calls[2]])
    batch = CallRecord(
        "b1", "b" * 64, run_id, "memory/j2", "x", True, "stop", 7, 3, 0.5, 1.0, 2, 1, True
    )
    store.write(
        [answer(run_id, "k", "good", True, "u1"), batch],
        [Outcome(i, Status.DONE, score=4, call_uid="u1", asks=1, requests=1) for i in calls[0]]
        + [Outcome(i, Status.FAILED, reason="timeout", detail="slow") for i in calls[1]],
    )
    assert tallied(store, run_id) == grouped(store, run_id)
    assert store.reset_failed(run_id, ["timeout"]) == len(calls[1])
    assert tallied(store, run_id) == grouped(store, run_id)
    assert queries.status(store, run_id, "r1").failed == 0
    store.delete_run(other, chunk=3)
    assert tallied(store, other) == ([], {})
    with store.engine.connect() as conn:
        left = conn.exec_driver_sql(
            "SELECT count(*) FROM judgment_tally WHERE run_id = %s", (other,)
        ).scalar()
    assert left == 0
    assert tallied(store, run_id) == grouped(store, run_id)


def statements(store: Store, action: Callable[[], object]) -> list[tuple[str, Any]]:
    """The SELECT/UPDATE/WITH statements ``action`` sent to the database."""
    seen: list[tuple[str, Any]] = []

    def grab(_c: Any, _cur: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.lstrip().split(None, 1)[0].upper() in ("SELECT", "WITH", "UPDATE"):
            seen.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", grab)
    try:
        action()
    finally:
        event.remove(store.engine, "before_cursor_execute", grab)
    return seen


def plans(store: Store, action: Callable[[], object]) -> list[str]:
    """The plan of each statement of ``action`` with sequential scans priced out: a
    statement still planned as a scan of a whole table has no index to follow."""
    seen = statements(store, action)
    raw = store.engine.raw_connection()
    try:
        cur = raw.cursor()
        cur.execute("SET enable_seqscan = off")
        out = []
        for statement, parameters in seen:
            cur.execute("EXPLAIN " + statement, parameters)
            out.append("\n".join(str(r[0]) for r in cur.fetchall()))
        raw.rollback()
    finally:
        raw.close()
    return out


def scans_whole(plan: str) -> bool:
    return "Seq Scan on judgment" in plan or "Seq Scan on call" in plan


@pytest.mark.postgres
def test_status_live_counts_pages_and_claims_follow_indexes(postgres_url: str) -> None:
    store = Store(postgres_url)
    run_id = create(store)
    calls = open_ids(store, run_id)
    store.write(
        [answer(run_id, "k", "good", True, "u1")],
        [Outcome(i, Status.DONE, score=4, call_uid="u1") for i in calls[0]],
    )
    info = store.run_by_id(run_id)
    for label, action in {
        "status": lambda: queries.status(store, run_id, info.name),
        "cache answered": lambda: queries.cache_answered(store, run_id),
        "live counts": lambda: live.judge_counts(store, run_id, 60.0),
        "unfinished runs": lambda: live.unfinished_runs(store),
    }.items():
        found = plans(store, action)
        assert found and not any(scans_whole(p) for p in found), (label, found)
    status_plans = "\n".join(plans(store, lambda: queries.status(store, run_id, info.name)))
    assert "judgment_tally" in status_plans and "call_tally" in status_plans
    live_plans = "\n".join(plans(store, lambda: live.judge_counts(store, run_id, 60.0)))
    # the last minute's calls through an index of the run's calls: on a table this small
    # the planner picks ix_call_run_created or ix_call_run_id by a hair (ties of cost), and
    # ix_judgment_run_updated for the judgments once the run is larger than this one
    assert "ix_call_run_created" in live_plans or "ix_call_run_id" in live_plans
    cell = JudgmentQuery(model="a", judge="memory/j1")
    for q in (cell, JudgmentQuery(model="a", judge="memory/j1", status="done")):
        (plan,) = plans(store, lambda q=q: judgment_page(store, run_id, q))
        assert "ix_judgment_cell" in plan, plan
    claim = plans(store, lambda: store.claim_contexts(run_id, calls[1], 60))
    assert len(claim) == 1 and "judgment_pkey" in claim[0] and not scans_whole(claim[0])


def test_a_run_is_deleted_in_chunks_while_other_writers_go_on(database_url: str) -> None:
    """The run is invisible from the first chunk on; a worker's write to another run,
    made while the delete is in progress, completes before the delete does; the answers
    the other run uses stay, attached to no run."""
    store = Store(database_url)
    gone, kept = create(store, "gone", "a" * 64), create(store, "kept", "b" * 64)
    mine, theirs = open_ids(store, gone), open_ids(store, kept)
    store.write(
        [answer(gone, "k", "good", True, "shared"), answer(gone, "l", "x", True, "own")],
        [Outcome(i, Status.DONE, score=3, call_uid="own") for i in mine[0]],
    )
    store.write([], [Outcome(i, Status.DONE, score=4, call_uid="shared") for i in theirs[0]])
    seen: list[bool] = []
    written: list[int] = []

    def during() -> None:
        if seen:
            return
        seen.append(
            store.find_run("gone") is None
            and store.run_config_text(gone) is None
            and store.existing_runs([gone, kept]) == {kept}
            and store.cached_calls(["l" * 64]) == {}
        )
        worker = threading.Thread(
            target=lambda: written.append(
                store.write([], [Outcome(i, Status.DONE, score=5) for i in theirs[1]])
            )
        )
        worker.start()
        worker.join(timeout=60)  # the deadline: a writer waits one chunk at most
        assert not worker.is_alive(), "a write to another run waited for the whole delete"

    store.delete_run(gone, chunk=4, step=during)
    assert seen == [True] and written == [len(theirs[1])]
    assert calls_of(store) == {"shared": None}  # the other run's answer stays
    assert store.find_run("gone") is None and store.is_deleted(gone)
    assert store.find_run("kept") is not None
    with store.engine.connect() as conn:
        assert conn.execute(select(func.count()).where(J.run_id == gone)).scalar() == 0
    assert queries.status(store, kept, "kept").done == len(theirs[0]) + len(theirs[1])


def test_an_interrupted_delete_is_finished_by_the_next(database_url: str) -> None:
    store = Store(database_url)
    gone, other = create(store, "gone", "a" * 64), create(store, "other", "b" * 64)

    def crash() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        store.delete_run(gone, chunk=4, step=crash)
    assert store.find_run("gone") is None and store.is_deleted(gone)  # invisible already
    assert [r["name"] for r in queries.runs_overview(store)] == ["other"]
    store.delete_run(other)
    with store.engine.connect() as conn:
        left = conn.execute(select(func.count()).where(J.run_id.in_([gone, other]))).scalar()
        runs = conn.exec_driver_sql("SELECT count(*) FROM run").scalar()
    assert left == 0 and runs == 0
