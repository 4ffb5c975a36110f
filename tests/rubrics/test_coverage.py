"""A protocol's scale and its criteria's rubrics: a mismatch is refused before a run starts,
in one line naming the judge, the scale and the criterion; a protocol that shows no
rubric levels declares so and takes any rubric."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path

import pytest

from flask_eval.core.errors import ConfigError, InputError
from flask_eval.core.types import Instance, InstanceRubric
from flask_eval.rubrics import discovery
from flask_eval.rubrics.coverage import check_rubrics, rubric_levels, rubric_problem
from flask_eval.rubrics.criteria import load_criteria
from flask_eval.rubrics.grading import (
    PROTOCOLS,
    RUBRIC_ANY,
    RUBRIC_RULES,
    Criterion,
    FlaskEvalProtocol,
    Subject,
    protocol,
)
from flask_eval.rubrics.messages import Message, message, text_of
from flask_eval.rubrics.pairwise import PAIRWISE_PROTOCOLS, overall_criterion, pairwise_protocol
from flask_eval.rubrics.scale import FIVE_POINT, Scale, levels_text
from flask_eval.rubrics.skills import SkillSet, load_default
from tests.bad_input_cases import BAD, GOOD_INSTANCES, JUDGE, REPO_ROOT

TEN = Scale(1, 10)
TEN_LEVELS = REPO_ROOT / BAD / "criteria_ten_levels.yaml"


class TenPoint(FlaskEvalProtocol):
    """Ours on a 1-10 scale: each level's description is shown, so rubrics must be 1-10."""

    name = "ten-point"
    scale = TEN


class SingleRating(FlaskEvalProtocol):
    """An MT-Bench-style single 1-10 rating: only what each criterion judges is shown."""

    name = "single-rating"
    scale = TEN
    rubric_rule = RUBRIC_ANY

    def render(self, subject: Subject, criteria: Sequence[Criterion]) -> list[Message]:
        asked = "; ".join(f"{c.name}: {c.criterion}" for c in criteria)
        return [message("user", f"Rate from {self.scale.text}. {asked}\n{subject.response}")]


def test_a_ten_point_protocol_refuses_five_level_rubrics_in_one_line() -> None:
    flask = rubric_levels(load_default())
    with pytest.raises(ConfigError) as info:
        check_rubrics("gpt", TenPoint(), flask)
    text = str(info.value)
    assert "\n" not in text and len(text) < 600
    assert text.startswith("judge gpt: criterion 'Logical Robustness': protocol ten-point ")
    assert "scores 1-10" in text and "describes levels 1-5" in text


def test_a_protocol_that_shows_no_levels_takes_any_rubric() -> None:
    check_rubrics("gpt", SingleRating(), rubric_levels(load_default()))
    check_rubrics("gpt", SingleRating(), rubric_levels(load_criteria(TEN_LEVELS)))
    shown = text_of(SingleRating().render(Subject("Q?", "", "A."), list(load_default())[:1])[0])
    assert "Score 1" not in shown and "1-5" not in shown and "Rate from 1-10." in shown


