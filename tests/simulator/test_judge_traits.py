"""Calibration knobs of the simulator: per judge traits (bias, noise, length preference,
stochastic rounding) and per model, per skill levels of the models under test."""

from __future__ import annotations

import asyncio
import math
import statistics
from collections.abc import Sequence

import openai
import pytest

from flask_eval.rubrics.generation import GenerationProtocol, response_skillset
from flask_eval.rubrics.grading import Subject, protocol
from flask_eval.rubrics.messages import plain, text_of
from flask_eval.rubrics.prompt import Message
from flask_eval.rubrics.protocol import VERDICT_A, VERDICT_B
from flask_eval.rubrics.skills import load_default
from flask_eval.simulator import generate, pairwise
from flask_eval.simulator.__main__ import build_parser, config_from_args
from flask_eval.simulator.answer import make_answer
from flask_eval.simulator.config import (
    JudgeTraits,
    SimConfig,
    parse_judge_traits,
    parse_skill_levels,
)
from flask_eval.simulator.quality import judged_score, judged_value
from flask_eval.simulator.testing import config_to_argv, running_simulator
from flask_eval.workers.providers.openai_judge import tls_context

pytestmark = pytest.mark.filterwarnings(
    "ignore:Inheritance class AiohttpClientSession:DeprecationWarning"
)

N = 20_000
SKILLS = load_default()
CRITERIA = [SKILLS.get("Readability"), SKILLS.get("Logical Correctness")]
GEN = GenerationProtocol()
JUDGE = protocol("flask-eval")
INSTRUCTIONS = [f"Explain idea number {i} about topic {i % 17} to a student." for i in range(300)]


def prompt_of(messages: Sequence[Message]) -> str:
    return "\n".join(text_of(m) for m in messages)


def scores(level: float, traits: JudgeTraits, words: int = 100, tag: str = "") -> list[int]:
    return [judged_score(level, traits, words, ("0", "j", f"{tag}{i}", "c")) for i in range(N)]


def within(found: float, expected: float, values: Sequence[float], sds: float = 4) -> bool:
    """``found`` is within ``sds`` standard errors of ``expected``."""
    return abs(found - expected) <= sds * statistics.stdev(values) / math.sqrt(len(values))


def test_the_mean_score_is_the_level_plus_the_bias_fractions_included() -> None:
    for level, bias in ((2.5, 0.5), (3.0, -0.75), (2.3, 0.0)):
        found = scores(level, JudgeTraits(bias=bias, noise=0.3))
        assert within(statistics.mean(found), level + bias, found), (level, bias)
        assert set(found) <= {1, 2, 3, 4, 5}


def test_the_noise_has_the_standard_deviation_asked_for() -> None:
    parts = [("0", "j", str(i), "c") for i in range(N)]
    plain_values = [judged_value(3, JudgeTraits(), 100, p) for p in parts]
    noisy_values = [judged_value(3, JudgeTraits(noise=0.7), 100, p) for p in parts]
    noise = [a - b for a, b in zip(noisy_values, plain_values, strict=True)]
    assert abs(statistics.stdev(noise) - 0.7) < 0.02
    assert abs(statistics.mean(noise)) < 0.02
    # stochastic rounding keeps the mean: the scores' mean is the values' mean
    rounded = [judged_score(3, JudgeTraits(noise=0.7), 100, p) for p in parts]
    assert within(statistics.mean(rounded), statistics.mean(noisy_values), rounded)
    assert statistics.stdev(rounded) > statistics.stdev(scores(3, JudgeTraits()))


def test_each_doubling_of_length_adds_the_length_preference() -> None:
    traits = JudgeTraits(length_preference=0.4, noise=0.2)
    short, long = scores(2.5, traits, words=100), scores(2.5, traits, words=200, tag="x")
    gain = statistics.mean(long) - statistics.mean(short)
    assert within(gain, 0.4, long + short)
    indifferent = JudgeTraits(noise=0.2)
    flat = statistics.mean(scores(2.5, indifferent, 400)) - statistics.mean(
        scores(2.5, indifferent, 100, tag="x")
    )
    assert abs(flat) < 0.05


def test_without_traits_a_score_is_the_level_plus_the_nudge() -> None:
    # integer levels, no traits: no rounding draw, and every nudge of -1/0/+1 shows
    got = {judged_score(3, JudgeTraits(), 100, ("0", "j", str(i), "c")) for i in range(200)}
    assert got == {2, 3, 4}
    assert {judged_score(5, JudgeTraits(), 100, ("0", "j", str(i), "c")) for i in range(200)} == {
        4,
        5,
    }


