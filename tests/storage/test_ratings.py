"""People's ratings in the store (SQLite; PostgreSQL through ``database_url``): items
planned once, served one holder at a time, rated exactly once; raters and sessions."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from sqlalchemy import func, select

from flask_eval.core.errors import Status
from flask_eval.storage import queries
from flask_eval.storage import ratings as R
from flask_eval.storage.models import JUDGMENT, RATING_ITEM, utcnow
from flask_eval.storage.store import Store
from tests.storage.test_store import create

J = JUDGMENT.c
ALICE, BOB = "human/alice", "human/bob"
CRITERIA = ("Correctness", "Readability")
VALUE = json.dumps({"seconds": 3.5, "source": "workspace"})


def planned(judge: str, n: int, model: str = "alpha") -> list[R.PlannedRating]:
    """``n`` items of ``judge``, ranked in reverse of their instance ids."""
    return [
        R.PlannedRating(judge, model, "", str(i), CRITERIA, float(n - i), i % 2 == 1)
        for i in range(n)
    ]


@pytest.fixture
def store(database_url: str) -> Any:
    s = Store(database_url)
    yield s
    s.close()


@pytest.fixture
def run_id(store: Store) -> int:
    return create(store)


def scores(item: R.RatingItem, score: int | None = 3) -> dict[str, int | None]:
    return dict.fromkeys(item.criteria, score)


def rows_of(store: Store, judge: str) -> list[Any]:
    stmt = (
        select(J.instance_id, J.criterion, J.status, J.score, J.rationale, J.reason, J.detail)
        .where(J.judge == judge)
        .order_by(J.id)
    )
    with store.engine.connect() as conn:
        return list(conn.execute(stmt))


def test_planning_is_idempotent(store: Store, run_id: int) -> None:
    assert R.plan_ratings(store, run_id, planned(ALICE, 5)) == 5
    assert R.plan_ratings(store, run_id, planned(ALICE, 7)) == 2  # only the new ones
    rows = rows_of(store, ALICE)
    assert len(rows) == 7 * len(CRITERIA)
    assert {r.status for r in rows} == {Status.WAITING.value}
    assert R.progress(store, ALICE) == R.Progress(done=0, flagged=0, open=7)
    with pytest.raises(ValueError, match="rater"):
        R.plan_ratings(store, run_id, planned("openai/gpt", 1))
    with pytest.raises(LookupError):
        R.plan_ratings(store, run_id + 1, planned(ALICE, 1))


def test_next_item_follows_the_rank_and_gives_the_holder_its_item_back(
    store: Store, run_id: int
) -> None:
    R.plan_ratings(store, run_id, planned(ALICE, 4))
    first = R.next_item(store, ALICE, "h1", 60)
    assert first is not None and first.instance_id == "3"  # the lowest rank
    assert first.criteria == CRITERIA and first.holder == "h1" and first.swapped
    assert first.lease_until is not None and first.served_at is not None
    again = R.next_item(store, ALICE, "h1", 60)
    assert again is not None and again.id == first.id
    other = R.next_item(store, ALICE, "h2", 60)
    assert other is not None and other.instance_id == "2"  # the first is held
    assert R.next_item(store, BOB, "h3", 60) is None  # bob has no items
    assert R.next_item(store, ALICE, "h4", 60, run_id=run_id + 1) is None


def test_an_expired_lease_gives_the_item_back(store: Store, run_id: int) -> None:
    R.plan_ratings(store, run_id, planned(ALICE, 3))
    lapsed = R.next_item(store, ALICE, "h1", 0.0)  # its lease ends as it is served
    assert lapsed is not None
    taken = R.next_item(store, ALICE, "h2", 60)
    assert taken is not None and taken.id == lapsed.id and taken.holder == "h2"
    back = R.next_item(store, ALICE, "h1", 60)  # h1 no longer holds it: the next one
    assert back is not None and back.id != lapsed.id


def test_release_moves_the_item_behind_the_queue(store: Store, run_id: int) -> None:
    R.plan_ratings(store, run_id, planned(ALICE, 3))
    item = R.next_item(store, ALICE, "h1", 60)
    assert item is not None
    assert not R.release(store, item.id, ALICE, "h2")  # not h2's
    assert R.release(store, item.id, ALICE, "h1")
    assert not R.release(store, item.id, ALICE, "h1")  # no longer held
    skipped = R.get_item(store, item.id)
    assert skipped is not None and skipped.skips == 1 and skipped.holder is None
    order = []
    for holder in ("a", "b", "c"):
        served = R.next_item(store, ALICE, holder, 60)
        assert served is not None
        order.append(served.id)
    assert order[-1] == item.id


def test_set_ranks_reorders_only_open_items(store: Store, run_id: int) -> None:
    R.plan_ratings(store, run_id, planned(ALICE, 3))
    R.set_ranks(store, run_id, {(ALICE, "alpha", "", "0"): -5.0})
    item = R.next_item(store, ALICE, "h", 60)
    assert item is not None and item.instance_id == "0"
    assert R.submit(store, item.id, ALICE, scores(item), {}, VALUE)
    R.set_ranks(store, run_id, {(ALICE, "alpha", "", "0"): 99.0})
    with store.engine.connect() as conn:
        rank = conn.execute(select(RATING_ITEM.c.rank).where(RATING_ITEM.c.id == item.id))
        assert rank.scalar_one() == -5.0


def test_a_submit_is_stored_exactly_once(store: Store, run_id: int) -> None:
    R.plan_ratings(store, run_id, planned(ALICE, 2))
    item = R.next_item(store, ALICE, "h1", 60)
    assert item is not None
    given = {"Correctness": 4, "Readability": None}
    assert R.submit(store, item.id, ALICE, given, {"Correctness": "fine"}, VALUE)
    # a second tab, another holder, a replay after a restart: nothing changes
    assert not R.submit(store, item.id, ALICE, {"Correctness": 1, "Readability": 1}, {}, "{}")
    assert not R.flag(store, item.id, ALICE, "cannot", "{}")
    rows = [r for r in rows_of(store, ALICE) if r.instance_id == item.instance_id]
    assert [(r.criterion, r.status, r.score, r.rationale) for r in rows] == [
        ("Correctness", "done", 4, "fine"),
        ("Readability", "done", None, None),
    ]
    done = R.get_item(store, item.id)
    assert done is not None and done.state == "done"
    assert done.lease_until is None and done.holder is None
    assert R.progress(store, ALICE, run_id) == R.Progress(done=1, flagged=0, open=1)
    nxt = R.next_item(store, ALICE, "h1", 60)  # a done item is never served again
    assert nxt is not None and nxt.id != item.id


def test_a_submit_is_refused_when_it_does_not_fit_the_item(store: Store, run_id: int) -> None:
    R.plan_ratings(store, run_id, planned(ALICE, 1))
    item = R.next_item(store, ALICE, "h1", 60)
    assert item is not None
    with pytest.raises(PermissionError):
        R.submit(store, item.id, BOB, scores(item), {}, VALUE)
    with pytest.raises(ValueError, match="no criteria"):
        R.submit(store, item.id, ALICE, {**scores(item), "Other": 2}, {}, VALUE)
    with pytest.raises(ValueError, match="no score"):
        R.submit(store, item.id, ALICE, {"Correctness": 2}, {}, VALUE)
    with pytest.raises(LookupError):
        R.submit(store, item.id + 1000, ALICE, scores(item), {}, VALUE)
    assert {r.status for r in rows_of(store, ALICE)} == {"waiting"}  # nothing written
    # whoever holds the lease: it is advice
    assert R.next_item(store, ALICE, "h2", 60) is None
    assert R.submit(store, item.id, ALICE, scores(item), {}, VALUE)


def test_flag_fails_the_rows_and_retry_failed_leaves_them(store: Store, run_id: int) -> None:
    R.plan_ratings(store, run_id, planned(ALICE, 2))
    item = R.next_item(store, ALICE, "h1", 60)
    assert item is not None
    assert R.flag(store, item.id, ALICE, "x" * 600, VALUE)
    assert not R.flag(store, item.id, ALICE, "again", VALUE)
    flagged = [r for r in rows_of(store, ALICE) if r.status == "failed"]
    assert len(flagged) == len(CRITERIA)
    assert {(r.reason, len(r.detail)) for r in flagged} == {("flagged", R.MAX_FLAG_REASON)}
    assert R.progress(store, ALICE) == R.Progress(done=0, flagged=1, open=1)
    # a machine row failed too: `--retry-failed` sends it back, never the rater's
    with store.engine.begin() as conn:
        machine = conn.execute(select(func.min(J.id)).where(J.judge == "memory/j1")).scalar()
        conn.execute(
            JUDGMENT.update().where(J.id == machine).values(status="failed", reason="timeout")
        )
    assert store.reset_failed(run_id) == 1
    assert store.reset_failed(run_id, ["flagged"]) == 0
    assert len([r for r in rows_of(store, ALICE) if r.status == "failed"]) == len(CRITERIA)


def test_waiting_rows_are_no_work_for_the_machines(store: Store, run_id: int) -> None:
    before = queries.status(store, run_id, "r1")
    open_before = store.open_rows(run_id)
    R.plan_ratings(store, run_id, planned(ALICE, 4))
    counts = queries.status(store, run_id, "r1")
    assert (counts.total, counts.pending, counts.waiting) == (before.total, before.pending, 8)
    assert counts.as_dict()["people"] == {"rated": 0, "flagged": 0, "waiting": 8}
    assert store.open_rows(run_id) == open_before
    assert store.count_open(run_id) == before.pending
    overview = {r["name"]: r for r in queries.runs_overview(store)}
    assert overview["r1"]["total"] == before.total
    item = R.next_item(store, ALICE, "h", 60)
    assert item is not None and R.submit(store, item.id, ALICE, scores(item), {}, VALUE)
    after = queries.status(store, run_id, "r1")
    # the judges' counts are theirs alone: a rating is counted among the people's
    assert (after.waiting, after.rated, after.done, after.total) == (
        6,
        2,
        before.done,
        before.total,
    )


def test_two_holders_never_share_a_live_item(store: Store, run_id: int) -> None:
    """8 threads x 50 claims, each for a holder of its own, over 400 items."""
    R.plan_ratings(store, run_id, planned(ALICE, 400))
    served: list[int] = []
    lock = threading.Lock()

    def claims(t: int) -> None:
        for k in range(50):
            item = R.next_item(store, ALICE, f"t{t}-{k}", 600)
            assert item is not None
            with lock:
                served.append(item.id)

    _race([partial(claims, t) for t in range(8)])
    assert len(served) == 400 and len(set(served)) == 400
    assert R.next_item(store, ALICE, "late", 600) is None


def test_racing_submits_store_each_item_once(store: Store, run_id: int) -> None:
    R.plan_ratings(store, run_id, planned(ALICE, 40))
    items: list[R.RatingItem] = []
    while (item := R.next_item(store, ALICE, f"h{len(items)}", 600)) is not None:
        items.append(item)
    wins: list[int] = []
    lock = threading.Lock()

    def submits(seed: int) -> None:
        order = random.Random(seed).sample(items, len(items))
        for item in order:
            if R.submit(store, item.id, ALICE, scores(item, seed % 5 + 1), {}, VALUE):
                with lock:
                    wins.append(item.id)

    _race([partial(submits, s) for s in range(4)])
    assert sorted(wins) == sorted(i.id for i in items)
    assert {r.status for r in rows_of(store, ALICE)} == {"done"}


def _race(jobs: list[Callable[[], None]]) -> None:
    errors: list[BaseException] = []

    def run(job: Callable[[], None]) -> None:
        try:
            job()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(j,)) for j in jobs]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not errors, errors


def test_import_stores_each_rating_once(store: Store, run_id: int) -> None:
    R.plan_ratings(store, run_id, planned(ALICE, 2))
    item = R.next_item(store, ALICE, "h", 60)
    assert item is not None and R.submit(store, item.id, ALICE, scores(item, 5), {}, VALUE)
    value = json.dumps({"seconds": 1.0, "source": "import"})
    ratings = [
        R.ImportedRating(judge, "alpha", "", iid, c, 2, "why", value)
        for judge in (ALICE, BOB)
        for iid in ("0", "1")
        for c in CRITERIA
    ]
    assert R.import_ratings(store, run_id, ratings) == (6, 2)  # alice's "1" was rated
    assert R.import_ratings(store, run_id, ratings) == (0, 8)
    assert R.import_ratings(store, run_id, ratings[:1] * 2) == (0, 2)
    assert {(r.status, r.score) for r in rows_of(store, BOB)} == {("done", 2)}
    kept = [r for r in rows_of(store, ALICE) if r.instance_id == item.instance_id]
    assert {r.score for r in kept} == {5}  # never overwritten
    assert R.progress(store, BOB) == R.Progress(done=2, flagged=0, open=0)
    assert R.progress(store, ALICE) == R.Progress(done=2, flagged=0, open=0)
    with pytest.raises(ValueError):
        R.import_ratings(store, run_id, [R.ImportedRating("j", "alpha", "", "0", "C", 1, None, "")])


def test_deleting_a_run_deletes_its_items(store: Store, run_id: int) -> None:
    R.plan_ratings(store, run_id, planned(ALICE, 3))
    other = create(store, name="r2")
    R.plan_ratings(store, other, planned(ALICE, 2))
    store.delete_run(run_id)
    assert R.progress(store, ALICE) == R.Progress(done=0, flagged=0, open=2)


def test_raters_and_their_sessions(store: Store) -> None:
    R.add_rater(store, "alice", "a" * 64, None, True)
    R.add_rater(store, "bob", "b" * 64, 7, False)
    assert R.rater_by_token(store, "a" * 64) == R.Rater("alice", "a" * 64, None, True, False)
    assert R.rater_by_token(store, "c" * 64) is None
    assert [r.name for r in R.list_raters(store)] == ["alice", "bob"]
    soon = utcnow() + timedelta(hours=1)
    R.create_session(store, R.Session("s1", "alice", "csrf1", soon))
    R.create_session(store, R.Session("s0", "alice", "csrf0", utcnow() - timedelta(seconds=1)))
    got = R.get_session(store, "s1")
    assert got is not None and (got.rater, got.csrf) == ("alice", "csrf1")
    assert abs((got.expires_at - soon).total_seconds()) < 1e-3
    assert R.get_session(store, "s0") is None  # ended
    assert R.delete_expired_sessions(store) == 1
    assert R.revoke_rater(store, "alice") and not R.revoke_rater(store, "nobody")
    assert R.get_session(store, "s1") is None
    revoked = R.rater_by_token(store, "a" * 64)
    assert revoked is not None and revoked.revoked
    R.create_session(store, R.Session("s2", "alice", "c", soon))
    R.add_rater(store, "alice", "d" * 64, 3, False)  # a new token: back, sessions ended
    assert R.get_session(store, "s2") is None
    assert R.rater_by_token(store, "d" * 64) == R.Rater("alice", "d" * 64, 3, False, False)
    R.create_session(store, R.Session("s3", "bob", "c", soon))
    R.delete_session(store, "s3")
    assert R.get_session(store, "s3") is None
    with pytest.raises(ValueError):
        R.add_rater(store, "human/x", "e" * 64, None, False)


def _claims_in_a_process(url: str, worker: int, n: int) -> list[int]:
    store = Store(url)
    try:
        served = [R.next_item(store, ALICE, f"p{worker}-{k}", 600) for k in range(n)]
        return [item.id for item in served if item is not None]
    finally:
        store.close()


def test_processes_racing_never_share_a_live_item(
    store: Store, run_id: int, database_url: str
) -> None:
    """4 processes x 25 claims over 90 items: 90 served, each once, then none."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    R.plan_ratings(store, run_id, planned(ALICE, 90))
    # spawned, not forked: a fork of this multi-threaded process (pytest's, xdist's, the
    # store's threads) may copy a lock some thread held, and the child then waits forever
    context = multiprocessing.get_context("spawn")  # each child opens a store of its own
    with ProcessPoolExecutor(4, mp_context=context) as pool:
        claims = pool.map(_claims_in_a_process, [database_url] * 4, range(4), [25] * 4)
        results = list(claims)
    served = [i for ids in results for i in ids]
    assert len(served) == 90 and len(set(served)) == 90


