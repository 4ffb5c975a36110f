"""The simulated judge says which turn of a conversation it grades, and grades it."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Sequence

import flask_eval.rubrics  # noqa: F401  (registers every protocol)
from flask_eval.core.conversations import Turn
from flask_eval.core.types import JudgeConfig
from flask_eval.producer.context import Conversation, RunContext
from flask_eval.rubrics import mtbench
from flask_eval.rubrics.grading import PROTOCOLS
from flask_eval.rubrics.messages import Message, plain, text_of
from flask_eval.rubrics.pairwise import PAIRWISE_PROTOCOLS, overall_criterion
from flask_eval.rubrics.skills import SkillSet
from flask_eval.simulator.answer import TURN_LINE, make_answer
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator

CONFIG = SimConfig(seed=5)
HISTORY = (Turn("Name a prime number.", "7"),)


def _prompt(messages: Sequence[Message]) -> str:
    return "\n\n".join(text_of(m) for m in messages)


def test_every_protocol_is_answered_with_its_turn() -> None:
    from flask_eval.rubrics.grading import Subject

    subject = Subject("And one more?", "11", "13", history=HISTORY, answers=("7",))
    pair = Subject(
        "And one more?",
        "11",
        "13",
        response_b="4",
        history=HISTORY,
        answers=("7",),
        answers_b=("9",),
    )
    for name, cls in PROTOCOLS.items():
        criterion = mtbench.overall_criterion() if name == "mt-bench" else overall_criterion()
        protocol = cls()
        answer = make_answer(_prompt(protocol.render(subject, [criterion])), "j", CONFIG)
        assert answer.startswith(f"{TURN_LINE} 2\n"), name
        assert protocol.read(answer, [criterion]).complete, name
    for name, cls in PAIRWISE_PROTOCOLS.items():
        protocol = cls()
        answer = make_answer(_prompt(protocol.render(pair, [overall_criterion()])), "j", CONFIG)
        assert answer.startswith(f"{TURN_LINE} 2\n"), name
        assert protocol.read(answer, [overall_criterion()]).complete, name


def test_one_shot_answers_name_no_turn() -> None:
    from flask_eval.rubrics.grading import Subject

    messages = PROTOCOLS["mt-bench"]().render(Subject("Q", "", "A"), [mtbench.overall_criterion()])
    assert TURN_LINE not in make_answer(_prompt(messages), "j", CONFIG)


def test_the_judged_turn_is_what_is_scored() -> None:
    """Turn 2's score follows turn 2's response, whatever turn 1's answer was."""
    from flask_eval.rubrics.grading import Subject

    protocol = PROTOCOLS["mt-bench"]()
    criterion = [mtbench.overall_criterion()]

    def score(first: str, second: str) -> int | None:
        subject = Subject("And one more?", "", second, history=HISTORY, answers=(first,))
        answer = make_answer(_prompt(protocol.render(subject, criterion)), "j", CONFIG)
        return protocol.read(answer, criterion).scores["overall"]

    seconds = [f"Another prime is {n}, since it has no divisor." for n in (11, 13, 17, 19, 23)]
    for second in seconds:
        assert score("7", second) == score("a very different first answer", second)


