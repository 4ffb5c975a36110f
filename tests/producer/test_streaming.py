"""A run's responses are streamed: validated once, their texts never held, read again when
written; a run's open calls are planned a page at a time (issue 24)."""

from __future__ import annotations

import json
import os
import tracemalloc
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import select, update

from flask_eval.app import budget as budgeting
from flask_eval.app import pipeline
from flask_eval.core import settings as settings_mod
from flask_eval.core.errors import InputError, Status
from flask_eval.core.spec import run_spec
from flask_eval.producer.context import RunContext
from flask_eval.producer.dispatch import MemoryTransport
from flask_eval.producer.plan import group_calls, open_call_stream
from flask_eval.producer.responses import FileResponses, load_responses, only
from flask_eval.producer.synthetic import write_inputs
from flask_eval.storage.models import JUDGMENT, utcnow
from flask_eval.storage.predicates import claimable
from flask_eval.storage.records import OpenRow, Outcome
from flask_eval.storage.store import J, Store

pytestmark = pytest.mark.unit

TEXT = 10_000  # characters per response: 2,000 of them are ~20 MB of text


def big_inputs(folder: Path, n: int = 1_000) -> tuple[Path, list[str]]:
    texts = {i: f"{i} " + "x" * TEXT for i in range(1, n + 1)}
    return write_inputs(folder, n, models=("m1", "m2"), texts=texts)


def test_validating_responses_holds_no_text(tmp_path: Path) -> None:
    instances, responses = big_inputs(tmp_path)
    tracemalloc.start()
    try:
        plan = pipeline.prepare(
            run_spec(
                instances=str(instances), responses=responses, judges=["memory/j"], run_name="big"
            )
        )
        _, validated = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        assert len(plan.fingerprint) == 64  # computed when first asked (--run named it)
        _, fingerprinted = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    total = 2 * 1_000 * TEXT
    assert validated < 0.1 * total  # the ids and lengths of the responses, no text
    # fingerprinting reads one file at a time (its responses sorted): at most one file's
    # texts are held at once, and none after
    assert fingerprinted < 0.75 * total
    for rs in plan.inputs.response_sets:
        assert isinstance(rs.responses, FileResponses)
        assert len(rs.instance_ids()) == 1_000
    texts = [r.text for r in plan.inputs.response_sets[0].responses]
    assert texts[:2] == ["1 " + "x" * TEXT, "2 " + "x" * TEXT]


def test_creating_a_run_streams_its_texts_to_the_store(tmp_path: Path) -> None:
    instances, responses = big_inputs(tmp_path)
    plan = pipeline.prepare(
        run_spec(instances=str(instances), responses=responses, judges=["memory/j"], run_name="big")
    )
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    settings = replace(settings_mod.load(), calls_per_message=50)
    assert plan.fingerprint  # its own measure: test_validating_responses_holds_no_text
    tracemalloc.start()
    try:
        started = pipeline.start(plan, store, MemoryTransport(), settings)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 0.25 * 2 * 1_000 * TEXT  # far less than the texts written
    _, stored = store.run_texts(started.run.id)
    assert len(stored) == 2_000
    assert stored[("m2", "7")] == "7 " + "x" * TEXT


def test_a_file_changed_after_validation_writes_nothing(tmp_path: Path) -> None:
    instances, responses = write_inputs(tmp_path, 5)
    plan = pipeline.prepare(
        run_spec(
            instances=str(instances), responses=responses, judges=["memory/j"], run_name="changed"
        )
    )
    path = Path(responses[1].split("=", 1)[1])
    lines = path.read_text().splitlines()
    lines[2] = json.dumps({"question_id": 3, "text": "a text never validated"})
    path.write_text("\n".join(lines) + "\n")
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    with pytest.raises(InputError, match="changed after it was validated") as info:
        pipeline.start(plan, store, MemoryTransport(), settings_mod.load())
    assert str(path) in str(info.value)
    assert store.find_run("changed") is None


