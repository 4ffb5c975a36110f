"""Instances round-trip through the ledger whole (SQLite and PostgreSQL): a worker
rebuilds what the producer was given, system prompt and own rubrics included."""

from __future__ import annotations

from flask_eval.app.report import build_report
from flask_eval.core.errors import Status
from flask_eval.core.types import Instance, InstanceRubric, JudgeConfig, Response, ResponseSet
from flask_eval.rubrics import codec
from flask_eval.rubrics.skills import load_default
from flask_eval.storage import analytics
from flask_eval.storage.records import Outcome, RunInfo, rubrics_of, rubrics_text
from flask_eval.storage.store import Store
from tests.storage.test_migrations import make_v1_store

RUBRIC = InstanceRubric(
    'Does the answer keep the "budget" <= 100?\nNo made-up numbers.',
    {1: "ignores it", 2: "mostly ignores it", 3: "half", 4: "nearly", 5: "keeps it — exactly"},
)
OTHER = InstanceRubric("Is it polite?", {k: f"level {k} ✓" for k in range(1, 6)})


def instances() -> list[Instance]:
    return [
        Instance(
            id="b1",
            instruction="plan a trip",
            answer="a plan",
            skills=("rubric",),
            system_prompt="You are a travel agent.\nBe brief.",
            rubrics={"rubric": RUBRIC},
            capability="planning",
            task="travel_plan",
        ),
        Instance(
            id="b2",
            instruction="say hi",
            answer="hi",
            skills=("rubric", "Harmlessness"),
            domains=("Language", "Culture"),
            difficulty=2,
            rubrics={"rubric": OTHER},
            capability="safety",
            task=None,
        ),
        Instance(id="f3", instruction="2+2", answer="4", skills=("Correctness",)),
    ]


def create(store: Store) -> int:
    given = instances()
    sets = [ResponseSet("m", "m.jsonl", tuple(Response("m", i.id, f"r {i.id}") for i in given))]
    config = {
        "judges": [JudgeConfig("memory/j", "memory/j").to_data()],
        "skills": codec.to_data(load_default()),
        "mode": "instance",
    }
    run, created = store.create_run(
        name="r",
        fingerprint="f" * 64,
        mode="instance",
        config=config,
        instances=given,
        response_sets=sets,
        judges=["memory/j"],
    )
    assert created
    return run.id


