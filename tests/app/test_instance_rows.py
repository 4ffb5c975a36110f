"""Rows about an instance alone (generation, annotation): no model and no stand-in
response, planned with the fingerprints runs had when they held one (so `flask-eval
eval` finds its earlier runs by name), and the stand-in of stores written before
removed by schema version 12 and by the import of a version 1 bundle."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import select

from flask_eval.app.bundle_v1 import upgraded
from flask_eval.app.jobs import InstanceSource, prepare_annotation, prepare_generation
from flask_eval.rubrics.kind import NO_MODEL
from flask_eval.storage.models import JUDGMENT, RESPONSE
from flask_eval.storage.store import Store
from tests.conftest import EXAMPLES

SOURCE = InstanceSource(instances=str(EXAMPLES / "instances.jsonl"))
#: the fingerprints flask-eval 0.2.0 gave these plans (its rows had a stand-in response)
GENERATION_0_2_0 = "c67dbd94ec5f6d15725b995d809e68ebf763d150357cd64446132015a0197345"
ANNOTATION_0_2_0 = "5abc11f004e5852d44f86e2fa429e915a642bb1d27328831289cd0dd0f6f3ccc"


def test_plans_keep_the_fingerprints_of_runs_that_held_a_stand_in() -> None:
    generation = prepare_generation(SOURCE, models=["m1=openai/m1", "m2=openai/m2"])
    annotation, _ = prepare_annotation(SOURCE, annotators=["a1=openai/a1"], relabel=True)
    assert annotation is not None
    assert generation.fingerprint == GENERATION_0_2_0
    assert generation.name == f"gen-{GENERATION_0_2_0[:10]}"
    assert annotation.fingerprint == ANNOTATION_0_2_0
    for plan in (generation, annotation):
        assert plan.inputs.response_sets == () and plan.inputs.about_instances
    # the criterion nothing scores carries no rubric, in the plan and the run's config
    assert not generation.skillset.get("response").rubric


def test_a_run_about_instances_stores_rows_with_no_model_and_no_response(
    tmp_path: Path,
) -> None:
    plan = prepare_generation(SOURCE, models=["m1=openai/m1", "m2=openai/m2"])
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    try:
        config = {"kind": plan.kind, "kind_options": {}}
        run, created = store.create_run(
            name=plan.name,
            fingerprint=plan.fingerprint,
            mode=plan.mode,
            config=config,
            instances=plan.inputs.instances,
            response_sets=plan.inputs.response_sets,
            judges=[j.name for j in plan.judges],
        )
        assert created and run.ledger is not None and len(run.ledger) == plan.size()
        with store.engine.connect() as conn:
            models = {r[0] for r in conn.execute(select(JUDGMENT.c.model))}
            responses = conn.execute(select(RESPONSE.c.model)).all()
        assert models == {NO_MODEL} and responses == []
        # the calls the ledger makes are the plan's: one per instance and model
        assert len(list(plan.new_calls(run.ledger))) == len(plan.planned_calls()) == plan.size()
    finally:
        store.close()


def test_a_version_1_bundle_is_read_without_its_stand_in() -> None:
    columns = {"run": ["name", "config"], "response": ["run_id", "model", "instance_id", "text"]}
    stand_in = {
        "kind": "generation",
        "models": [""],
        "responses": {"": ""},
        "coverage": {"": [2, 2]},
        "skills": [{"name": "response", "rubric": {"1": "not scored"}}],
    }
    sections = [
        ("run", [["gen", json.dumps(stand_in)]]),
        ("response", [[1, "", "1", ""], [1, "", "2", ""]]),
    ]
    got = [(t, list(rows)) for t, rows in upgraded(sections, columns)]
    config = json.loads(got[0][1][0][1])
    assert (config["models"], config["responses"], config["coverage"]) == ([], {}, {})
    assert config["skills"] == [{"name": "response", "rubric": {}}]
    assert got[1] == ("response", [])
    # a judging run's responses stay, the model '' included (no stand-in there)
    judged = [("run", [["r", json.dumps({"models": ["a"]})]]), ("response", [[1, "a", "1", "x"]])]
    assert [(t, list(rows)) for t, rows in upgraded(judged, columns)] == [
        ("run", [["r", json.dumps({"models": ["a"]})]]),
        ("response", [[1, "a", "1", "x"]]),
    ]
