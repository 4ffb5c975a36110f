"""`flask-eval eval` and the Python API over conversations, in-process with the simulator:
each turn 2 is generated with the model's own turn-1 answer, the conversations are not
annotated, and the judge of turn 2 is shown the same model's turn-1 answer (the prompt the
viewer renders for the judgment, verified against the call's cache key)."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import select

from flask_eval import api
from flask_eval.app.prompts import render_prompt
from flask_eval.simulator import generate as sim_generate
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage import browse
from flask_eval.storage.models import JUDGMENT
from flask_eval.storage.store import Store
from tests.helpers import _as_a_fresh_process, cli_env, flask_eval

LEVELS = {"m1": 2.0, "m2": 4.0}
CONVERSATIONS = [
    {"id": "c1", "turns": ["Plan a trip to Hawaii.", "Now rewrite it starting with A."]},
    {
        "id": "c2",
        "turns": ["Explain photosynthesis.", "Explain it to a child."],
        "references": ["Light to sugar.", "Plants eat light."],
    },
]
ONE_SHOT = {"idx": 7, "instruction": "Name three primes.", "answer": "2, 3, 5"}


def instances_file(tmp_path: Path) -> Path:
    path = tmp_path / "instances.jsonl"
    lines = [*CONVERSATIONS, ONE_SHOT]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


def first_answers(out: Path, model: str) -> dict[str, list[str]]:
    """Conversation -> the model's answers, as `eval` wrote them (FastChat's records)."""
    records = [
        json.loads(x) for x in (out / "responses" / f"{model}.jsonl").read_text().split("\n") if x
    ]
    return {str(r["question_id"]): r["choices"][0]["turns"] for r in records if "choices" in r}


def test_eval_judges_turn_two_with_the_models_own_turn_one(tmp_path: Path, sqlite_url: str) -> None:
    out = tmp_path / "out"
    with running_simulator(SimConfig(generators=LEVELS, generation_tokens=40)) as sim:
        env = cli_env(sqlite_url, OPENAI_BASE_URL=sim.openai_base_url)
        result = flask_eval(
            "eval",
            "--instances",
            str(instances_file(tmp_path)),
            "--model",
            "m1=openai/m1",
            "--model",
            "m2=openai/m2",
            "--judge",
            "openai/judge",
            "--out",
            str(out),
            "--quiet",
            env=env,
        )
        assert result.returncode == 0, result.stderr
        # 2 models x (2 conversations x 2 turns + 1) generated, 1 instance annotated
        # (conversations are not), 2 x 5 responses judged
        assert sim.stats()["requests"] == 10 + 1 + 10
    written = [json.loads(x) for x in (out / "instances.jsonl").read_text().splitlines()]
    assert [w.get("id", w.get("idx")) for w in written] == ["c1", "c2", 7]
    assert written[1]["turns"] == CONVERSATIONS[1]["turns"]
    assert written[1]["references"] == CONVERSATIONS[1]["references"]
    answers = {m: first_answers(out, m) for m in LEVELS}
    for model, of_model in answers.items():
        for turns in of_model.values():  # turn 2 was asked after this model's turn 1
            said = sim_generate.conversation_of(turns[1])
            assert said == (2, sim_generate.answers_digest([turns[0]])), model
    store = Store(sqlite_url)
    try:
        name = next(r.name for r in browse.runs(store) if "-judge-" in r.name)
        run = store.find_run(name)
        assert run is not None
        with store.engine.connect() as conn:
            rows = conn.execute(
                select(JUDGMENT.c.id, JUDGMENT.c.model, JUDGMENT.c.instance_id).where(
                    JUDGMENT.c.run_id == run.id, JUDGMENT.c.instance_id.like("%:t2")
                )
            ).all()
        assert len(rows) > 0
        seen = set()
        for jid, model, iid in rows:
            if (model, iid) in seen:
                continue
            seen.add((model, iid))
            record = browse.judgment(store, run.id, jid)
            assert record is not None and record.call is not None
            prompt = render_prompt(store, run, record)
            assert prompt.verified
            text = "\n".join(m["content"] for m in prompt.messages)
            conversation = iid.split(":")[0]
            own, other = (
                answers[model][conversation][0],
                answers["m2" if model == "m1" else "m1"][conversation][0],
            )
            assert own in text and other not in text
            assert "Grading turn: 2" in record.call["raw"]
        assert len(seen) == 4
    finally:
        store.close()


def test_the_apis_generate_answers_conversations_turn_by_turn(
    tmp_path: Path, sqlite_url: str
) -> None:
    with running_simulator(SimConfig(generators=LEVELS, generation_tokens=40)) as sim:
        env = cli_env(sqlite_url, OPENAI_BASE_URL=sim.openai_base_url)
        with _as_a_fresh_process(env):
            records = api.generate(str(instances_file(tmp_path)), models=["m1=openai/m1"])
    by_id = {r["instance_id"]: r for r in records}
    assert set(by_id) == {"c1:t1", "c1:t2", "c2:t1", "c2:t2", "7"}
    for cid in ("c1", "c2"):
        first, second = by_id[f"{cid}:t1"], by_id[f"{cid}:t2"]
        assert second["history"] == [first["text"]] and second["turn"] == 2
        said = sim_generate.conversation_of(second["text"])
        assert said == (2, sim_generate.answers_digest([first["text"]]))
    assert by_id["7"]["history"] == [] and by_id["7"]["conversation"] is None
