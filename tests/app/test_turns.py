"""Planning a generation in rounds (app/turns.py) and writing its conversations
(app/generation.py): pure, nothing sent."""

from __future__ import annotations

import json
from pathlib import Path

from flask_eval.app.generation import Generated, write_model_outputs
from flask_eval.app.turns import round_name, split_turns, turn_plan, whole_plan
from flask_eval.core.limits import MAX_RUN_NAME
from flask_eval.core.stored import StoredConfig
from flask_eval.core.types import Instance, JudgeConfig
from flask_eval.producer.conversations import expand
from flask_eval.rubrics.kind import NO_MODEL
from flask_eval.storage.records import RunInfo

MODELS = [JudgeConfig("a", "openai/a"), JudgeConfig("b", "openai/b")]


def turns(cid: str, texts: list[str]) -> list[Instance]:
    """The instances of one conversation, one per turn, as the loaders make them."""
    return expand(Instance(cid, "", "", (), (), None), texts, [""] * len(texts))


ONE_SHOT = Instance("7", "Say hi", "", (), (), None)
CONVERSATIONS = [*turns("81", ["u1", "u2", "u3"]), ONE_SHOT, *turns("82", ["v1", "v2"])]


def test_a_generation_without_conversations_is_one_round_its_plan_unchanged() -> None:
    plan = whole_plan([ONE_SHOT], MODELS, "f.jsonl")
    split = split_turns(plan)
    assert split.first is plan and split.later == () and split.turns() == 1


def test_round_one_is_the_first_turns_under_the_generations_name() -> None:
    plan = whole_plan(CONVERSATIONS, MODELS, "f.jsonl")
    split = split_turns(plan)
    assert split.name == plan.name
    assert [i.id for i in split.first.inputs.instances] == ["81:t1", "7", "82:t1"]
    assert [[i.id for i in t] for t in split.later] == [["81:t2", "82:t2"], ["81:t3"]]
    # its fingerprint is that of a generation of those instances alone: a generation of
    # the first turns, then of the whole conversations, shares its first run
    alone = whole_plan([i for i in CONVERSATIONS if (i.turn or 1) == 1], MODELS, "f.jsonl")
    assert split.first.fingerprint == alone.fingerprint


def test_turn_k_is_planned_for_the_conversations_the_model_answered_to_k_minus_one() -> None:
    split = split_turns(whole_plan(CONVERSATIONS, MODELS, "f.jsonl", "gen"))
    plan = turn_plan(split, 2, MODELS[0], {"81": ("a1",)})
    assert plan is not None and plan.judges == (MODELS[0],)
    assert [i.id for i in plan.inputs.instances] == ["81:t2"]
    (held,) = plan.inputs.response_sets
    assert held.model == NO_MODEL and [
        (r.instance_id, r.text, r.history) for r in held.responses
    ] == [("81:t2", "", ("a1",))]
    assert plan.inputs.about_instances and plan.name.startswith("gen-t2-a-")
    # other answers, another run; no answers, no run; too few answers, not planned
    other = turn_plan(split, 2, MODELS[0], {"81": ("a1 again",)})
    assert other is not None and other.name != plan.name
    assert turn_plan(split, 2, MODELS[0], {}) is None
    assert turn_plan(split, 3, MODELS[0], {"81": ("a1",)}) is None
    third = turn_plan(split, 3, MODELS[0], {"81": ("a1", "a2")})
    assert third is not None and [i.id for i in third.inputs.instances] == ["81:t3"]


def test_a_rounds_name_fits_a_run_name() -> None:
    long = "g" * MAX_RUN_NAME
    name = round_name(long, 2, JudgeConfig("m" * 150, "openai/m"), [])
    assert len(name) == MAX_RUN_NAME and name.startswith("ggg") and "-t2-" in name


def _g(iid: str, text: str, conversation: str | None = None, turn: int | None = None) -> Generated:
    return Generated("m/x", iid, text, "stop", 10, 5, 0.5, conversation, turn)


def test_conversations_are_written_as_fastchat_model_answers(tmp_path: Path) -> None:
    run = RunInfo(1, "gen", "f", "instance", StoredConfig.from_data({"judges": []}))
    made = [
        _g("81:t1", "a1", "81", 1),
        _g("7", "hi"),
        _g("81:t2", "a2", "81", 2),
        _g("82:t1", "b1", "82", 1),  # its turn 2 failed: its turn 1 alone
        _g("83:t2", "c2", "83", 2),  # no turn 1: not a conversation to write
    ]
    path = write_model_outputs({"m/x": made}, run, str(tmp_path))["m/x"]
    assert path.name == "m_x.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["question_id"] for r in records] == [81, 7, 82]
    first = records[0]
    assert first["choices"] == [{"index": 0, "turns": ["a1", "a2"]}]
    assert first["model_id"] == "m/x" and isinstance(first["tstamp"], float)
    assert first["usage"] == {"prompt_tokens": 20, "completion_tokens": 10, "cost": 1.0}
    assert first["finish"] == ["stop", "stop"] and first["cut_off"] == [False, False]
    assert records[1]["text"] == "hi" and "choices" not in records[1]
    assert records[2]["choices"][0]["turns"] == ["b1"]