def test_a_file_replaced_with_other_ids_of_the_same_size_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"question_id": 1, "text": "a"}\n{"question_id": 2, "text": "b"}\n')
    ids = {"1": "1", "2": "2", "3": "3"}
    rs = load_responses("m", str(path), ids)
    stamp = os.stat(path)
    path.write_text('{"question_id": 1, "text": "a"}\n{"question_id": 3, "text": "b"}\n')
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # size and mtime kept
    with pytest.raises(InputError, match="changed after it was validated"):
        list(rs.responses)


def test_a_selection_keeps_its_responses_unread(tmp_path: Path) -> None:
    _, responses = write_inputs(tmp_path, 6)
    path = responses[0].split("=", 1)[1]
    rs = load_responses("m1", path, {str(i): str(i) for i in range(1, 7)})
    kept = only(only(rs, {"2", "4", "5"}), {"4", "5", "6"})
    assert kept.instance_ids() == ("4", "5")
    assert [r.instance_id for r in kept.responses] == ["4", "5"]
    assert len(kept.responses) == 2


@pytest.mark.parametrize("page", [1, 2, 3, 5, 7, 1000])
def test_open_calls_in_pages_are_the_calls_of_all_rows(tmp_path: Path, page: int) -> None:
    instances, responses = write_inputs(tmp_path, 4)
    plan = pipeline.prepare(
        run_spec(
            instances=str(instances),
            responses=responses,
            judges=["memory/a", "memory/b"],
            run_name="paged",
        )
    )
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    run = pipeline.start(plan, store, MemoryTransport(), settings_mod.load()).run
    rows = store.open_rows(run.id)
    done = [Outcome(r.id, Status.DONE, score=3) for r in rows[1::4]]  # holes in subjects
    claimed = store.claim_contexts(run.id, [o.id for o in done], 60)
    assert len(claimed) == len(done)
    store.finish(done)
    finished = {o.id for o in done}
    died = [r.id for r in rows[2::5] if r.id not in finished]  # its worker died: lease expired
    assert len(store.claim_contexts(run.id, died, 60)) == len(died)
    with store.engine.begin() as conn:
        conn.execute(update(JUDGMENT).where(J.id.in_(died)).values(lease_until=utcnow()))
    with store.engine.connect() as conn:  # what is open, asked of the ledger directly
        open_rows = [
            OpenRow(*r)
            for r in conn.execute(
                select(J.id, J.model, J.model_b, J.instance_id, J.criterion, J.judge)
                .where(J.run_id == run.id, claimable(utcnow()))
                .order_by(J.id)
            )
        ]
    assert {r.id for r in open_rows} >= set(died)
    expected = group_calls(open_rows, RunContext.from_config(run.config))
    paged = list(open_call_stream(store, run, page=page))
    key = [(c.judge, c.model, c.instance_id, tuple(c.criteria), tuple(c.ids)) for c in paged]
    assert sorted(key) == sorted(
        (c.judge, c.model, c.instance_id, tuple(c.criteria), tuple(c.ids)) for c in expected
    )
    assert len(paged) == len(expected)  # a subject cut by a page's end is still one call


def test_a_page_of_open_rows_walks_the_primary_key_without_a_sort(tmp_path: Path) -> None:
    """Each page of a run's open rows starts where the last ended on the primary key: no
    sort of the run's rows per page (10M rows: 200 pages)."""
    from sqlalchemy.dialects import sqlite

    from flask_eval.storage.models import utcnow
    from flask_eval.storage.predicates import open_rows_selects

    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    for stmt in open_rows_selects(1, 5, 9, utcnow()):
        sql = str(stmt.compile(dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True}))
        with store.engine.connect() as conn:
            plan = [str(r[3]) for r in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}")]
        assert any("ix_judgment_run_status" in step for step in plan), plan
        assert not any("TEMP B-TREE" in step for step in plan), plan
    store.close()


