"""Tests of rubrics.criteria (custom criteria files) and their per-instance selection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flask_eval.core.errors import InputError
from flask_eval.producer.loaders import load_instances
from flask_eval.rubrics.criteria import DEFAULT_GROUP, load_criteria

GOOD = """\
group: Support
criteria:
  - name: Empathy
    description: >-
      Does the response acknowledge
      the user's situation?
    scores:
      1: Ignores it.
      2: Mentions it.
      3: Acknowledges it.
      4: Adapts to it.
      5: Adapts the whole answer to it.
  - name: Accuracy
    description: Are the facts right?
    allow_na: true
    group: Content
    scores: {1: Wrong, 2: Mostly wrong, 3: Mixed, 4: Mostly right, 5: Right}
"""

SCORES = "    scores: {1: a, 2: b, 3: c, 4: d, 5: e}\n"


def _file(tmp_path: Path, text: str, name: str = "criteria.yaml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_criteria_file(tmp_path: Path) -> None:
    skills = load_criteria(_file(tmp_path, GOOD))
    assert skills.names == ("Empathy", "Accuracy")
    empathy, accuracy = skills.skills
    assert (empathy.ability, empathy.allow_na) == ("Support", False)
    assert (accuracy.ability, accuracy.allow_na) == ("Content", True)
    assert empathy.criterion == "Does the response acknowledge the user's situation?"
    assert dict(empathy.rubric) == {
        1: "Ignores it.",
        2: "Mentions it.",
        3: "Acknowledges it.",
        4: "Adapts to it.",
        5: "Adapts the whole answer to it.",
    }
    assert skills.abilities == {"Support": ("Empathy",), "Content": ("Accuracy",)}


def test_a_bare_list_takes_the_default_group(tmp_path: Path) -> None:
    text = f"- name: Tone\n  description: Polite?\n{SCORES.replace('    ', '  ')}"
    skills = load_criteria(_file(tmp_path, text))
    assert [(s.name, s.ability, s.allow_na) for s in skills] == [("Tone", DEFAULT_GROUP, False)]


def _criterion(body: str) -> str:
    return f"criteria:\n  - name: Tone\n    description: Polite?\n{body}"


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("a: &x [1]\nb: *x\n", 1, "anchors (&name) are not allowed"),
        ("criteria:\n  - !!python/object x\n", 2, "explicit tags"),
        ("criteria: []\ncriteria: []\n", 2, "duplicate key 'criteria' (first on line 1)"),
        ("criteria: []\n", 1, "expected a non-empty 'criteria' list"),
        ("criteria: 3\n", 1, "expected a non-empty 'criteria' list"),
        ("gruop: x\ncriteria: []\n", 1, "unknown top-level keys: 'gruop'"),
        ("group: ''\ncriteria: []\n", 1, "'group' must be a non-empty string"),
        ("criteria:\n  - just text\n", 2, "criterion #1 is not a mapping"),
        (_criterion(SCORES + "    weight: 2\n"), 2, "criterion 'Tone': unknown keys: 'weight'"),
        (_criterion(""), 2, "criterion 'Tone': missing 'scores'"),
        (_criterion("    scores: [a, b]\n"), 4, "'scores' must be a mapping of scores 1-5"),
        (_criterion("    scores: {1: a, 2: b, 3: c, 4: d}\n"), 4, "'scores' is missing 5"),
        (_criterion("    scores:\n      1: a\n      6: f\n"), 6, "score 6 is not one of 1-5"),
        (_criterion("    scores:\n      1: a\n      '1': b\n"), 6, "score 1 is given twice"),
        (_criterion("    scores:\n      1: a\n      2: [b]\n"), 6, "text of score 2 must be"),
        (_criterion("    scores:\n      1: a\n      2: ''\n"), 6, "text of score 2 must be"),
        (_criterion(SCORES + "    allow_na: yes please\n"), 5, "'allow_na' must be true or false"),
        (_criterion(SCORES + "    group: ''\n"), 5, "criterion 'Tone': 'group' must be"),
        (
            "criteria:\n  - name: Tone\n    description: ''\n" + SCORES,
            3,
            "'description' must be a non-empty string",
        ),
        (
            f"criteria:\n  - name: '{'x' * 101}'\n    description: d\n" + SCORES,
            2,
            "'name' is longer than 100 characters",
        ),
        (
            'criteria:\n  - name: "a\\tb"\n    description: d\n' + SCORES,
            2,
            "control character",
        ),
        (
            'criteria:\n  - name: "a\\0"\n    description: d\n' + SCORES,
            2,
            "NUL character",
        ),
        (
            _criterion(SCORES) + "  - name: Tone\n    description: again\n" + SCORES,
            5,
            "duplicate criterion name 'Tone' (first on line 2)",
        ),
    ],
)
def test_bad_criteria_files_name_file_and_line(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    path = _file(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_criteria(path)
    shown = str(info.value)
    assert shown.startswith(f"{path}:{line}: "), shown
    assert message in shown, shown
    assert "\n" not in shown


def test_a_billion_laughs_file_is_refused_quickly(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    with pytest.raises(InputError) as info:
        load_criteria(_file(tmp_path, "\n".join(lines) + "\n"))
    assert "aliases" in str(info.value) or "anchors" in str(info.value)


def test_the_size_limit_and_missing_files(tmp_path: Path) -> None:
    big = _file(tmp_path, "# " + "x" * (1 << 20) + "\n", "big.yaml")
    with pytest.raises(InputError, match="file is larger than 1 MiB"):
        load_criteria(big)
    with pytest.raises(InputError, match="file not found"):
        load_criteria(tmp_path / "absent.yaml")


# --------------------------------------------------------------------------- selection


def _instances(tmp_path: Path, records: list[dict[str, object]]) -> str:
    path = tmp_path / "instances.jsonl"
    base = {"instruction": "Hi", "answer": "", "domain": [], "difficulty": -1}
    path.write_text("".join(json.dumps({**base, **r}) + "\n" for r in records), encoding="utf-8")
    return str(path)


def test_instances_choose_criteria_by_field_or_take_all(tmp_path: Path) -> None:
    skills = load_criteria(_file(tmp_path, GOOD))
    path = _instances(
        tmp_path,
        [
            {"idx": 1, "criteria": ["Accuracy"], "skill": ["Readability"]},
            {"idx": 2, "skill": ["Readability"]},  # FLASK skills are ignored here
            {"idx": 3, "criteria": ["Accuracy", "Empathy"]},
        ],
    )
    loaded = load_instances(path, skills.names, custom_criteria=True)
    assert [i.skills for i in loaded] == [
        ("Accuracy",),
        ("Empathy", "Accuracy"),
        ("Accuracy", "Empathy"),
    ]


@pytest.mark.parametrize(
    ("criteria", "message"),
    [
        (["Empathy", "Kindness"], "unknown criterion 'Kindness'; valid criteria: Empathy"),
        (["empathy"], "(did you mean 'Empathy'?)"),
        (["Empathy", "Empathy"], "criterion 'Empathy' is listed twice in field 'criteria'"),
        ([], "field 'criteria' is empty"),
        ("Empathy", "field 'criteria' must be a list of criterion names, got string"),
    ],
)
def test_bad_criteria_selection(tmp_path: Path, criteria: object, message: str) -> None:
    skills = load_criteria(_file(tmp_path, GOOD))
    path = _instances(tmp_path, [{"idx": 1}, {"idx": 2, "criteria": criteria}])
    with pytest.raises(InputError) as info:
        load_instances(path, skills.names, custom_criteria=True)
    assert str(info.value).startswith(f"{path}:2: "), str(info.value)
    assert message in str(info.value), str(info.value)