def test_instances_read_back_whole(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    back = store.instances(run_id)
    # the ledger keeps domains as a set: they come back sorted
    expected = {i.id: i for i in instances()}
    expected["b2"] = Instance(**{**vars(expected["b2"]), "domains": ("Culture", "Language")})
    assert back == expected
    assert back["b1"].rubrics["rubric"].scores[5] == "keeps it — exactly"
    assert back["f3"].rubrics == {} and back["f3"].system_prompt == ""
    assert back["f3"].capability is None and back["f3"].task is None
    assert list(store.instances(run_id, ["f3", "nope"])) == ["f3"]
    store.close()


def test_a_claim_carries_the_system_prompt_and_the_rows_rubric(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    ids = [row.id for row in store.open_rows(run_id)]
    contexts = {(c.instance_id, c.criterion): c for c in store.claim_contexts(run_id, ids, 60)}
    assert set(contexts) == {
        ("b1", "rubric"),
        ("b2", "rubric"),
        ("b2", "Harmlessness"),
        ("f3", "Correctness"),
    }
    b1 = contexts[("b1", "rubric")]
    assert b1.system_prompt == "You are a travel agent.\nBe brief."
    assert b1.rubric == RUBRIC
    assert contexts[("b2", "rubric")].rubric == OTHER
    assert contexts[("b2", "Harmlessness")].rubric is None  # the run's criterion applies
    assert contexts[("f3", "Correctness")].system_prompt == ""
    assert contexts[("f3", "Correctness")].rubrics == {}
    store.close()


def test_the_pivot_carries_capability_and_task(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    p = analytics.pivot(store, run_id)
    assert p.capability == {"b1": "planning", "b2": "safety", "f3": None}
    assert p.task == {"b1": "travel_plan", "b2": None, "f3": None}
    store.close()


def test_rubrics_text_round_trips_and_is_canonical() -> None:
    both = {"b": OTHER, "a": RUBRIC}
    text = rubrics_text(both)
    assert text == rubrics_text({"a": RUBRIC, "b": OTHER})
    assert dict(rubrics_of(text)) == both
    assert dict(rubrics_of("{}")) == {} and dict(rubrics_of(None)) == {}


def test_a_migrated_store_keeps_new_instances_whole(database_url: str) -> None:
    make_v1_store(database_url)
    store = Store(database_url)  # migrated 0001 -> head
    if store.dialect == "postgresql":  # the fixture wrote run 1 with an explicit id
        with store.engine.begin() as conn:
            conn.exec_driver_sql("SELECT setval(pg_get_serial_sequence('run', 'id'), 1)")
    run_id = create(store)
    back = store.instances(run_id)
    assert back["b1"] == instances()[0]
    assert store.instances(1)["1"].rubrics == {}  # the old run's instances are untouched
    store.close()


def test_the_report_breaks_a_ledger_down_by_capability_and_task(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    scores = {"b1": 5, "b2": 1, "f3": 3}  # planning 5; safety 1 (both criteria); none 3
    rows = store.open_rows(run_id)
    store.write((), [Outcome(r.id, Status.DONE, score=scores[r.instance_id]) for r in rows])
    report = build_report(store, store.run_by_id(run_id), replicates=20, progress=False)
    got = {(r.dimension, r.key): r for r in report.rows}
    assert got[("capability", "planning")].mean == 5 and got[("capability", "safety")].mean == 1
    assert got[("task", "travel_plan")].n == 1 and ("task", "None") not in got
    assert got[("overall", "all")].mean == (5 + 1 + 1 + 3) / 4  # pooled
    assert got[("overall", "biggen")].mean == (5 + 1) / 2  # mean of the capability means
    assert {k for d, k in got if d == "skill"} == {"rubric", "Harmlessness", "Correctness"}
    assert report.capabilities == ["planning", "safety"]
    assert report.definitions[0]["key"] == "biggen"
    store.close()


def test_a_bulk_load_keeps_instances_whole(database_url: str) -> None:
    """Enough instances for PostgreSQL's COPY path (storage.postgres_store.SMALL_INSERT)."""
    given = [
        Instance(
            id=f"i{k:03d}",
            instruction=f"q\t{k}\\n",
            answer="",
            skills=("rubric",),
            system_prompt="" if k % 2 else f"sys\n{k}",
            rubrics={"rubric": RUBRIC},
            capability=None if k % 5 == 0 else f"cap{k % 3}",
            task=f"t{k}" if k % 2 else None,
        )
        for k in range(150)
    ]
    sets = [ResponseSet("m", "m.jsonl", tuple(Response("m", i.id, "r") for i in given))]
    store = Store(database_url)
    run, _ = store.create_run(
        name="bulk",
        fingerprint="b" * 64,
        mode="instance",
        config={"judges": [], "skills": [], "mode": "instance"},
        instances=given,
        response_sets=sets,
        judges=["memory/j"],
    )
    assert store.instances(run.id) == {i.id: i for i in given}
    store.close()


def one_judge_run(
    store: Store, name: str, given: list[Instance], sets: list[ResponseSet]
) -> RunInfo:
    """A run of ``given`` and ``sets`` with one judge (memory/j), in instance mode."""
    config = {
        "judges": [JudgeConfig("memory/j", "memory/j").to_data()],
        "skills": codec.to_data(load_default()),
        "mode": "instance",
    }
    run, _ = store.create_run(
        name=name,
        fingerprint="e" * 64,
        mode="instance",
        config=config,
        instances=given,
        response_sets=sets,
        judges=["memory/j"],
    )
    return run


def test_texts_that_copy_escapes_are_stored_exactly(database_url: str) -> None:
    """A new run's rows reach PostgreSQL through COPY's text format: backslashes, tabs,
    newlines, carriage returns, NULL-looking and non-ASCII text come back unchanged."""
    tricky = "a\\b\tc\nd\re \\N \\\\t ✓ end"
    given = [Instance(id="x\\y", instruction=tricky, answer="\\N", skills=("Correctness",))]
    sets = [ResponseSet("m", "m.jsonl", (Response("m", "x\\y", tricky + "\r\n"),))]
    store = Store(database_url)
    run = one_judge_run(store, "tricky", given, sets)
    texts, responses = store.run_texts(run.id)
    assert texts == {"x\\y": (tricky, "\\N")}
    assert responses == {("m", "x\\y"): tricky + "\r\n"}
    assert [(r.instance_id, r.criterion) for r in store.open_rows(run.id)] == [
        ("x\\y", "Correctness")
    ]


def test_response_lengths_count_characters_as_python_does(database_url: str) -> None:
    """What a large run's resume estimate reads instead of every text (issue 24): the
    length of chosen responses in characters (astral and combining ones included, as
    ``len`` counts them) and their texts, for exactly the keys asked."""
    from flask_eval.storage.response_texts import response_lengths, response_texts

    texts = {"1": "plain", "2": "émoji 😀 and ✓ a\u0301", "3": "", "4": "x" * 5000}
    given = [Instance(id=i, instruction="q", answer="a", skills=("Correctness",)) for i in texts]
    sets = [
        ResponseSet(m, f"{m}.jsonl", tuple(Response(m, i, t + m) for i, t in texts.items()))
        for m in ("m", "n")
    ]
    store = Store(database_url)
    run = one_judge_run(store, "lengths", given, sets)
    keys = {("m", "2"), ("n", "2"), ("n", "3"), ("m", "4"), ("m", "9"), ("z", "1")}
    known = {k for k in keys if k[0] in "mn" and k[1] in texts}
    assert response_lengths(store, run.id, keys) == {k: len(texts[k[1]] + k[0]) for k in known}
    assert response_texts(store, run.id, keys) == {k: texts[k[1]] + k[0] for k in known}
    store.close()