def test_a_large_metered_run_is_budgeted_from_sampled_costs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past EXACT_METERING judgments a priced run's calls are costed at their groups'
    sampled means: the budget holds back about what the exact costs would."""
    from flask_eval.core.types import Price

    instances, responses = write_inputs(tmp_path, 300, models=("m1", "m2"))
    base = pipeline.prepare(
        run_spec(
            instances=str(instances), responses=responses, judges=["memory/j"], run_name="metered"
        )
    )
    plan = replace(base, judges=tuple(replace(j, price=Price(1000.0, 1000.0)) for j in base.judges))
    exact = plan.estimator().summarize(plan.planned_calls())[0].cost
    budget = exact / 2
    results = {}
    for limit in (10**9, 0):  # exact, then sampled
        monkeypatch.setattr(budgeting, "EXACT_METERING", limit)
        store = Store(f"sqlite:///{tmp_path / f'{limit}.db'}")
        sent = MemoryTransport()
        started = pipeline.start(plan, store, sent, settings_mod.load(), max_cost=budget)
        result = started.dispatched
        assert result.sent + result.held_back == 600  # a call per response: all counted
        assert result.estimated_cost <= budget
        assert sum(len(b) for _, b in sent.sent) == result.sent
        results[limit] = result.sent
    assert abs(results[0] - results[10**9]) <= 0.05 * results[10**9]


def test_resuming_a_large_metered_run_samples_its_open_calls_without_its_texts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`resume` of a metered run past EXACT_METERING counts its open calls from the
    stored responses' lengths and reads only the sampled texts (never every text of the
    run): the same sample and figures as feeding each open call with its texts."""
    from flask_eval.core.types import Price
    from flask_eval.producer.open_sample import sample_open_calls
    from flask_eval.producer.sampling import CallSampler

    instances, responses = write_inputs(tmp_path, 300, models=("m1", "m2"), words=(3, 90))
    base = pipeline.prepare(
        run_spec(
            instances=str(instances),
            responses=responses,
            judges=["memory/j", "memory/k"],
            run_name="resumed",
        )
    )
    plan = replace(base, judges=tuple(replace(j, price=Price(1000.0, 1000.0)) for j in base.judges))
    exact = sum(e.cost for e in plan.estimator().summarize(plan.planned_calls()))
    monkeypatch.setattr(budgeting, "EXACT_METERING", 0)
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    first = pipeline.start(
        plan, store, MemoryTransport(), settings_mod.load(), max_cost=exact / 4
    ).dispatched
    assert first.held_back > 0
    run = store.find_run("resumed")
    assert run is not None
    estimator = plan.estimator()
    fed = CallSampler(plan.context(), size=8)
    for call in open_call_stream(store, run):
        fed.add(call, estimator.texts(call))
    sampled = sample_open_calls(store, run, size=8)
    assert [vars(e) for e in sampled.summarize()] == [vars(e) for e in fed.summarize()]

    def held(*_: object) -> None:
        raise AssertionError("resume read every text of the run")

    monkeypatch.setattr(Store, "run_texts", held)
    sent = MemoryTransport()
    _, again, _ = pipeline.resume(store, run, sent, settings_mod.load(), max_cost=exact / 2)
    # nothing was judged (a memory transport): every call is open again, and the budget
    # of twice the first lets about twice as many through
    assert again.sent + again.held_back == first.sent + first.held_back
    assert again.estimated_cost <= exact / 2 and 1.8 * first.sent <= again.sent <= 2.2 * first.sent
    store.close()


def test_a_small_plans_streamed_sample_is_its_exact_estimate(tmp_path: Path) -> None:
    """Every group of a small plan is rendered whole: the streamed dry run (each file
    read once for all judges) says what the exact estimator says, judge by judge."""
    from flask_eval.core.types import Price

    instances, responses = write_inputs(tmp_path, 12, models=("m1", "m2"))
    base = pipeline.prepare(
        run_spec(
            instances=str(instances),
            responses=responses,
            judges=["memory/a", "memory/b"],
            run_name="small",
        )
    )
    plan = replace(base, judges=tuple(replace(j, price=Price(3.0, 15.0)) for j in base.judges))
    exact = plan.estimator().summarize(plan.planned_calls())
    streamed = plan.sampled().summarize()
    fields = ("judge", "jobs", "calls", "prompt_tokens", "completion_tokens", "cache_read_tokens")
    assert [[getattr(e, f) for f in fields] for e in streamed] == [
        [getattr(e, f) for f in fields] for e in exact
    ]
    for one, other in zip(streamed, exact, strict=True):
        assert one.cost == pytest.approx(other.cost)
        assert one.cache_cost == pytest.approx(other.cache_cost)
        assert one.rendered is None  # exact: no margin printed