def test_a_version_12_store_gets_the_tables_of_ratings(database_url: str) -> None:
    from flask_eval.storage.db import _alembic_config

    Store(database_url).close()
    store = Store(database_url)
    with store.engine.begin() as conn:
        for table in ("rating_item", "rater", "rater_session", "image"):
            conn.exec_driver_sql(f"DROP TABLE {table}")
        for table, column in (
            ("instance", "turn"),
            ("instance", "conversation"),
            ("instance", "history"),
            ("instance", "images"),
            ("response", "history"),
        ):  # version 14's
            conn.exec_driver_sql(f"ALTER TABLE {table} DROP COLUMN {column}")
        from alembic import command

        command.stamp(_alembic_config(conn), "0012_v12")
    store.close()
    store = Store(database_url)  # opening migrates
    run_id = create(store)
    assert R.plan_ratings(store, run_id, planned(ALICE, 2)) == 2
    R.add_rater(store, "alice", "a" * 64, None, False)
    with store.engine.connect() as conn:
        version = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar_one()
    assert version == "0014_v14"
    store.close()


def test_a_large_import_settles_its_items_at_once(store: Store, run_id: int) -> None:
    R.plan_ratings(store, run_id, planned(BOB, 3))
    item = R.next_item(store, BOB, "h", 60)
    assert item is not None and R.flag(store, item.id, BOB, "unclear", VALUE)
    rows = [
        R.ImportedRating(BOB, "alpha", "", str(i), "Correctness", 1 + i % 5, None, "{}")
        for i in range(250)
    ]
    assert R.import_ratings(store, run_id, rows) == (249, 1)  # the flagged one stays
    # the items planned with two criteria still wait for their second
    assert R.progress(store, BOB) == R.Progress(done=247, flagged=1, open=2)
