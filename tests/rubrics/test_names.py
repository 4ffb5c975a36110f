"""rubrics.names: criterion names that every reader and report can tell apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from flask_eval.core.errors import InputError
from flask_eval.rubrics.criteria import load_criteria
from flask_eval.rubrics.flask_review import _key as flask_key
from flask_eval.rubrics.names import name_key, name_problem

GOOD = ["Logical Robustness", "Café", "Ясность", "Σαφήνεια", "数学的正確さ", "Tone-of-voice", "A/B"]


@pytest.mark.parametrize("name", GOOD)
def test_ordinary_names_in_any_one_script_are_fine(name: str) -> None:
    assert name_problem(name) is None


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("Empathy\u200b", "U+200B"),  # zero-width space
        ("Em\u200dpathy", "U+200D"),  # zero-width joiner
        ("\u202eyhtapmE", "U+202E"),  # right-to-left override
        ("Empathy\u2066", "U+2066"),  # left-to-right isolate
        ("Em\u00adpathy", "U+00AD"),  # soft hyphen
        ("Tone\u00a0of voice", "U+00A0"),  # no-break space
        ("Empathy\ufe0f", "U+FE0F"),  # variation selector
        ("Empathy\u034f", "U+034F"),  # combining grapheme joiner
        ("Empathy\ue000", "U+E000"),  # private use
        ("\u0415mpathy", "Cyrillic and Latin"),
        ("Re\u0430dability", "Cyrillic and Latin"),
        ("Re\u03b1dability", "Greek and Latin"),
    ],
)
def test_invisible_and_look_alike_characters_are_refused(name: str, fragment: str) -> None:
    problem = name_problem(name)
    assert problem is not None and fragment in problem


def test_the_key_conflates_everything_any_reader_conflates() -> None:
    pairs = [
        ("Empathy", "empathy"),
        ("Tone of voice", "Tone_of_voice"),
        ("Tone  of voice", "tone of  VOICE"),
        ("\uff25mpathy", "Empathy"),  # fullwidth
        ("Straße", "STRASSE"),
    ]
    for a, b in pairs:
        assert name_key(a) == name_key(b), (a, b)
    # every reader's own folding is coarser than or equal to the key's
    for a, b in [("Tone_of voice", "tone of_voice"), ("READ  ability", "read_ability")]:
        assert flask_key(a) == flask_key(b) and name_key(a) == name_key(b)
    assert name_key("Empathy") != name_key("Empathy 2")


def _criteria(tmp_path: Path, names: list[str]) -> Path:
    body = "criteria:\n"
    for name in names:
        body += f'  - name: "{name}"\n    description: d\n'
        body += "    scores: {1: a, 2: b, 3: c, 4: d, 5: e}\n"
    path = tmp_path / "criteria.yaml"
    path.write_text(body, encoding="utf-8")
    return path


def test_the_criteria_loader_refuses_colliding_names_with_the_line(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        load_criteria(_criteria(tmp_path, ["Helpfulness", "Empathy", "EMPATHY"]))
    assert str(info.value).startswith(f"{tmp_path / 'criteria.yaml'}:8: ")
    assert "'EMPATHY' differs from 'Empathy' (line 5)" in str(info.value)
    assert len(load_criteria(_criteria(tmp_path, ["Empathy", "Empathy 2"]))) == 2
