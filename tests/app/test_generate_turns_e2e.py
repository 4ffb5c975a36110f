"""`generate` of conversations, in-process: three simulated models under test, one per
provider (OpenAI, Anthropic, Gemini wire formats, through their real SDKs), answer
two-turn conversations turn by turn; the simulator shows that each turn-2 request carried
the same model's own turn-1 answer; a rerun after turn 1 pays only for turn 2; a model
whose turn 1 failed is not asked turn 2 (app/turns.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from flask_eval.app import generation, steps
from flask_eval.app.turns import TurnsDone, TurnsIncomplete, generate_turns, generation_plan
from flask_eval.core.settings import Settings
from flask_eval.core.types import Instance, JudgeConfig
from flask_eval.producer.conversations import expand
from flask_eval.simulator import generate as sim_generate
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import SimHandle, running_simulator
from flask_eval.storage import queries
from flask_eval.storage.store import Store
from tests.conftest import REPO

MTBENCH = (
    Path(os.environ.get("FLASK_EVAL_MTBENCH_DATA", REPO.parent / "shared" / "mtbench-data"))
    / "question.jsonl"
)
LEVELS = {"sim-a": 2.0, "sim-b": 3.5, "sim-c": 4.5}
PROVIDERS = {"sim-a": "openai", "sim-b": "anthropic", "sim-c": "gemini"}


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(key, "sk-test")


def conversation(cid: str, turns: list[str], system: str = "") -> list[Instance]:
    """The instances of one conversation, one per turn (as the loaders make them)."""
    template = Instance(cid, "", "", (), (), None, system_prompt=system)
    return expand(template, turns, [""] * len(turns))


def hand_made() -> list[Instance]:
    return [
        *conversation("81", ["Plan a trip to Hawaii.", "Now rewrite it starting with A."]),
        *conversation(
            "82", ["Draft an email to a supervisor.", "Critique your draft."], "Be brief."
        ),
        *conversation("83", ["Explain photosynthesis.", "Explain it to a child."]),
    ]


def models(sim: SimHandle) -> list[JudgeConfig]:
    base = {
        "openai": sim.openai_base_url,
        "anthropic": sim.anthropic_base_url,
        "gemini": sim.gemini_base_url,
    }
    return [
        JudgeConfig(f"m-{p}", f"{p}/{name}@{base[p]}", max_tokens=400)
        for name, p in PROVIDERS.items()
    ]


def run(instances: list[Instance], sim: SimHandle, url: str, name: str = "conv") -> TurnsDone:
    plan = generation_plan(instances, models(sim), "hand-made", name)
    settings = Settings(url, None)
    store = Store(url)
    try:
        dispatcher = steps.dispatcher_for(settings, store, plan.models, 16)
        return generate_turns(plan, store, dispatcher, settings)
    finally:
        store.close()


def check_own_answers(done: TurnsDone, conversations: int) -> None:
    """Each turn-2 answer says it was asked after the digest of the same model's turn-1
    answer, and carries that answer as its history."""
    for model, items in done.responses.items():
        first = {g.conversation: g.text for g in items if g.turn == 1}
        second = [g for g in items if g.turn == 2]
        assert len(first) == len(second) == conversations, model
        for g in second:
            assert g.history == (first[g.conversation],)
            said = sim_generate.conversation_of(g.text)
            assert said == (2, sim_generate.answers_digest([first[g.conversation]])), model


def test_three_models_answer_turn_two_after_their_own_turn_one(
    tmp_path: Path, sqlite_url: str
) -> None:
    instances = hand_made()
    with running_simulator(SimConfig(generators=LEVELS, generation_tokens=60)) as sim:
        done = run(instances, sim, sqlite_url)
        assert sim.stats()["requests"] == 3 * 6
        check_own_answers(done, 3)
        assert not done.not_asked and len(done.runs) == 1 + 3  # round 1, then one per model
        store = Store(sqlite_url)  # a generation run evaluates no model of its own
        try:
            assert {r["models"] for r in queries.runs_overview(store)} == {0}
        finally:
            store.close()
        # the in-process hand-over carries each turn's earlier answers
        sets = generation.response_sets(done.responses, [i.id for i in instances], "conv")
        by_id = {r.instance_id: r for r in sets[0].responses}
        assert by_id["81:t2"].history == (by_id["81:t1"].text,)
        written = generation.write_model_outputs(done.responses, done.run, str(tmp_path))
        records = [json.loads(line) for line in written["m-anthropic"].read_text().splitlines()]
        assert [r["question_id"] for r in records] == [81, 82, 83]
        texts = {g.instance_id: g.text for g in done.responses["m-anthropic"]}
        assert records[0]["choices"] == [{"index": 0, "turns": [texts["81:t1"], texts["81:t2"]]}]
        assert records[0]["model_id"] == "m-anthropic" and len(records[0]["answer_id"]) == 22
        assert records[0]["finish"] == ["stop", "stop"] and records[0]["cut_off"] == [False] * 2
        # again: every run is found done, nothing is asked
        again = run(instances, sim, sqlite_url)
        assert sim.stats()["requests"] == 3 * 6 and again.dispatched == 0
        assert again.responses == done.responses


def test_a_rerun_after_turn_one_asks_only_turn_two(sqlite_url: str) -> None:
    instances = hand_made()
    first_turns = [i for i in instances if i.turn == 1]
    with running_simulator(SimConfig(generators=LEVELS, generation_tokens=60)) as sim:
        run(first_turns, sim, sqlite_url)  # killed after turn 1, as it were
        assert sim.stats()["requests"] == 3 * 3
        done = run(instances, sim, sqlite_url)
        assert sim.stats()["requests"] == 3 * 3 + 3 * 3  # only the turn-2 calls
        assert done.dispatched == 3 * 3
    check_own_answers(done, 3)


def test_a_model_whose_turn_one_failed_is_not_asked_turn_two(sqlite_url: str) -> None:
    instances = hand_made()
    with (
        running_simulator(SimConfig(generators=LEVELS, generation_tokens=60)) as sim,
        running_simulator(SimConfig(generators=LEVELS, require_key="another")) as locked,
    ):
        broken = JudgeConfig("m-broken", f"openai/sim-a@{locked.openai_base_url}")
        plan = generation_plan(instances, [*models(sim), broken], "hand-made", "conv")
        settings = Settings(sqlite_url, None)
        store = Store(sqlite_url)
        try:
            dispatcher = steps.dispatcher_for(settings, store, plan.models, 16)
            with pytest.raises(TurnsIncomplete, match="m-broken: 3") as raised:
                generate_turns(plan, store, dispatcher, settings)
        finally:
            store.close()
        assert sim.stats()["requests"] == 3 * 6
        assert 1 <= locked.stats()["unauthorized"] <= 3  # turn 1 only, then halted
    done = raised.value.done
    assert done.not_asked == {"m-broken": 3} and done.responses["m-broken"] == []
    assert len(done.runs) == 1 + 3  # no round-2 run for the model without turn-1 answers
    del done.responses["m-broken"]
    check_own_answers(done, 3)


@pytest.mark.skipif(not MTBENCH.exists(), reason="MT-Bench questions not available")
def test_mt_bench_questions_answered_turn_by_turn(sqlite_url: str) -> None:
    lines = MTBENCH.read_text(encoding="utf-8").splitlines()[:6]
    instances = []
    for line in lines:
        q = json.loads(line)
        instances += conversation(str(q["question_id"]), list(q["turns"]))
    with running_simulator(SimConfig(generators=LEVELS, generation_tokens=60)) as sim:
        done = run(instances, sim, sqlite_url, "mtbench")
        assert sim.stats()["requests"] == 3 * len(instances)
    check_own_answers(done, len(lines))


def test_the_generate_command_writes_each_conversation_as_a_model_answer(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`flask-eval generate` of conversations (their instances planned as a conversation
    file's would be): one FastChat model answer per conversation and model."""
    from flask_eval.app import jobs
    from flask_eval.app.turns import whole_plan
    from tests.helpers import cli_env, flask_eval

    source = tmp_path / "instances.jsonl"
    source.write_text("{}\n")
    with running_simulator(SimConfig(generators=LEVELS, generation_tokens=60)) as sim:
        plan = whole_plan(hand_made(), models(sim), str(source), "conv")
        monkeypatch.setattr(jobs, "prepare_generation", lambda *a, **k: plan)
        env = cli_env(sqlite_url, GEMINI_API_KEY="sk-test")
        out = tmp_path / "out"
        args = ("generate", "--instances", str(source), "--model", "openai/x", "--quiet")
        result = flask_eval(*args, "--out", str(out), env=env)
        assert sim.stats()["requests"] == 3 * 6
        assert "m-gemini: 6 responses" in result.stdout
        records = [json.loads(line) for line in (out / "m-gemini.jsonl").read_text().splitlines()]
        again = flask_eval(*args, "--out", str(tmp_path / "again"), env=env)
        assert sim.stats()["requests"] == 3 * 6 and again.returncode == 0
    assert [len(r["choices"][0]["turns"]) for r in records] == [2, 2, 2]
    first, second = records[0]["choices"][0]["turns"]
    assert sim_generate.conversation_of(second) == (2, sim_generate.answers_digest([first]))
