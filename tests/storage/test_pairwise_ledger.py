"""A pairwise ledger on real SQLite and PostgreSQL: planned from ordered model pairs (both
the plain insert and the COPY path), claimed with both responses, exported with
``model_b``, counted by ``status``."""

from __future__ import annotations

from collections import Counter

import pytest
from sqlalchemy import func, select

from flask_eval.core.errors import Status
from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND, Instance, Response, ResponseSet
from flask_eval.storage import exports, queries
from flask_eval.storage.models import JUDGMENT, RUN
from flask_eval.storage.planning import Pair
from flask_eval.storage.postgres_store import SMALL_INSERT
from flask_eval.storage.records import JobContext, Outcome
from flask_eval.storage.store import Store

J = JUDGMENT.c
JUDGES = ("memory/j1", "memory/j2")
MODELS = ("alpha", "beta", "gamma")


def make_inputs(n: int) -> tuple[list[Instance], list[ResponseSet]]:
    """``n`` instances with 1 or 2 criteria; alpha answers all, beta all but the last,
    gamma only the even ones."""
    instances = [
        Instance(
            str(i),
            f"question {i}",
            f"answer {i}",
            ("overall",) if i % 2 else ("Factuality", "Harmlessness"),
        )
        for i in range(n)
    ]
    answers = {
        "alpha": [i.id for i in instances],
        "beta": [i.id for i in instances[:-1]],
        "gamma": [i.id for i in instances if int(i.id) % 2 == 0],
    }
    sets = [
        ResponseSet(m, f"{m}.jsonl", tuple(Response(m, iid, f"{m} on {iid}") for iid in ids))
        for m, ids in answers.items()
    ]
    return instances, sets


def expected_rows(
    instances: list[Instance], sets: list[ResponseSet], pairs: list[Pair]
) -> Counter[tuple[str, str, str, str, str]]:
    """The ledger the rule says: (first, second, instance, criterion, judge) for every
    pair, instance both answered, criterion of the instance, judge; each once."""
    answered = {rs.model: {r.instance_id for r in rs.responses} for rs in sets}
    return Counter(
        (a, b, i.id, c, j)
        for a, b in pairs
        for i in instances
        if i.id in answered[a] and i.id in answered[b]
        for c in i.skills
        for j in JUDGES
    )


def create(
    store: Store, pairs: list[Pair] | None, n: int = 6, name: str = "p1"
) -> tuple[int, list[Instance], list[ResponseSet]]:
    instances, sets = make_inputs(n)
    run, created = store.create_run(
        name=name,
        fingerprint="p" * 64,
        mode="instance",
        config={"mode": "instance"},
        instances=instances,
        response_sets=sets,
        judges=list(JUDGES),
        pairs=pairs,
    )
    assert created
    return run.id, instances, sets


def ledger(store: Store, run_id: int) -> Counter[tuple[str, str, str, str, str]]:
    stmt = select(J.model, J.model_b, J.instance_id, J.criterion, J.judge, J.status).where(
        J.run_id == run_id
    )
    with store.engine.connect() as conn:
        rows = conn.execute(stmt).all()
    assert {r.status for r in rows} == {Status.PENDING.value}
    return Counter((r.model, r.model_b, r.instance_id, r.criterion, r.judge) for r in rows)


ALL_BOTH_ORDERS: list[Pair] = [
    ("alpha", "beta"),
    ("beta", "alpha"),
    ("alpha", "gamma"),
    ("gamma", "alpha"),
    ("beta", "gamma"),
    ("gamma", "beta"),
]


@pytest.mark.parametrize("n", [3, 40], ids=["plain-insert", "bulk-copy"])
def test_pairs_plan_one_row_per_answered_instance_pair_criterion_judge(
    database_url: str, n: int
) -> None:
    store = Store(database_url)
    run_id, instances, sets = create(store, ALL_BOTH_ORDERS, n)
    got = ledger(store, run_id)
    want = expected_rows(instances, sets, ALL_BOTH_ORDERS)
    assert got == want
    assert max(got.values()) == 1  # each row once
    if n == 40:  # large enough for PostgreSQL's COPY path
        assert sum(got.values()) >= SMALL_INSERT
    # no absolute rows; the instance beta did not answer has no beta row
    assert all(b for _, b, *_ in got)
    last = instances[-1].id
    assert not [k for k in got if k[2] == last and "beta" in k[:2]]
    # an odd instance: gamma never answered it, so no gamma pair reaches it
    assert not [k for k in got if k[2] == "1" and "gamma" in k[:2]]
    counts = queries.status(store, run_id, "p1")
    assert counts.total == counts.pending == sum(want.values())
    assert counts.done == counts.failed == 0


def test_one_order_only_and_a_baseline_plan(database_url: str) -> None:
    store = Store(database_url)
    pairs: list[Pair] = [("beta", "alpha"), ("gamma", "alpha")]  # each model vs alpha
    run_id, instances, sets = create(store, pairs)
    got = ledger(store, run_id)
    assert got == expected_rows(instances, sets, pairs)
    assert {k[:2] for k in got} == set(pairs)  # never the swapped order
    # alpha only appears as model_b, yet the overview counts three models
    (overview,) = queries.runs_overview(store)
    assert (overview["models"], overview["judges"]) == (3, 2)


