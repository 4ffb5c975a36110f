"""simulator.generate: simulated models under test answer deterministically, at a quality
the simulated judges read back, and are cut off by their token limit like any answer."""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Sequence
from typing import Any

import openai
import pytest

from flask_eval.rubrics.generation import GenerationProtocol, response_skillset
from flask_eval.rubrics.grading import Subject, protocol
from flask_eval.rubrics.messages import plain, text_of
from flask_eval.rubrics.prompt import Message
from flask_eval.rubrics.skills import load_default
from flask_eval.simulator import generate
from flask_eval.simulator.__main__ import build_parser, config_from_args
from flask_eval.simulator.answer import estimate_tokens, make_answer, quality
from flask_eval.simulator.config import SimConfig, parse_generators
from flask_eval.simulator.reply import reply
from flask_eval.simulator.testing import config_to_argv, running_simulator
from flask_eval.simulator.wire import ParsedRequest
from flask_eval.workers.providers.openai_judge import tls_context

pytestmark = pytest.mark.filterwarnings(
    "ignore:Inheritance class AiohttpClientSession:DeprecationWarning"
)

LEVELS = {"weak": 2.0, "middling": 3.0, "strong": 4.5}
CONFIG = SimConfig(seed=7, generators=LEVELS)
SKILLS = load_default()
CRITERIA = [SKILLS.get("Readability"), SKILLS.get("Factuality"), SKILLS.get("Completeness")]
TOPICS = [
    "photosynthesis",
    "recursion",
    "inflation",
    "volcanoes",
    "encryption",
    "vaccines",
    "tides",
    "compilers",
    "democracy",
    "glaciers",
]
TASKS = [
    "Explain {t} to a child.",
    "List three facts about {t}.",
    "Write a short essay on {t} and its history.",
    "Compare {t} with a related idea.",
    "What are common misconceptions about {t}?",
]
INSTRUCTIONS = [task.format(t=t) for t in TOPICS for task in TASKS]  # 50
GEN = GenerationProtocol()


def prompt_of(messages: Sequence[Message]) -> str:
    """What the simulator sees: the messages' contents joined by newlines."""
    return "\n".join(text_of(m) for m in messages)


def generated(model: str, instruction: str, system: str = "", cfg: SimConfig = CONFIG) -> str:
    """``model``'s response to ``instruction``, asked as a generation run asks it."""
    messages = GEN.render(Subject(instruction, "", "", system), list(response_skillset()))
    text = make_answer(prompt_of(messages), model, cfg)
    assert generate.answer(prompt_of(messages), model, cfg) == text
    return text


def test_a_generation_is_a_function_of_seed_model_and_prompt() -> None:
    once = [generated("middling", i) for i in INSTRUCTIONS[:10]]
    assert once == [generated("middling", i) for i in INSTRUCTIONS[:10]]
    assert len(set(once)) == 10  # each instance its own answer
    other_seed = SimConfig(seed=8, generators=LEVELS)
    assert once != [generated("middling", i, cfg=other_seed) for i in INSTRUCTIONS[:10]]
    same_level = SimConfig(seed=7, generators={"middling": 3.0, "twin": 3.0})
    assert once != [generated("twin", i, cfg=same_level) for i in INSTRUCTIONS[:10]]


def test_a_model_not_under_test_is_left_to_the_judge() -> None:
    prompt = prompt_of(protocol("flask-eval").render(Subject("Q?", "", "A."), CRITERIA))
    assert generate.answer(prompt, "judge", CONFIG) is None
    assert generate.instance_level(prompt, "judge", CONFIG) is None
    assert make_answer(prompt, "judge", CONFIG) == make_answer(prompt, "judge", SimConfig(seed=7))
    assert generate.answer(prompt, "weak", SimConfig()) is None  # no generators configured


def test_a_generation_addresses_the_instruction_at_about_the_configured_length() -> None:
    for tokens in (40, 120, 600):
        cfg = SimConfig(generators={"m": 3.0}, generation_tokens=tokens)
        for topic in TOPICS[:3]:
            for task in TASKS:
                text = generated("m", task.format(t=topic), "You are a helpful assistant.", cfg)
                assert topic in text  # it reuses the instruction's words
                assert estimate_tokens(text) >= 0.8 * tokens - 1, tokens
                assert estimate_tokens(text) <= 1.2 * tokens + 25, tokens


def level(model: str, instruction: str) -> int:
    """The level ``model``'s response to ``instruction`` signs."""
    found = generate.level_of(generated(model, instruction))
    assert found is not None
    return found


def test_levels_vary_per_instance_around_the_configured_one() -> None:
    levels = {model: [level(model, i) for i in INSTRUCTIONS] for model in LEVELS}
    for model, found in levels.items():
        assert all(n in range(1, 6) for n in found)
        assert len(set(found)) >= 2, model  # jittered, not a constant
        assert abs(statistics.mean(found) - LEVELS[model]) < 0.6, (model, found)
    # close models swap places on some instances
    assert any(w >= m for w, m in zip(levels["weak"], levels["middling"], strict=True))