def judge_prompt(response: str, instruction: str) -> str:
    subject = Subject(instruction, "An unrelated reference about zebras.", response)
    return prompt_of(JUDGE.render(subject, CRITERIA))


def generated(model: str, instruction: str, cfg: SimConfig) -> str:
    text = generate.answer(
        prompt_of(GEN.render(Subject(instruction, "", ""), list(response_skillset()))), model, cfg
    )
    assert text is not None
    return text


def judged(model: str, cfg: SimConfig, judge: str = "judge") -> dict[str, list[int]]:
    """The scores ``judge`` gives each criterion of ``model``'s responses."""
    out: dict[str, list[int]] = {c.name: [] for c in CRITERIA}
    for instruction in INSTRUCTIONS:
        prompt = judge_prompt(generated(model, instruction, cfg), instruction)
        reading = JUDGE.read(make_answer(prompt, judge, cfg), CRITERIA)
        assert not reading.problems
        for name, value in reading.scores.items():
            assert value is not None
            out[name].append(value)
    return out


def test_a_skill_level_moves_that_skill_of_that_model_only() -> None:
    base = SimConfig(seed=3, generators={"old": 3.5, "new": 3.5})
    planted = SimConfig(
        seed=3,
        generators={"old": 3.5, "new": 3.5},
        skill_levels={"new": {"Logical Correctness": 2.7}},
    )
    # the other model's responses are untouched, so are its scores
    assert [generated("old", i, base) for i in INSTRUCTIONS[:20]] == [
        generated("old", i, planted) for i in INSTRUCTIONS[:20]
    ]
    text = generated("new", INSTRUCTIONS[0], planted)
    levels = generate.skill_levels_of(text)
    assert set(levels) == {"Logical Correctness"}
    assert generate.level_of(text) == generate.level_of(generated("new", INSTRUCTIONS[0], base))
    before, after = judged("new", base), judged("new", planted)
    drop = statistics.mean(before["Logical Correctness"]) - statistics.mean(
        after["Logical Correctness"]
    )
    assert within(drop, 0.8, before["Logical Correctness"] + after["Logical Correctness"])
    other = statistics.mean(before["Readability"]) - statistics.mean(after["Readability"])
    assert within(other, 0.0, before["Readability"] + after["Readability"])
    # a fractional level is the expected score (the per-instance departures average out)
    mean_level = statistics.mean(
        generate.instance_skill_levels(f"q{i}", "new", planted)["Logical Correctness"]
        for i in range(4000)
    )
    assert abs(mean_level - 2.7) < 0.05


def test_without_traits_or_skill_levels_the_answers_are_unchanged() -> None:
    plain_cfg = SimConfig(seed=5, generators={"m": 3.2})
    neutral = SimConfig(
        seed=5,
        generators={"m": 3.2},
        judges={"*": JudgeTraits(), "other": JudgeTraits(bias=1)},
    )
    for instruction in INSTRUCTIONS[:30]:
        response = generated("m", instruction, plain_cfg)
        assert generated("m", instruction, neutral) == response
        assert generate.skill_levels_of(response) == {}
        prompt = judge_prompt(response, instruction)
        assert make_answer(prompt, "judge", plain_cfg) == make_answer(prompt, "judge", neutral)


def test_traits_apply_to_the_judge_named_else_to_every_judge() -> None:
    cfg = SimConfig(judges={"biased": JudgeTraits(bias=1), "*": JudgeTraits(bias=-1)})
    assert cfg.traits_of("biased").bias == 1
    assert cfg.traits_of("anyone").bias == -1
    assert SimConfig().traits_of("anyone").neutral


