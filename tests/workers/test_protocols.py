"""What a worker shows a judge, as the ledger says (in-memory judge, SQLite and
PostgreSQL): each judge is asked in its own protocol, an instance's own rubric replaces
the run's criterion of that name, the system prompt the model saw is shown, a
reference-free run shows no reference, and a structured judge gets the protocol's schema."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from flask_eval.core.errors import Status
from flask_eval.core.types import Instance, InstanceRubric, JudgeConfig, Response, ResponseSet
from flask_eval.rubrics import codec
from flask_eval.rubrics.messages import text_of
from flask_eval.rubrics.skills import load_default
from flask_eval.storage import exports
from flask_eval.storage.store import Store
from flask_eval.workers.judge import GenerateConfig, JudgeOutput, Message
from flask_eval.workers.providers.memory_judge import MemoryJudge, default_answer
from flask_eval.workers.runner import Executor, ExecutorConfig
from tests.storage.test_store import open_ids

SKILLS = load_default()
OWN = InstanceRubric(
    "Does the plan fit in the budget?", {n: f"budget level {n}" for n in range(1, 6)}
)
SEEN: list[tuple[str, list[Message], GenerateConfig]] = []


@pytest.fixture(autouse=True)
def capture(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    async def generate(
        self: MemoryJudge, messages: Sequence[Message], config: GenerateConfig
    ) -> JudgeOutput:
        SEEN.append((self.spec.model, list(messages), config))
        text = "\n".join(text_of(m) for m in messages)
        if "###Feedback:" in text:
            answer = "Feedback: fits the budget well. [RESULT] 4"
        else:
            answer = default_answer(messages)
        return JudgeOutput(answer, 100, 20)

    SEEN.clear()
    monkeypatch.setattr(MemoryJudge, "generate", generate)
    yield
    SEEN.clear()


def make_run(store: Store, judges: list[JudgeConfig], reference: bool = True) -> int:
    skill = SKILLS.names[0]
    instances = [
        Instance(
            "1",
            "Plan a trip for $500.",
            "A plan within $500.",
            (skill,),
            system_prompt="You are a frugal travel agent.",
            rubrics={skill: OWN},
        ),
        Instance("2", "Name a prime.", "7", (SKILLS.names[1],)),
    ]
    sets = [
        ResponseSet("m", "m.jsonl", (Response("m", "1", "Go by train."), Response("m", "2", "11")))
    ]
    config: dict[str, Any] = {
        "judges": [j.to_data() for j in judges],
        "skills": codec.to_data(SKILLS),
        "mode": "instance",
        "reference": reference,
    }
    run, _ = store.create_run(
        name="r1",
        fingerprint="f" * 64,
        mode="instance",
        config=config,
        instances=instances,
        response_sets=sets,
        judges=[j.name for j in judges],
    )
    return run.id


def execute(store: Store, run_id: int) -> None:
    executor = Executor(store, ExecutorConfig(in_flight=4))

    async def go() -> None:
        try:
            await executor.run_batch(run_id, open_ids(store, run_id))
        finally:
            await executor.aclose()

    asyncio.run(go())


def prompt_of(judge: str, instruction: str) -> str:
    for model, messages, _ in SEEN:
        text = "\n".join(text_of(m) for m in messages)
        if model == judge and instruction in text:
            return text
    raise AssertionError(f"no prompt of {judge} about {instruction!r}")


def test_each_judge_in_its_protocol_with_the_instance_s_rubric_and_system_prompt(
    database_url: str,
) -> None:
    store = Store(database_url)
    judges = [
        JudgeConfig("memory/prom", "memory/prom", protocol="prometheus"),
        JudgeConfig("memory/ours", "memory/ours"),
    ]
    run_id = make_run(store, judges)
    execute(store, run_id)
    rows = list(exports.export_rows(store, run_id, "r1"))
    store.close()
    assert {r["status"] for r in rows} == {Status.DONE}
    assert {r["score"] for r in rows if r["judge"] == "memory/prom"} == {4}
    prom = prompt_of("prom", "Plan a trip")
    ours = prompt_of("ours", "Plan a trip")
    for text in (prom, ours):
        assert "Does the plan fit in the budget?" in text and "budget level 3" in text
        # the instance's rubric replaces the global one
        assert SKILLS.skills[0].criterion not in text
        assert "You are a frugal travel agent." in text
        assert "A plan within $500." in text  # reference-guided by default
    assert "###Feedback:" in prom and "[SCORES]" not in prom
    other = prompt_of("ours", "Name a prime")
    assert SKILLS.get(SKILLS.names[1]).criterion in other  # no rubric of its own: the run's


def test_a_reference_free_run_never_shows_the_reference(database_url: str) -> None:
    store = Store(database_url)
    judges = [
        JudgeConfig("memory/prom", "memory/prom", protocol="prometheus"),
        JudgeConfig("memory/ours", "memory/ours"),
    ]
    run_id = make_run(store, judges, reference=False)
    execute(store, run_id)
    store.close()
    assert len(SEEN) == 4
    for _, messages, _ in SEEN:
        text = "\n".join(text_of(m) for m in messages)
        assert "A plan within $500." not in text and "\n7\n" not in text


def test_a_structured_judge_is_sent_the_protocol_s_schema(database_url: str) -> None:
    store = Store(database_url)
    judges = [
        JudgeConfig("memory/json", "memory/json", structured=True),
        JudgeConfig("memory/text", "memory/text"),
    ]
    run_id = make_run(store, judges)
    execute(store, run_id)
    store.close()
    assert all(config.schema is None for model, _, config in SEEN if model == "text")
    asked = [config.schema for model, _, config in SEEN if model == "json"]
    assert len(asked) == 2 and all(schema is not None for schema in asked)
    required = {name for schema in asked if schema for name in schema["required"]}
    assert required == {SKILLS.names[0], SKILLS.names[1]}