def test_the_signature_is_read_back_and_nothing_else_carries_one() -> None:
    assert [generate.level_of(generate.signature(n) + " text") for n in range(1, 6)] == [
        1,
        2,
        3,
        4,
        5,
    ]
    unsigned = [
        "",
        "A plain answer.",
        "text (simulated answer, level 4 of 5)",
        "(simulated answer, level 6 of 5)",
        "(simulated answer, level 4 of 6)",
    ]
    for text in unsigned:
        assert generate.level_of(text) is None, text
    with pytest.raises(ValueError):
        generate.signature(0)


@pytest.mark.parametrize("name", ["flask-eval", "prometheus", "flask"])
def test_the_simulated_judge_ranks_the_models_as_configured(name: str) -> None:
    """A generation run then a judgment run, both against the simulator: the judge reads
    each response's level, so the mean score ranks the models as configured, however
    little of the reference a response covers."""
    judge = protocol(name)
    call = CRITERIA[:1] if name == "prometheus" else CRITERIA
    means = {}
    for model in LEVELS:
        scores: list[int] = []
        for instruction in INSTRUCTIONS:
            response = generated(model, instruction)
            subject = Subject(instruction, "An unrelated reference about zebras.", response)
            prompt = prompt_of(judge.render(subject, call))
            assert quality(prompt, CONFIG) == generate.level_of(response)
            reading = judge.read(make_answer(prompt, "judge", CONFIG), call)
            assert not reading.problems
            scores += [s for s in reading.scores.values() if s is not None]
        means[model] = statistics.mean(scores)
    assert means["weak"] < means["middling"] < means["strong"], means


def test_generators_on_the_command_line() -> None:
    argv = [
        "--generator",
        "gpt-x=4.5",
        "--generator",
        "org/model=v1=2",
        "--generation-tokens",
        "50",
    ]
    cfg = config_from_args(build_parser().parse_args(argv))
    assert dict(cfg.generators) == {"gpt-x": 4.5, "org/model=v1": 2.0}
    assert cfg.generation_tokens == 50
    again = config_from_args(build_parser().parse_args(config_to_argv(cfg)))
    assert again == cfg
    for bad in (["nolevel"], ["=3"], ["m=high"], ["m=1", "m=2"]):
        with pytest.raises(ValueError):
            parse_generators(bad)
    for generators in ({"m": 0.5}, {"m": 5.5}, {"m": float("nan")}, {"": 3.0}):
        with pytest.raises(ValueError):
            SimConfig(generators=generators)
    with pytest.raises(ValueError, match="generation_tokens"):
        SimConfig(generation_tokens=0)


@pytest.mark.parametrize(
    ("dialect", "reason"),
    [("openai", "length"), ("anthropic", "max_tokens"), ("gemini", "MAX_TOKENS")],
)
def test_a_long_generation_is_cut_off_by_its_token_limit(dialect: str, reason: str) -> None:
    cfg = SimConfig(generators={"m": 4.0}, generation_tokens=300)
    prompt = "Write a long story about the sea."
    whole = generate.answer(prompt, "m", cfg)
    assert whole is not None
    served = reply(dialect, ParsedRequest("m", prompt, 30), cfg, 10).body  # type: ignore[arg-type]
    if dialect == "openai":
        found, text = (
            served["choices"][0]["finish_reason"],
            served["choices"][0]["message"]["content"],
        )
    elif dialect == "anthropic":
        found, text = served["stop_reason"], served["content"][0]["text"]
    else:
        candidate = served["candidates"][0]
        found, text = candidate["finishReason"], candidate["content"]["parts"][0]["text"]
    assert found == reason
    assert whole.startswith(text) and len(text) < len(whole)
    assert generate.level_of(text) == generate.level_of(whole)  # the cut keeps the level


def test_a_model_under_test_through_the_openai_sdk() -> None:
    cfg = SimConfig(seed=1, generators={"model-under-test": 3.5}, generation_tokens=200)
    subject = Subject("Describe the water cycle.", "", "", "You are a helpful assistant.")
    messages: Any = plain(GEN.render(subject, list(response_skillset())))  # the SDK's type

    async def go() -> list[openai.types.chat.ChatCompletion]:
        async with openai.AsyncOpenAI(
            base_url=sim.openai_base_url,
            api_key="sk-test",
            max_retries=0,
            http_client=openai.DefaultAsyncHttpxClient(verify=tls_context()),
        ) as client:
            return [
                await client.chat.completions.create(
                    model="model-under-test",
                    messages=messages,
                    max_tokens=limit,
                )
                for limit in (1000, 25)
            ]

    with running_simulator(cfg) as sim:
        whole, cut = asyncio.run(go())
    expected = generate.answer(
        prompt_of(GEN.render(subject, list(response_skillset()))), "model-under-test", cfg
    )
    assert whole.choices[0].finish_reason == "stop"
    assert whole.choices[0].message.content == expected
    assert cut.choices[0].finish_reason == "length"
    assert cut.usage is not None and cut.usage.completion_tokens == 25
    text = cut.choices[0].message.content
    assert text and expected and expected.startswith(text) and len(text) < len(expected)
    reading = GEN.read(text, list(response_skillset()))  # a cut-off response is still read
    assert reading.values == {"response": text}
