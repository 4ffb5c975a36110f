"""The SQL store on real SQLite and PostgreSQL: idempotent writes, claims, grouping."""

from __future__ import annotations

import random
import threading

import pytest
from sqlalchemy import select

from flask_eval.app.score_tables import score_table
from flask_eval.core.errors import RunConflictError, Status
from flask_eval.core.types import Instance, JudgeConfig, Response, ResponseSet
from flask_eval.producer.plan import open_calls
from flask_eval.rubrics import codec
from flask_eval.rubrics.skills import load_default
from flask_eval.storage import exports, queries
from flask_eval.storage.models import JUDGMENT
from flask_eval.storage.records import CallRecord, Outcome
from flask_eval.storage.store import Store
from tests.reference import Record, aggregate, point_cells, rows_from_cells

SKILLS = load_default()
J = JUDGMENT.c
ABILITY = {s.name: s.ability for s in SKILLS}


def make_inputs(n: int = 6) -> tuple[list[Instance], list[ResponseSet]]:
    names = SKILLS.names
    instances = [
        Instance(
            id=str(i),
            instruction=f"question {i}",
            answer=f"answer {i}",
            skills=(names[i % 12], names[(i + 3) % 12], names[(i + 7) % 12]),
            domains=(("Math", "Coding") if i % 3 == 0 else ("History",) if i % 3 == 1 else ()),
            difficulty=None if i == 5 else 1 + i % 5,
        )
        for i in range(n)
    ]
    sets = [
        ResponseSet(
            m,
            f"{m}.jsonl",
            tuple(Response(m, inst.id, f"{m} says {inst.id}") for inst in instances[: n - k]),
        )
        for k, m in enumerate(("alpha", "beta"))
    ]
    return instances, sets


JUDGES = ("memory/j1", "memory/j2")


def run_config(mode: str = "instance") -> dict[str, object]:
    """What the producer stores with a run (the parts the workers and planner read)."""
    return {
        "judges": [JudgeConfig(n, n).to_data() for n in JUDGES],
        "skills": codec.to_data(SKILLS),
        "mode": mode,
    }


def open_ids(store: Store, run_id: int) -> list[list[int]]:
    """The ledger ids still to judge, grouped into judge calls (as the planner groups)."""
    return [c.ids for c in open_calls(store, store.run_by_id(run_id))]


def create(
    store: Store, name: str = "r1", fingerprint: str = "f" * 64, mode: str = "instance"
) -> int:
    instances, sets = make_inputs()
    run, created = store.create_run(
        name=name,
        fingerprint=fingerprint,
        mode=mode,
        config=run_config(mode),
        instances=instances,
        response_sets=sets,
        judges=["memory/j1", "memory/j2"],
    )
    assert created
    return run.id