def test_absolute_run_is_unchanged_by_the_pairwise_path(database_url: str) -> None:
    store = Store(database_url)
    run_id, instances, sets = create(store, None)
    got = ledger(store, run_id)
    by_id = {i.id: i for i in instances}
    assert got == Counter(
        (r.model, "", r.instance_id, c, j)
        for rs in sets
        for r in rs.responses
        for c in by_id[r.instance_id].skills
        for j in JUDGES
    )
    assert exports.export_fields(store, run_id) == exports.EXPORT_FIELDS
    (row, *_) = exports.export_rows(store, run_id, "p1")
    assert tuple(row) == exports.EXPORT_FIELDS  # no model_b key: the contract as before
    (context, *_) = store.claim_contexts(run_id, [r.id for r in store.open_rows(run_id)], 60)
    assert context.model_b == "" and context.response_b == ""
    assert context.response == f"{context.model} on {context.instance_id}"


def test_a_pair_of_one_model_with_itself_writes_nothing(database_url: str) -> None:
    store = Store(database_url)
    with pytest.raises(ValueError, match="two different models"):
        create(store, [("alpha", "beta"), ("gamma", "gamma")])
    with store.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(RUN)).scalar_one() == 0
        assert conn.execute(select(func.count()).select_from(JUDGMENT)).scalar_one() == 0


def test_resume_finds_the_run_and_plans_nothing_twice(database_url: str) -> None:
    store = Store(database_url)
    run_id, instances, sets = create(store, ALL_BOTH_ORDERS)
    before = ledger(store, run_id)
    again, created = store.create_run(
        name="p1",
        fingerprint="p" * 64,
        mode="instance",
        config={},
        instances=instances,
        response_sets=sets,
        judges=list(JUDGES),
        pairs=ALL_BOTH_ORDERS,
    )
    assert (again.id, created) == (run_id, False)
    assert ledger(store, run_id) == before


def test_claim_returns_both_responses_by_position(database_url: str) -> None:
    store = Store(database_url)
    run_id, _, _ = create(store, [("alpha", "beta"), ("beta", "alpha")])
    rows = store.open_rows(run_id)
    contexts = store.claim_contexts(run_id, [r.id for r in rows], 60)
    assert [c.id for c in contexts] == sorted(r.id for r in rows)
    for c in contexts:
        assert c.response == f"{c.model} on {c.instance_id}"
        assert c.response_b == f"{c.model_b} on {c.instance_id}"
        assert c.instruction == f"question {c.instance_id}"
        assert c.subject_key == (run_id, c.model, c.model_b, c.instance_id, c.judge)
    orders = {(c.model, c.model_b) for c in contexts}
    assert orders == {("alpha", "beta"), ("beta", "alpha")}
    assert store.claim_contexts(run_id, [r.id for r in rows], 60) == []  # leased


def test_export_and_status_of_a_pairwise_run(database_url: str) -> None:
    store = Store(database_url)
    run_id, _, _ = create(store, [("alpha", "gamma"), ("gamma", "alpha")])
    first, second, third, *_ = store.open_rows(run_id)
    store.claim_contexts(run_id, [first.id, second.id, third.id], 60)
    store.finish(
        [
            Outcome(first.id, Status.DONE, score=VERDICT_FIRST, rationale="a is better"),
            Outcome(second.id, Status.DONE, score=VERDICT_SECOND),
            Outcome(third.id, Status.FAILED, reason="unparseable", detail="no verdict"),
        ]
    )
    counts = queries.status(store, run_id, "p1")
    assert (counts.done, counts.failed) == (2, 1)
    assert counts.pending == counts.total - 3
    assert counts.failed_by_reason == {"unparseable": 1}
    fields = exports.export_fields(store, run_id)
    assert fields == exports.PAIRWISE_EXPORT_FIELDS
    assert fields[:3] == ("run", "model", "model_b") and set(fields) - {"model_b"} == set(
        exports.EXPORT_FIELDS
    )
    rows = {
        (r["model"], r["instance_id"], r["skill"], r["judge"]): r
        for r in exports.export_rows(store, run_id, "p1")
    }
    assert len(rows) == counts.total  # (model, instance, criterion, judge) names a row here
    assert all(tuple(r) == fields for r in rows.values())
    done = rows[first.model, first.instance_id, first.criterion, first.judge]
    assert (done["model_b"], done["score"], done["status"]) == (first.model_b, 1, "done")
    failed = rows[third.model, third.instance_id, third.criterion, third.judge]
    assert (failed["reason"], failed["detail"]) == ("unparseable", "no verdict")
    assert {r["model_b"] for r in rows.values()} == {"alpha", "gamma"}


def test_job_context_of_row_takes_the_old_and_the_new_claim_columns() -> None:
    head = (7, 1, "alpha", "", "3", "Factuality", "memory/j1", "q", "ref", "resp", None, None)
    old = JobContext.of_row(head)
    assert (old.response, old.response_b, old.system_prompt, dict(old.rubrics)) == (
        "resp",
        "",
        "",
        {},
    )
    assert JobContext.of_row((*head, None)).response_b == ""
    assert JobContext.of_row((*head, "second")).response_b == "second"
    with pytest.raises(ValueError, match="12, 13 or 17 columns"):
        JobContext.of_row((*head, "second", "extra"))


def test_a_csv_export_takes_its_header_from_export_fields(database_url: str) -> None:
    import csv
    import io

    store = Store(database_url)
    run_id, _, _ = create(store, [("alpha", "beta")])
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=exports.export_fields(store, run_id))
    writer.writeheader()
    writer.writerows(exports.export_rows(store, run_id, "p1"))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("run,model,model_b,judge,")
    assert len(lines) == 1 + queries.status(store, run_id, "p1").total
    assert all(line.startswith("p1,alpha,beta,") for line in lines[1:])
    # the absolute header would refuse these rows: the CLI must ask export_fields
    with pytest.raises(ValueError, match="model_b"):
        csv.DictWriter(io.StringIO(), fieldnames=exports.EXPORT_FIELDS).writerows(
            exports.export_rows(store, run_id, "p1")
        )
