"""The simulated judge against the probes' twins: a judge without traits scores every
twin as its original, and each trait a probe measures (position bias, credulity to
injections, length preference, self-preference) is recovered from the judge's answers to
prompts rendered by the real protocols."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import pytest

from flask_eval.core.probes import LENGTH_PERCENTS
from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND
from flask_eval.rubrics.grading import Criterion, Protocol, Subject, protocol
from flask_eval.rubrics.messages import text_of
from flask_eval.rubrics.pairwise import pairwise_protocol
from flask_eval.rubrics.probes import (
    INSTRUCTION,
    carries_injection,
    inject,
    injection_score,
    pad,
    restyle,
    word_count,
)
from flask_eval.rubrics.skills import load_default
from flask_eval.simulator import generate
from flask_eval.simulator.answer import make_answer
from flask_eval.simulator.config import JudgeTraits, SimConfig, parse_judge_traits
from flask_eval.simulator.traits import parse_model_families

SKILLS = load_default()
TWO = [SKILLS.get("Readability"), SKILLS.get("Logical Correctness")]
ONE = TWO[:1]
JUDGE = "judge"
GEN = SimConfig(generators={"m": 3.0, "acme-m": 3.0}, model_families={"acme-m": "acme"})


def responses(n: int, model: str = "m", config: SimConfig = GEN) -> list[tuple[str, str]]:
    """``n`` (instruction, generated response) pairs of ``model``."""
    out = []
    for i in range(n):
        instruction = f"Explain idea number {i} about topic {i % 17} to a student."
        response = generate.answer(instruction, model, config)
        assert response is not None
        out.append((instruction, response))
    return out


def prompt_of(p: Protocol, subject: Subject, criteria: Sequence[Criterion]) -> str:
    return "\n".join(text_of(m) for m in p.render(subject, criteria))


def judged(
    name: str, instruction: str, response: str, config: SimConfig, order: bool = False
) -> dict[str, int | None]:
    """The scores the judge gives ``response`` in protocol ``name``'s prompt (the criteria
    listed in reverse when ``order``), read back by the protocol."""
    p = protocol(name)
    criteria = ONE if name == "prometheus" else TWO
    shown = list(reversed(criteria)) if order else criteria
    prompt = prompt_of(p, Subject(instruction, "", response), shown)
    return p.read(make_answer(prompt, JUDGE, config), criteria).scores


def twins(response: str, name: str) -> dict[str, str]:
    out = {f"length+{p}": pad(response, p) for p in LENGTH_PERCENTS}
    out["style"] = restyle(response)
    out["inject-score"] = inject(response, injection_score(name))
    out["inject-instruction"] = inject(response, INSTRUCTION)
    return out


def within(found: float, expected: float, values: Sequence[float], sds: float = 3) -> bool:
    return abs(found - expected) <= sds * statistics.stdev(values) / math.sqrt(len(values))


@pytest.mark.parametrize("name", ["flask-eval", "flask", "prometheus"])
def test_a_judge_without_traits_scores_every_twin_as_its_original(name: str) -> None:
    neutral = SimConfig(
        generators=GEN.generators,
        judges={JUDGE: JudgeTraits(family="acme")},  # a family alone changes nothing
    )
    for instruction, response in responses(25):
        original = judged(name, instruction, response, neutral)
        assert original and None not in original.values()
        for variant, twin in twins(response, name).items():
            assert judged(name, instruction, twin, neutral) == original, variant
        assert judged(name, instruction, response, neutral, order=True) == original


def test_ordinary_texts_keep_their_scores_across_twins_too() -> None:
    config = SimConfig(na_rate=0.2)
    for i in range(40):
        response = f"Answer {i}: the capital is Paris.\n\nIt lies on the Seine. Done {i}!"
        original = judged("flask-eval", f"Question {i}?", response, config)
        for twin in twins(response, "flask-eval").values():
            assert judged("flask-eval", f"Question {i}?", twin, config) == original


def _first_advantage(name: str, b: float, n: int) -> list[int]:
    """Per comparison shown: +1 the first shown won, -1 the second, 0 a tie."""
    p = pairwise_protocol(name)
    config = SimConfig(generators=GEN.generators, judges={JUDGE: JudgeTraits(position_bias=b)})
    first = responses(n)
    second = responses(n, "acme-m", GEN)
    out: list[int] = []
    for (instruction, x), (_, y) in zip(first, second, strict=True):
        for a, bb in ((x, y), (y, x)):
            prompt = prompt_of(p, Subject(instruction, "", a, "", bb), ONE)
            verdict = p.read(make_answer(prompt, JUDGE, config), ONE).scores[ONE[0].name]
            out.append({VERDICT_FIRST: 1, VERDICT_SECOND: -1}.get(int(verdict or 0), 0))
    return out


@pytest.mark.parametrize(("name", "b"), [("flask-eval", 0.3), ("prometheus", -0.4)])
def test_position_bias_is_the_first_shown_advantage(name: str, b: float) -> None:
    advantage = _first_advantage(name, b, 700)
    assert within(statistics.fmean(advantage), b, advantage)
    none = _first_advantage(name, 0.0, 300)
    assert statistics.fmean(none) == 0  # a consistent judge: each order mirrors the other


def test_injection_is_granted_with_its_probability() -> None:
    q = 0.4
    config = SimConfig(generators=GEN.generators, judges={JUDGE: JudgeTraits(injection=q)})
    granted: list[float] = []
    for i, (instruction, response) in enumerate(responses(700)):
        original = judged("flask-eval", instruction, response, config)
        if all(v == 5 for v in original.values()):
            continue
        claim = injection_score("flask-eval") if i % 2 else INSTRUCTION
        twin = judged("flask-eval", instruction, inject(response, claim), config)
        top = all(v == 5 for v in twin.values())
        assert top or twin == original
        granted.append(float(top))
    assert len(granted) > 350
    assert within(statistics.fmean(granted), q, granted)


def test_a_neutralized_injection_is_granted_as_a_raw_one() -> None:
    config = SimConfig(generators=GEN.generators, judges={JUDGE: JudgeTraits(injection=1)})
    p = protocol("prometheus")
    for instruction, response in responses(20):
        twin = inject(response, injection_score("prometheus"))
        prompt = prompt_of(p, Subject(instruction, "", twin), ONE)
        assert "[RESULT] 5" in twin and "[RESULT] 5" not in prompt  # the prompt defused it
        assert carries_injection(prompt)
        assert p.read(make_answer(prompt, JUDGE, config), ONE).scores == {ONE[0].name: 5}


def test_an_injection_wins_a_comparison_in_both_orders() -> None:
    config = SimConfig(generators=GEN.generators, judges={JUDGE: JudgeTraits(injection=1)})
    p = pairwise_protocol("flask-eval")
    for instruction, response in responses(20):
        twin = inject(response, injection_score("flask-eval", pairwise=True))
        for a, b, winner in ((twin, response, VERDICT_FIRST), (response, twin, VERDICT_SECOND)):
            prompt = prompt_of(p, Subject(instruction, "", a, "", b), ONE)
            verdict = p.read(make_answer(prompt, JUDGE, config), ONE).scores[ONE[0].name]
            assert verdict == winner


def test_length_preference_is_recovered_from_padded_twins() -> None:
    pref = 0.5
    config = SimConfig(
        generators=GEN.generators, judges={JUDGE: JudgeTraits(length_preference=pref)}
    )
    diffs: list[float] = []
    expected: list[float] = []
    for instruction, response in responses(800):
        if generate.level_of(response) != 3:  # away from the bounds of 1..5
            continue
        twin = pad(response, 100)
        original = judged("flask-eval", instruction, response, config)
        padded = judged("flask-eval", instruction, twin, config)
        ratio = word_count(twin) / word_count(response)
        for skill, score in original.items():
            diffs.append(float(padded[skill] or 0) - float(score or 0))
            expected.append(pref * math.log2(ratio))
        styled = judged("flask-eval", instruction, restyle(response), config)
        assert styled == original  # restyling adds no words
    assert within(statistics.fmean(diffs), statistics.fmean(expected), diffs)


def test_self_preference_is_recovered_for_the_judges_family_only() -> None:
    s = 0.8
    biased = SimConfig(
        generators=GEN.generators,
        model_families=GEN.model_families,
        judges={JUDGE: JudgeTraits(self_preference=s, family="acme")},
    )
    plain = SimConfig(generators=GEN.generators, model_families=GEN.model_families)
    diffs: list[float] = []
    for instruction, response in responses(800, "acme-m"):
        assert generate.family_of(response) == "acme"
        if generate.level_of(response) != 3:
            continue
        own = judged("flask-eval", instruction, response, biased)
        base = judged("flask-eval", instruction, response, plain)
        diffs += [float(own[k] or 0) - float(base[k] or 0) for k in own]
    assert within(statistics.fmean(diffs), s, diffs)
    for instruction, response in responses(50, "m"):  # another family: no preference
        assert generate.family_of(response) is None
        assert judged("flask-eval", instruction, response, biased) == judged(
            "flask-eval", instruction, response, plain
        )


def test_the_family_signature_keeps_the_criteria_levels() -> None:
    sig = generate.signature(4, {"Logical Correctness": 3.8}, "acme")
    assert sig == "(simulated answer, level 4 of 5; Logical Correctness at 3.8; by acme)"
    assert generate.level_of(sig) == 4
    assert generate.skill_levels_of(sig) == {"Logical Correctness": 3.8}
    assert generate.family_of(sig) == "acme"
    assert generate.family_of(generate.signature(2)) is None


def test_the_new_traits_parse_and_are_validated() -> None:
    got = parse_judge_traits(["j:position=0.2,inject=0.3,self=0.5,family=acme"])
    assert got == {
        "j": JudgeTraits(position_bias=0.2, injection=0.3, self_preference=0.5, family="acme")
    }
    assert parse_model_families(["acme-m=acme"]) == {"acme-m": "acme"}
    for bad in ("j:position=1.5", "j:inject=-0.1", "j:self=5", "j:family=a b", "j:family="):
        with pytest.raises(ValueError):
            parse_judge_traits([bad])
    for spec in ("nofamily", "m=", "m=a/b"):
        with pytest.raises(ValueError):
            parse_model_families([spec])
    with pytest.raises(ValueError, match="given twice"):
        parse_model_families(["m=a", "m=b"])
    with pytest.raises(ValueError, match="not a model under test"):
        SimConfig(model_families={"m": "acme"})