def test_create_run_plans_one_row_per_instance_response_skill_judge(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    counts = queries.status(store, run_id, "r1")
    # alpha answers 6 instances, beta 5; 3 skills each; 2 judges
    assert counts.total == (6 + 5) * 3 * 2
    assert counts.pending == counts.total and counts.done == 0


def test_same_name_same_fingerprint_resumes_and_different_conflicts(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    instances, sets = make_inputs()
    again, created = store.create_run(
        name="r1",
        fingerprint="f" * 64,
        mode="instance",
        config={},
        instances=instances,
        response_sets=sets,
        judges=["memory/j1", "memory/j2"],
    )
    assert (again.id, created) == (run_id, False)
    with pytest.raises(RunConflictError, match="different inputs"):
        store.create_run(
            name="r1",
            fingerprint="e" * 64,
            mode="instance",
            config={},
            instances=instances,
            response_sets=sets,
            judges=["memory/j1"],
        )
    assert queries.status(store, run_id, "r1").total == 66


def test_open_calls_group_by_instance_or_skill(database_url: str) -> None:
    store = Store(database_url)
    create(store, "inst", mode="instance")
    create(store, "skill", "s" * 64, mode="skill")
    inst = store.find_run("inst")
    skill = store.find_run("skill")
    assert inst is not None and skill is not None
    by_instance = open_ids(store, inst.id)
    assert len(by_instance) == (6 + 5) * 2 and all(len(c) == 3 for c in by_instance)
    assert len(open_ids(store, skill.id)) == 66


def _claim(store: Store, run_id: int, ids: list[int], lease_seconds: float) -> list[int]:
    """The ids a worker claims (``Store.claim_contexts``, the worker's path)."""
    return [c.id for c in store.claim_contexts(run_id, ids, lease_seconds)]


def test_claim_is_exclusive_across_concurrent_claimers(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    ids = [i for call in open_ids(store, run_id) for i in call]
    won: list[list[int]] = []
    barrier = threading.Barrier(4)

    def claimer() -> None:
        barrier.wait()
        won.append(_claim(store, run_id, ids, 60))

    threads = [threading.Thread(target=claimer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    claimed = [i for w in won for i in w]
    assert sorted(claimed) == sorted(ids)  # every row claimed exactly once
    assert _claim(store, run_id, ids, 60) == []  # live leases are respected


def test_expired_lease_can_be_claimed_again(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    ids = [i for call in open_ids(store, run_id) for i in call][:3]
    assert _claim(store, run_id, ids, -1) == sorted(ids)  # a worker that died at once
    assert _claim(store, run_id, ids, 60) == sorted(ids)


def test_a_claim_takes_only_rows_of_the_message_run(database_url: str) -> None:
    """A message naming the wrong run claims nothing of another run's rows."""
    store = Store(database_url)
    first = create(store, "a", "a" * 64)
    second = create(store, "b", "b" * 64)
    ids = [i for call in open_ids(store, first) for i in call]
    assert _claim(store, second, ids, 60) == []
    assert _claim(store, first, ids, 60) == sorted(ids)


def test_release_gives_claimed_rows_back_uncounted(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    ids = open_ids(store, run_id)[0]
    assert _claim(store, run_id, ids, 60) == sorted(ids)
    assert store.release(ids) == len(ids)
    with store.engine.connect() as conn:
        rows = conn.execute(select(J.status, J.claims).where(J.id.in_(ids))).all()
    assert {(r.status, r.claims) for r in rows} == {(Status.PENDING.value, 0)}
    assert open_ids(store, run_id)[0] == ids


def test_claim_contexts_returns_what_each_claimed_row_is_about(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    first, second = open_ids(store, run_id)[:2]
    store.write(outcomes=[Outcome(first[0], Status.DONE, score=3, rationale="r")])
    store.write(outcomes=[Outcome(first[1], Status.FAILED, reason="timeout", detail="d")])

    contexts = store.claim_contexts(run_id, [*first, *second], 60)

    assert [c.id for c in contexts] == sorted([*first[2:], *second])  # done, failed: not
    for c in contexts:
        assert c.run_id == run_id and c.judge in ("memory/j1", "memory/j2")
        assert c.instruction == f"question {c.instance_id}"
        assert c.reference == f"answer {c.instance_id}"
        assert c.response == f"{c.model} says {c.instance_id}"
    with store.engine.connect() as conn:
        rows = conn.execute(select(J.id, J.status, J.claims).where(J.id.in_(first))).all()
    assert {r.id: (r.status, r.claims) for r in rows} == {
        first[0]: (Status.DONE.value, 0),
        first[1]: (Status.FAILED.value, 0),
        **{i: (Status.RUNNING.value, 1) for i in first[2:]},
    }


def test_finish_never_overwrites_done(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    (i, *_), *_ = open_ids(store, run_id)
    assert store.finish([Outcome(i, Status.DONE, score=4)]) == 1
    assert store.finish([Outcome(i, Status.FAILED, reason="timeout")]) == 0
    assert store.finish([Outcome(i, Status.DONE, score=1)]) == 0
    rows = list(exports.export_rows(store, run_id, "r1"))
    row = next(r for r in rows if r["status"] == "done")
    assert row["score"] == 4


def answer(run_id: int, key: str, raw: str, parsed: bool, uid: str) -> CallRecord:
    return CallRecord(uid, key * 64, run_id, "memory/j1", raw, parsed, "stop", 10, 5, 0.001, 1.0)


def test_every_paid_call_is_kept_and_the_cache_replays_the_first_read(database_url: str) -> None:
    """Three answers to one prompt (unread, then two read ones) are three paid rows; the
    cache replays the first read one; replaying a write stores nothing twice."""
    store = Store(database_url)
    run_id = create(store)
    store.write([answer(run_id, "k", "garbage", False, "u1")])
    assert store.cached_calls(["k" * 64]) == {}  # unread answers are not replayed
    store.write([answer(run_id, "k", "good", True, "u2")])
    store.write([answer(run_id, "k", "other", True, "u3")])  # a racing worker's answer
    store.write([answer(run_id, "k", "good", True, "u2")])  # a replayed flush
    cached = store.cached_calls(["k" * 64, "z" * 64])
    assert list(cached) == ["k" * 64] and cached["k" * 64].raw == "good"
    counts = queries.status(store, run_id, "r1")
    assert counts.calls == 3 and counts.prompt_tokens == 30
    assert counts.cost == pytest.approx(0.003)


def test_one_write_with_duplicates_ends_as_successive_writes_would(database_url: str) -> None:
    """A flush may carry two outcomes for one row; PostgreSQL's one-statement path must
    merge them the way one statement per item (SQLite's path) ends."""
    store = Store(database_url)
    run_id = create(store)
    a, b, c, d = [i for call in open_ids(store, run_id) for i in call][:4]
    calls = [
        answer(run_id, "p", "bad", False, "p1"),
        answer(run_id, "p", "good", True, "p2"),
        answer(run_id, "q", "first", True, "q1"),
        answer(run_id, "q", "second", True, "q2"),
    ]
    outcomes = [
        Outcome(a, Status.FAILED, reason="timeout", asks=1),
        Outcome(a, Status.DONE, score=5, asks=1),
        Outcome(b, Status.DONE, score=2),
        Outcome(b, Status.FAILED, reason="timeout"),
        Outcome(c, Status.DONE, score=3),
        Outcome(c, Status.DONE, score=1),
        Outcome(d, Status.FAILED, reason="timeout"),
        Outcome(d, Status.FAILED, reason="refused"),
    ]
    store.write(calls, outcomes)
    cached = store.cached_calls(["p" * 64, "q" * 64])
    assert {k[0]: v.raw for k, v in cached.items()} == {"p": "good", "q": "first"}
    assert queries.status(store, run_id, "r1").calls == 4
    with store.engine.connect() as conn:
        ended = {
            i: (status, score, reason, asks)
            for i, status, score, reason, asks in conn.execute(
                select(J.id, J.status, J.score, J.reason, J.asks).where(J.id.in_([a, b, c, d]))
            )
        }
    assert ended == {
        a: ("done", 5, None, 2),  # done replaces failed; the counters add up
        b: ("done", 2, None, 0),  # a later failure never replaces done
        c: ("done", 3, None, 0),  # the first done stays
        d: ("failed", None, "refused", 0),  # the last failure is kept
    }


def test_an_answer_holding_nul_or_a_lone_surrogate_is_kept_on_every_store(
    database_url: str,
) -> None:
    """A provider's answer is untrusted text: a NUL (which PostgreSQL cannot store) or a
    lone surrogate in it, its rationale or its read value is kept as U+FFFD; the paid
    answer and the judgment's end are both written."""
    store = Store(database_url)
    run_id = create(store)
    (i, *_), *_ = open_ids(store, run_id)
    bad = "score\x00 4 \ud800 end"
    store.write(
        [answer(run_id, "n", bad, True, "u-nul")],
        [Outcome(i, Status.DONE, score=4, rationale=bad, value=bad, call_uid="u-nul")],
    )
    kept = "score\ufffd 4 \ufffd end"
    assert store.cached_calls(["n" * 64])["n" * 64].raw == kept
    row = next(r for r in exports.export_rows(store, run_id, "r1") if r["status"] == "done")
    assert row["score"] == 4 and row["rationale"] == kept


def test_report_sums_from_sql_equal_the_pure_reference(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    instances, _ = make_inputs()
    by_id = {i.id: i for i in instances}
    rng = random.Random(3)
    outcomes = []
    ids = [i for call in open_ids(store, run_id) for i in call]
    for i in ids:
        roll = rng.random()
        if roll < 0.7:
            outcomes.append(Outcome(i, Status.DONE, score=rng.randint(1, 5)))
        elif roll < 0.8:
            outcomes.append(Outcome(i, Status.DONE, score=None))  # N/A
        elif roll < 0.9:
            outcomes.append(Outcome(i, Status.FAILED, reason="unparseable"))
        # else: stays pending
    store.finish(outcomes)
    records = [
        Record(
            r["model"],
            r["judge"],
            r["instance_id"],
            r["skill"],
            r["status"],
            r["score"] if isinstance(r["score"], int) else None,
            by_id[r["instance_id"]].domains,
            by_id[r["instance_id"]].difficulty,
        )
        for r in exports.export_rows(store, run_id, "r1")
    ]
    expected = aggregate(records, ABILITY, skill_order=SKILLS.names)
    got = rows_from_cells(
        point_cells(score_table(store, run_id)), ABILITY, skill_order=SKILLS.names
    )
    assert got == expected
    assert {r.dimension for r in got} == {
        "overall",
        "skill",
        "ability",
        "domain",
        "difficulty",
        "skill_difficulty",
    }


@pytest.mark.parametrize("same_inputs", [True, False])
def test_two_producers_creating_one_run_at_once(database_url: str, same_inputs: bool) -> None:
    """One creates it; the other resumes it (same inputs) or gets a conflict, never a
    traceback or a second copy."""
    store = Store(database_url)
    instances, sets = make_inputs()
    barrier = threading.Barrier(2)
    results: list[object] = []

    def producer(fingerprint: str) -> None:
        barrier.wait()
        try:
            run, created = store.create_run(
                name="raced",
                fingerprint=fingerprint,
                mode="instance",
                config=run_config(),
                instances=instances,
                response_sets=sets,
                judges=list(JUDGES),
            )
            results.append((run.id, created))
        except RunConflictError as exc:
            results.append(exc)

    prints = ("a" * 64, "a" * 64 if same_inputs else "b" * 64)
    threads = [threading.Thread(target=producer, args=(f,)) for f in prints]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    made = [r for r in results if isinstance(r, tuple)]
    assert len(results) == 2 and sum(created for _, created in made) == 1  # type: ignore[misc]
    if same_inputs:
        assert len({run_id for run_id, _ in made}) == 1  # type: ignore[misc]
    else:
        assert any(isinstance(r, RunConflictError) for r in results)
    run = store.find_run("raced")
    assert run is not None and queries.status(store, run.id, "raced").total == 66


def test_cached_and_cache_written_tokens_and_batch_calls_round_trip(database_url: str) -> None:
    """A paid call's cache and batch fields are written by each dialect's write path,
    read back by the answer cache and summed by `status` and `runs`."""
    store = Store(database_url)
    run_id = create(store)
    store.write(
        [
            CallRecord(
                "c1",
                "a" * 64,
                run_id,
                "memory/j1",
                "x",
                True,
                "stop",
                1000,
                50,
                0.002,
                1.0,
                cached_tokens=800,
                cache_write_tokens=0,
                batch=True,
            ),
            CallRecord(
                "c2",
                "b" * 64,
                run_id,
                "memory/j1",
                "y",
                True,
                "stop",
                1000,
                50,
                0.003,
                1.0,
                cached_tokens=0,
                cache_write_tokens=900,
            ),
            answer(run_id, "c", "z", True, "c3"),
        ]
    )
    cached = store.cached_calls(["a" * 64, "b" * 64])
    assert (cached["a" * 64].cached_tokens, cached["a" * 64].batch) == (800, True)
    assert (cached["b" * 64].cache_write_tokens, cached["b" * 64].batch) == (900, False)
    counts = queries.status(store, run_id, "r1")
    assert (counts.cached_tokens, counts.cache_write_tokens, counts.batch_calls) == (800, 900, 1)
    assert counts.as_dict()["cached_tokens"] == 800 and counts.cost == pytest.approx(0.006)
    (row,) = queries.runs_overview(store)
    assert (row["cached_tokens"], row["cache_write_tokens"]) == (800, 900)