def _ask(base_url: str, messages: Sequence[Message]) -> str:
    body = json.dumps({"model": "sim-judge", "messages": plain(messages)}).encode()
    request = urllib.request.Request(
        f"{base_url}/chat/completions",
        data=body,
        headers={"Content-Type": "application/json", "Authorization": "Bearer x"},
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        return str(json.loads(answer.read())["choices"][0]["message"]["content"])


def test_two_turn_conversations_judged_in_single_and_pairwise_mt_bench() -> None:
    """Two two-turn conversations, two models, through the run's context and the
    simulator over HTTP: every turn is read, and turn 2's calls say so."""
    judges = {"j": JudgeConfig(name="j", spec="openai/sim-judge", protocol="mt-bench")}
    skills = SkillSet((mtbench.overall_criterion(),))
    single = RunContext(skills, judges)
    pairwise = RunContext(SkillSet((overall_criterion(),)), judges, pairwise=True)
    conversations = {
        "81": [("Write a haiku about rain.", ""), ("Now make it rhyme.", "")],
        "111": [("What is 3 * 4?", "12"), ("And 12 * 2?", "24")],
    }
    answers = {"x": ["Rain taps on the roof", "Rain again, in vain"], "y": ["12", "24"]}
    with running_simulator(CONFIG) as sim:
        seen: dict[tuple[str, int, str], int | None] = {}
        for conv, turns in conversations.items():
            for k, (user, reference) in enumerate(turns, start=1):
                history = tuple(Turn(u, r) for u, r in turns[: k - 1])
                for model, said in answers.items():
                    subject = single.subject(
                        user,
                        reference,
                        said[k - 1],
                        model=model,
                        conversation=Conversation(history, tuple(said[: k - 1])),
                    )
                    protocol = single.protocol_for("j")
                    criteria = [single.criterion("overall")]
                    answer = _ask(sim.openai_base_url, protocol.render(subject, criteria))
                    reading = protocol.read(answer, criteria)
                    assert reading.complete, answer
                    assert (f"{TURN_LINE} {k}" in reading.rationales["overall"]) == (k > 1)
                    seen[(conv, k, model)] = reading.scores["overall"]
                subject = pairwise.subject(
                    user,
                    reference,
                    answers["x"][k - 1],
                    response_b=answers["y"][k - 1],
                    model="x",
                    conversation=Conversation(
                        history, tuple(answers["x"][: k - 1]), tuple(answers["y"][: k - 1])
                    ),
                )
                protocol = pairwise.protocol_for("j")
                criteria = [pairwise.criterion("overall")]
                answer = _ask(sim.openai_base_url, protocol.render(subject, criteria))
                reading = protocol.read(answer, criteria)
                assert reading.complete and (f"{TURN_LINE} {k}" in answer) == (k > 1), answer
        assert sim.stats()["conversation_turns"] == 2 * 3  # turn 2: two singles, one pair
    assert all(score is not None and 1 <= score <= 10 for score in seen.values())


def test_an_mt_bench_rating_says_when_its_prompt_showed_a_reference() -> None:
    from flask_eval.rubrics.grading import Subject
    from flask_eval.simulator.answer import REFERENCE_NOTE

    protocol, overall = PROTOCOLS["mt-bench"](), [mtbench.overall_criterion()]
    cases = {
        Subject("Q", "the reference", "A"): True,
        Subject("Q", "", "A"): False,
        Subject("Next?", "11", "13", history=HISTORY, answers=("7",)): True,
        Subject("Next?", "", "13", history=(Turn("Name a prime.", ""),), answers=("7",)): False,
    }
    for subject, shown in cases.items():
        answer = make_answer(_prompt(protocol.render(subject, overall)), "j", CONFIG)
        assert (REFERENCE_NOTE in answer) == shown, subject
        assert protocol.read(answer, overall).complete


def test_batched_answers_to_conversation_turns_are_counted() -> None:
    """``/stats`` ``conversation_turns`` counts the turns graded in a batch as live ones."""
    import asyncio

    from flask_eval.rubrics.grading import Subject
    from flask_eval.workers.batching import BatchRequest, batch_api
    from flask_eval.workers.judge import GenerateConfig, create_judge
    from tests.workers.test_batch_lane import sim_post

    subject = Subject("And one more?", "11", "13", history=HISTORY, answers=("7",))
    one_shot = Subject("Name a prime number.", "7", "7")
    render = PROTOCOLS["mt-bench"]().render
    requests = [
        BatchRequest(uid, plain(render(s, [mtbench.overall_criterion()])), GenerateConfig())
        for uid, s in (("t2", subject), ("t1", one_shot))
    ]
    with running_simulator(CONFIG) as sim:
        sim_post(sim, "/batches/settings", {"delay_s": 0})

        async def judged() -> None:
            judge = create_judge(f"openai/sim-gpt@{sim.openai_base_url}")
            try:
                api = batch_api(judge)
                status = await api.submit_batch("tag-turns", requests)
                await api.poll_batch(status.batch_id)
                await api.batch_results(status.batch_id)
            finally:
                await judge.aclose()

        asyncio.run(judged())
        stats = sim.stats()
    assert stats["served"] == 2 and stats["conversation_turns"] == 1
