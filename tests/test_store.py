"""The SQL store on real SQLite and PostgreSQL: idempotent writes, claims, grouping."""

from __future__ import annotations

import random
import threading

import pytest
from sqlalchemy import select

from flask_eval.exceptions import RunConflictError
from producer.schema import Instance, Response, ResponseSet
from report.metrics import Record, aggregate, rows_from_cells
from report.scores import point_cells
from rubrics.skills import load_default
from storage import analytics, queries
from storage.models import JUDGMENT, Status
from storage.records import CallRecord, Outcome
from storage.store import Store

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


def create(
    store: Store, name: str = "r1", fingerprint: str = "f" * 64, mode: str = "instance"
) -> int:
    instances, sets = make_inputs()
    run, created = store.create_run(
        name=name,
        fingerprint=fingerprint,
        mode=mode,
        config={"x": 1},
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
    by_instance = store.open_calls(inst)
    assert len(by_instance) == (6 + 5) * 2 and all(len(c) == 3 for c in by_instance)
    assert len(store.open_calls(skill)) == 66


def _claim(store: Store, how: str, ids: list[int], lease_seconds: float) -> list[int]:
    """The ids claimed, by ``Store.claim`` or by ``Store.claim_contexts`` (a worker's path)."""
    if how == "claim":
        return store.claim(ids, lease_seconds=lease_seconds)
    return [c.id for c in store.claim_contexts(ids, lease_seconds)]


@pytest.mark.parametrize("how", ["claim", "claim_contexts"])
def test_claim_is_exclusive_across_concurrent_claimers(database_url: str, how: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    run = store.run_by_id(run_id)
    ids = [i for call in store.open_calls(run) for i in call]
    won: list[list[int]] = []
    barrier = threading.Barrier(4)

    def claimer() -> None:
        barrier.wait()
        won.append(_claim(store, how, ids, 60))

    threads = [threading.Thread(target=claimer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    claimed = [i for w in won for i in w]
    assert sorted(claimed) == sorted(ids)  # every row claimed exactly once
    assert _claim(store, how, ids, 60) == []  # live leases are respected


@pytest.mark.parametrize("how", ["claim", "claim_contexts"])
def test_expired_lease_can_be_claimed_again(database_url: str, how: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    ids = [i for call in store.open_calls(store.run_by_id(run_id)) for i in call][:3]
    assert _claim(store, how, ids, -1) == sorted(ids)  # a worker that died at once
    assert _claim(store, how, ids, 60) == sorted(ids)


def test_claim_contexts_returns_what_each_claimed_row_is_about(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    first, second = store.open_calls(store.run_by_id(run_id))[:2]
    store.write(outcomes=[Outcome(first[0], Status.DONE, score=3, rationale="r")])
    store.write(outcomes=[Outcome(first[1], Status.FAILED, reason="timeout", detail="d")])

    contexts = store.claim_contexts([*first, *second], 60)

    assert [c.id for c in contexts] == sorted([*first[2:], *second])  # done, failed: not
    for c in contexts:
        assert c.run_id == run_id and c.judge in ("memory/j1", "memory/j2")
        assert c.instruction == f"question {c.instance_id}"
        assert c.reference == f"answer {c.instance_id}"
        assert c.response == f"{c.model} says {c.instance_id}"
    with store.engine.connect() as conn:
        rows = conn.execute(select(J.id, J.status, J.attempts).where(J.id.in_(first))).all()
    assert {r.id: (r.status, r.attempts) for r in rows} == {
        first[0]: (Status.DONE.value, 0),
        first[1]: (Status.FAILED.value, 0),
        **{i: (Status.RUNNING.value, 1) for i in first[2:]},
    }


def test_finish_never_overwrites_done(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    (i, *_), *_ = store.open_calls(store.run_by_id(run_id))
    assert store.finish([Outcome(i, Status.DONE, score=4)]) == 1
    assert store.finish([Outcome(i, Status.FAILED, reason="timeout")]) == 0
    assert store.finish([Outcome(i, Status.DONE, score=1)]) == 0
    rows = list(queries.export_rows(store, run_id, "r1"))
    row = next(r for r in rows if r["status"] == "done")
    assert row["score"] == 4


def test_paid_answers_are_kept_once_and_a_parsed_answer_wins(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)

    def answer(raw: str, parsed: bool) -> CallRecord:
        return CallRecord("k" * 64, run_id, "memory/j1", raw, parsed, 10, 5, 0.001, 1.0)

    store.write([answer("garbage", False)])
    assert store.cached_calls(["k" * 64]) == {}  # unparsed answers are not reused
    store.write([answer("good", True)])
    store.write([answer("other", True)])  # a duplicate delivery's answer changes nothing
    cached = store.cached_calls(["k" * 64, "z" * 64])
    assert list(cached) == ["k" * 64] and cached["k" * 64].raw == "good"
    assert queries.status(store, run_id, "r1").calls == 1


def test_one_write_with_duplicates_ends_as_successive_writes_would(database_url: str) -> None:
    """A flush may carry two answers for one prompt (identical prompts in flight at once)
    and two outcomes for one row; PostgreSQL's one-statement path must merge them the way
    one statement per item (SQLite's path) ends."""
    store = Store(database_url)
    run_id = create(store)
    a, b, c, d = [i for call in store.open_calls(store.run_by_id(run_id)) for i in call][:4]

    def answer(key: str, raw: str, parsed: bool) -> CallRecord:
        return CallRecord(key * 64, run_id, "memory/j1", raw, parsed, 10, 5, 0.001, 1.0)

    calls = [
        answer("p", "bad", False), answer("p", "good", True),  # a parsed answer replaces
        answer("q", "first", True), answer("q", "second", True),  # the first parsed stays
        answer("r", "x", True), answer("r", "y", False),  # an unparsed one never replaces
    ]  # fmt: skip
    outcomes = [
        Outcome(a, Status.FAILED, reason="timeout"), Outcome(a, Status.DONE, score=5),
        Outcome(b, Status.DONE, score=2), Outcome(b, Status.FAILED, reason="timeout"),
        Outcome(c, Status.DONE, score=3), Outcome(c, Status.DONE, score=1),
        Outcome(d, Status.FAILED, reason="timeout"), Outcome(d, Status.FAILED, reason="refused"),
    ]  # fmt: skip
    store.write(calls, outcomes)
    cached = store.cached_calls(["p" * 64, "q" * 64, "r" * 64])
    assert {k[0]: v.raw for k, v in cached.items()} == {"p": "good", "q": "first", "r": "x"}
    assert queries.status(store, run_id, "r1").calls == 3
    with store.engine.connect() as conn:
        ended = dict(
            (i, (status, score, reason))
            for i, status, score, reason in conn.execute(
                select(J.id, J.status, J.score, J.reason).where(J.id.in_([a, b, c, d]))
            )
        )
    assert ended == {
        a: ("done", 5, None),  # done replaces failed
        b: ("done", 2, None),  # a later failure never replaces done
        c: ("done", 3, None),  # the first done stays
        d: ("failed", None, "refused"),  # the last failure is kept
    }


def test_report_sums_from_sql_equal_the_pure_reference(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    instances, _ = make_inputs()
    by_id = {i.id: i for i in instances}
    rng = random.Random(3)
    outcomes = []
    ids = [i for call in store.open_calls(store.run_by_id(run_id)) for i in call]
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
        for r in queries.export_rows(store, run_id, "r1")
    ]
    expected = aggregate(records, ABILITY, skill_order=SKILLS.names)
    got = rows_from_cells(
        point_cells(analytics.score_table(store, run_id)), ABILITY, skill_order=SKILLS.names
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