def test_a_length_preferring_judge_favours_the_longer_response() -> None:
    short = generate.signature(3) + " It is so." * 10
    long = generate.signature(3) + " It is so, and here is why." * 60
    criteria = tuple(f"criterion {i}" for i in range(200))
    pair = pairwise.PairParts("pairwise", short, long, None, criteria)
    prompt = "a comparison"
    liking = SimConfig(judges={"j": JudgeTraits(length_preference=1.0)})
    said = pairwise.verdicts(pair, prompt, "j", liking)
    assert sum(v == VERDICT_B for v in said.values()) > 0.9 * len(criteria)
    indifferent = pairwise.verdicts(pair, prompt, "j", SimConfig())
    assert sum(v == VERDICT_B for v in indifferent.values()) < 0.6 * len(criteria)
    swapped = pairwise.PairParts("pairwise", long, short, None, criteria)
    said = pairwise.verdicts(swapped, prompt, "j", liking)
    assert sum(v == VERDICT_A for v in said.values()) > 0.9 * len(criteria)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"judges": {"j": JudgeTraits(noise=0.5)}, "seed": 1}, None),
        ({"judges": {"": JudgeTraits()}}, "judge's name"),
        ({"judges": {"j": {"bias": 1}}}, "JudgeTraits"),
        ({"skill_levels": {"m": {"Readability": 3}}}, "not a model under test"),
        ({"generators": {"m": 3}, "skill_levels": {"m": {"Readability": 6}}}, r"in \[1, 5\]"),
        ({"generators": {"m": 3}, "skill_levels": {"m": {"a;b": 3}}}, "criterion"),
        ({"generators": {"m": 3}, "skill_levels": {"m": {"Readability": "3"}}}, "number"),
    ],
)
def test_the_knobs_are_validated(kwargs: dict[str, object], message: str | None) -> None:
    if message is None:
        SimConfig(**kwargs)  # type: ignore[arg-type]
        return
    with pytest.raises(ValueError, match=message):
        SimConfig(**kwargs)  # type: ignore[arg-type]


def test_traits_are_validated() -> None:
    with pytest.raises(ValueError, match="noise must be >= 0"):
        JudgeTraits(noise=-0.1)
    with pytest.raises(ValueError, match="bias"):
        JudgeTraits(bias=math.nan)
    with pytest.raises(ValueError, match="length_preference"):
        JudgeTraits(length_preference=9)


def test_the_knobs_on_the_command_line() -> None:
    assert parse_judge_traits(["sim-biased:bias=0.5,noise=0.7,length=0.3", "*:noise=0.2"]) == {
        "sim-biased": JudgeTraits(0.5, 0.7, 0.3),
        "*": JudgeTraits(noise=0.2),
    }
    assert parse_judge_traits(["ollama/llama3:8b:bias=1"]) == {
        "ollama/llama3:8b": JudgeTraits(bias=1)
    }
    assert parse_skill_levels(["m:Logical Correctness=3.3", "m:Readability=4"]) == {
        "m": {"Logical Correctness": 3.3, "Readability": 4.0}
    }
    for bad in ("nocolon", "j:bias", "j:speed=1", "j:bias=x", "j:bias=1,bias=2", "j:noise=-1"):
        with pytest.raises(ValueError):
            parse_judge_traits([bad])
    for bad in ("m=3", "m:=3", "m:c=high"):
        with pytest.raises(ValueError):
            parse_skill_levels([bad])
    with pytest.raises(ValueError, match="twice"):
        parse_skill_levels(["m:c=3", "m:c=4"])
    cfg = SimConfig(
        generators={"m": 3.0},
        skill_levels={"m": {"Logical Correctness": 2.5}},
        judges={"sim-biased": JudgeTraits(bias=0.5, noise=0.7, length_preference=0.3)},
    )
    parsed = config_from_args(build_parser().parse_args(config_to_argv(cfg)))
    assert dict(parsed.judges) == dict(cfg.judges)
    assert {m: dict(v) for m, v in parsed.skill_levels.items()} == {
        "m": {"Logical Correctness": 2.5}
    }
    with pytest.raises(ValueError, match="NAME:bias"):
        config_from_args(build_parser().parse_args(["--judge-traits", "x"]))


def test_a_biased_judge_answers_higher_over_the_openai_wire() -> None:
    cfg = SimConfig(seed=2, judges={"sim-biased": JudgeTraits(bias=1.0)})
    prompts = [
        plain(JUDGE.render(Subject(f"Question {i}?", "", f"Answer {i} here."), CRITERIA))
        for i in range(20)
    ]

    async def go(model: str) -> list[float]:
        async with openai.AsyncOpenAI(
            base_url=sim.openai_base_url,
            api_key="sk-test",
            max_retries=0,
            http_client=openai.DefaultAsyncHttpxClient(verify=tls_context()),
        ) as client:
            means = []
            for messages in prompts:
                answer = await client.chat.completions.create(model=model, messages=messages)  # type: ignore[arg-type]
                reading = JUDGE.read(answer.choices[0].message.content or "", CRITERIA)
                assert not reading.problems
                means.append(statistics.mean(v for v in reading.scores.values() if v))
            return means

    with running_simulator(cfg) as sim:
        biased, fair = asyncio.run(go("sim-biased")), asyncio.run(go("sim-plain"))
    assert statistics.mean(biased) > statistics.mean(fair) + 0.3