def test_a_criteria_file_declares_its_scale_and_a_matching_protocol_plans() -> None:
    criteria = load_criteria(TEN_LEVELS)
    assert [tuple(c.rubric) for c in criteria] == [TEN.levels]
    check_rubrics("gpt", TenPoint(), rubric_levels(criteria))
    with pytest.raises(ConfigError, match=r"scores 1-5 and shows .* levels 1-10"):
        check_rubrics("gpt", protocol(), rubric_levels(criteria))
    user = text_of(TenPoint().render(Subject("Q?", "", "A."), list(criteria))[-1])
    assert "- Score 10: All of it" in user and "1-5" not in user


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("scale: 1-10\ncriteria:\n  - {name: A, description: d, scores: {1: a, 2: b}}\n", "3"),
        ("scale: ten\ncriteria: []\n", "'scale' 'ten': a scale is written low-high"),
        ("scale: 5-1\ncriteria: []\n", "low < high"),
        ("scale: 1-1000\ncriteria: []\n", "at most 101 levels"),
        ("criteria:\n  - {name: A, description: d, scores: {1: a, 7: b}}\n", "not one of 1-5"),
    ],
)
def test_a_criteria_file_scale_is_checked(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as info:
        load_criteria(path)
    assert str(info.value).startswith(f"{path}:")


def test_levels_are_named_as_a_scale_or_one_by_one() -> None:
    assert levels_text(range(1, 11)) == "1-10" and levels_text([4, 1, 2]) == "1, 2, 4"
    assert rubric_problem(protocol(), [1, 2, 3, 4, 5]) is None
    assert "levels 1, 2, 4" in (rubric_problem(protocol(), [1, 2, 4]) or "")


def test_an_instance_rubric_is_checked_where_it_replaces_the_run_criterion() -> None:
    skills = load_default()
    own = InstanceRubric("Is it kind?", {n: f"level {n}" for n in TEN.levels})
    instances = [
        Instance("1", "Q", "A", ("Readability",)),
        Instance("2", "Q", "A", ("Readability", "kindness"), rubrics={"kindness": own}),
        Instance("3", "Q", "A", ("Readability",), rubrics={"Readability": own}),
    ]
    assert rubric_levels(skills, instances) == [
        ("Readability", (1, 2, 3, 4, 5)),
        ("kindness", TEN.levels),
        ("Readability", TEN.levels),
    ]
    with pytest.raises(ConfigError, match="criterion 'kindness'"):
        check_rubrics("j", protocol(), rubric_levels(skills, instances))


def test_every_shipped_protocol_plans_every_shipped_criteria_set() -> None:
    """FLASK's skills, BiGGen's and FLASK-Hard's instance rubrics (1-5, as their loaders
    read them) and the pairwise overall criterion: every combination that runs today."""
    biggen = InstanceRubric("criteria", {n: f"s{n}" for n in range(1, 6)})
    sets = [
        rubric_levels(load_default()),
        rubric_levels(
            load_default(), [Instance("b", "Q", "A", ("rubric",), rubrics={"rubric": biggen})]
        ),
        rubric_levels(SkillSet((overall_criterion(),))),
    ]
    for rule_of in (*(PROTOCOLS[n] for n in PROTOCOLS), *PAIRWISE_PROTOCOLS.values()):
        assert rule_of.rubric_rule in RUBRIC_RULES, rule_of
    assert {"flask-eval", "prometheus", "flask"} <= set(PROTOCOLS)
    for mode in ("instance", "skill"):
        for proto in [protocol(n, mode) for n in PROTOCOLS if PROTOCOLS[n].scale == FIVE_POINT]:
            for shown in sets:
                check_rubrics("j", proto, shown)
        for proto in [pairwise_protocol(n, mode) for n in PAIRWISE_PROTOCOLS]:
            check_rubrics("j", proto, rubric_levels(load_criteria(TEN_LEVELS)))


def test_a_protocol_module_is_found_without_being_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A protocol on another scale is one module in a protocols package: ``discover``
    imports it, and it registers itself."""
    package = tmp_path / "found_protocols"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "three.py").write_text(
        "from flask_eval.rubrics.grading import PROTOCOLS, FlaskEvalProtocol\n"
        "from flask_eval.rubrics.scale import Scale\n\n\n"
        "class Three(FlaskEvalProtocol):\n"
        "    name = 'three-found'\n"
        "    scale = Scale(1, 3)\n\n\n"
        "PROTOCOLS[Three.name] = Three\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    before = dict(PROTOCOLS)
    try:
        assert discovery.discover(importlib.import_module("found_protocols")) == [
            "found_protocols.three"
        ]
        assert protocol("three-found").scale == Scale(1, 3)
        with pytest.raises(ConfigError, match="protocol three-found scores 1-3"):
            check_rubrics("j", protocol("three-found"), rubric_levels(load_default()))
    finally:
        PROTOCOLS.clear()
        PROTOCOLS.update(before)


def test_eval_is_refused_before_it_generates_anything(tmp_path: Path) -> None:
    """`eval` checks its judges against its criteria first: a refused judge would
    otherwise be found only after every response was generated."""
    from flask_eval.app import evaluate, jobs

    source = jobs.InstanceSource(instances=str(REPO_ROOT / GOOD_INSTANCES))
    with pytest.raises(ConfigError, match=r"protocol flask-eval scores 1-5 .* levels 1-10"):
        evaluate.prepare_eval(
            source,
            workers=evaluate.EvalWorkers(models=["openai/m@http://127.0.0.1:9/v1"], judges=[JUDGE]),
            criteria=str(TEN_LEVELS),
            out_dir=str(tmp_path / "out"),
        )
    assert not (tmp_path / "out").exists()
