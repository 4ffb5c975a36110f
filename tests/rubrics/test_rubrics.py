"""Tests of rubrics.skills: the default FLASK skill set and loading skill set files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from flask_eval.core import strict_yaml
from flask_eval.core.errors import InputError
from flask_eval.rubrics.skills import ABILITIES, Skill, SkillSet, load, load_default
from tests.bad_input_cases import CLI_CASES, REPO_ROOT, BadCase

FLASK_JSON = Path(
    "/work/shared/flask-data/metadata_annotation/skillset/src/skillset_description.json"
)

EXPECTED = {
    "Logical Thinking": ("Logical Robustness", "Logical Correctness", "Logical Efficiency"),
    "Background Knowledge": ("Factuality", "Commonsense Understanding"),
    "Problem Handling": ("Comprehension", "Insightfulness", "Completeness", "Metacognition"),
    "User Alignment": ("Conciseness", "Readability", "Harmlessness"),
}
ALL_NAMES = tuple(n for names in EXPECTED.values() for n in names)


def test_default_set_has_twelve_skills_in_four_abilities() -> None:
    skills = load_default()
    assert len(skills) == 12
    assert skills.names == ALL_NAMES
    assert dict(skills.abilities) == EXPECTED
    assert tuple(skills.abilities) == ABILITIES


@pytest.mark.parametrize("name", ALL_NAMES)
def test_default_skill_is_complete(name: str) -> None:
    skills = load_default()
    skill = skills.get(name)
    assert name in skills
    assert skills.ability_of(name) in EXPECTED and name in EXPECTED[skills.ability_of(name)]
    assert list(skill.rubric) == [1, 2, 3, 4, 5]
    assert all(text.strip() for text in skill.rubric.values())
    assert skill.criterion.strip()
    assert skill.allow_na is True


def test_default_is_cached_and_frozen() -> None:
    skills = load_default()
    assert load_default() is skills
    with pytest.raises(AttributeError):
        skills.skills[0].name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        skills.skills[0].rubric[1] = "x"  # type: ignore[index]


def test_wording_is_our_own() -> None:
    if not FLASK_JSON.exists():
        pytest.skip(f"{FLASK_JSON} is absent")
    theirs = {e["Skill"]: e for e in json.loads(FLASK_JSON.read_text())}
    for skill in load_default():
        entry = theirs[skill.name]
        assert skill.criterion != entry["Criteria"]
        for score, text in skill.rubric.items():
            assert text != entry["Scoring"][str(score)]


def test_get_unknown_skill_has_helpful_message() -> None:
    skills = load_default()
    with pytest.raises(KeyError, match="did you mean 'Readability'"):
        skills.get("readability")
    with pytest.raises(KeyError, match="known skills"):
        skills.ability_of("Humor")
    assert "Humor" not in skills
    assert 3 not in skills


def test_duplicate_skill_in_skillset() -> None:
    skill = load_default().get("Readability")
    with pytest.raises(InputError, match="duplicate"):
        SkillSet((skill, skill))


def test_load_flask_json() -> None:
    if not FLASK_JSON.exists():
        pytest.skip(f"{FLASK_JSON} is absent")
    flask = load(FLASK_JSON)
    default = load_default()
    assert len(flask) == 12
    assert flask.names == default.names
    assert dict(flask.abilities) == dict(default.abilities)
    for skill in flask:
        assert set(skill.rubric) == {1, 2, 3, 4, 5}
        assert skill.allow_na


def test_load_our_yaml_roundtrip(tmp_path: Path) -> None:
    default = load_default()
    data = {
        "skills": [
            {
                "name": s.name,
                "ability": s.ability,
                "criterion": s.criterion,
                "rubric": dict(s.rubric),
                "allow_na": s.allow_na,
            }
            for s in default
        ]
    }
    path = tmp_path / "skills.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert load(path) == default
    as_json = tmp_path / "skills.json"
    as_json.write_text(json.dumps(data))
    assert load(as_json) == default


def _skill_yaml(**overrides: object) -> dict[str, object]:
    skill: dict[str, object] = {
        "name": "Readability",
        "ability": "User Alignment",
        "criterion": "Clarity.",
        "rubric": {i: f"level {i}" for i in range(1, 6)},
        "allow_na": True,
    }
    skill.update(overrides)
    return skill


def test_load_subset_and_allow_na_false(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"skills": [_skill_yaml(allow_na=False)]}))
    skills = load(path)
    assert skills.names == ("Readability",)
    assert skills.get("Readability") == Skill(
        "Readability", "User Alignment", "Clarity.", {i: f"level {i}" for i in range(1, 6)}, False
    )


BAD_YAML = [
    ("syntax", "skills: [\n  - name: x\n", "invalid YAML"),
    ("not a mapping", "just a string\n", "expected a mapping"),
    ("no skills", "abilities: [Logical Thinking]\n", "'skills' must be a non-empty list"),
    ("unknown top key", yaml.safe_dump({"skills": [_skill_yaml()], "x": 1}), "unknown top-level"),
    (
        "missing score",
        yaml.safe_dump({"skills": [_skill_yaml(rubric={1: "a", 2: "b", 3: "c", 4: "d"})]}),
        "missing scores 5",
    ),
    (
        "score key 6",
        yaml.safe_dump({"skills": [_skill_yaml(rubric={i: "t" for i in range(2, 7)})]}),
        "not a score 1-5",
    ),
    (
        "score key 0",
        yaml.safe_dump({"skills": [_skill_yaml(rubric={i: "t" for i in range(0, 6)})]}),
        "not a score 1-5",
    ),
    (
        "score key word",
        yaml.safe_dump({"skills": [_skill_yaml(rubric={"one": "t"})]}),
        "not a score 1-5",
    ),
    (
        "empty level",
        yaml.safe_dump({"skills": [_skill_yaml(rubric={i: "" for i in range(1, 6)})]}),
        "empty",
    ),
    (
        "rubric list",
        yaml.safe_dump({"skills": [_skill_yaml(rubric=["a", "b", "c", "d", "e"])]}),
        "rubric must be a mapping",
    ),
    (
        "unknown ability",
        yaml.safe_dump({"skills": [_skill_yaml(ability="Charm")]}),
        "unknown ability 'Charm'",
    ),
    (
        "undeclared ability",
        yaml.safe_dump({"abilities": ["Logical Thinking"], "skills": [_skill_yaml()]}),
        "unknown ability",
    ),
    (
        "duplicate",
        yaml.safe_dump({"skills": [_skill_yaml(), _skill_yaml()]}),
        "duplicate skill name",
    ),
    (
        "no name",
        yaml.safe_dump({"skills": [_skill_yaml(name="")]}),
        "'name' must be a non-empty string",
    ),
    (
        "no criterion",
        yaml.safe_dump({"skills": [{k: v for k, v in _skill_yaml().items() if k != "criterion"}]}),
        "'criterion'",
    ),
    ("bad allow_na", yaml.safe_dump({"skills": [_skill_yaml(allow_na="yes please")]}), "allow_na"),
    ("typo key", yaml.safe_dump({"skills": [_skill_yaml(rubrik={})]}), "unknown keys: rubrik"),
    ("skill not mapping", yaml.safe_dump({"skills": ["Readability"]}), "not a mapping"),
]


@pytest.mark.parametrize(("case", "text", "message"), BAD_YAML, ids=[c[0] for c in BAD_YAML])
def test_bad_yaml_names_the_file(tmp_path: Path, case: str, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load(path)
    assert info.value.path == str(path)
    assert str(path) in str(info.value)
    assert message in info.value.message


def test_yaml_errors_carry_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("skills:\n  - name: A\n    ability: Charm\n    criterion: c\n")
    with pytest.raises(InputError) as info:
        load(path)
    assert info.value.line == 3
    path.write_text("skills:\n  - name: [unclosed\n")
    with pytest.raises(InputError) as info:
        load(path)
    assert info.value.line is not None


def _flask_entry(**overrides: object) -> dict[str, object]:
    entry: dict[str, object] = {
        "Skill": "Readability",
        "Criteria": "Is it readable?",
        "Scoring": {str(i): f"level {i}" for i in range(1, 6)},
    }
    entry.update(overrides)
    return entry


BAD_JSON = [
    ("syntax", '[{"Skill": "Readability",', "invalid JSON"),
    ("empty list", "[]", "empty skill list"),
    ("unknown skill", json.dumps([_flask_entry(Skill="Humor")]), "unknown skill 'Humor'"),
    ("entry not object", json.dumps(["Readability"]), "not an object"),
    ("no criteria", json.dumps([_flask_entry(Criteria="")]), "'Criteria'"),
    (
        "missing score",
        json.dumps([_flask_entry(Scoring={"1": "a", "2": "b"})]),
        "missing scores 3, 4, 5",
    ),
    (
        "score key 6",
        json.dumps([_flask_entry(Scoring={str(i): "t" for i in range(2, 7)})]),
        "not a score",
    ),
    ("duplicate", json.dumps([_flask_entry(), _flask_entry()]), "duplicate skill name"),
    ("scalar", "42", "expected a mapping"),
]


@pytest.mark.parametrize(("case", "text", "message"), BAD_JSON, ids=[c[0] for c in BAD_JSON])
def test_bad_flask_json_names_the_file(tmp_path: Path, case: str, text: str, message: str) -> None:
    path = tmp_path / "skillset_description.json"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load(path)
    assert info.value.path == str(path)
    assert str(path) in str(info.value)
    assert message in info.value.message


def test_flask_json_subset_uses_default_abilities(tmp_path: Path) -> None:
    path = tmp_path / "subset.json"
    path.write_text(json.dumps([_flask_entry(), _flask_entry(Skill="Factuality")]))
    skills = load(path)
    assert skills.names == ("Factuality", "Readability")  # canonical order
    assert skills.ability_of("Factuality") == "Background Knowledge"


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(InputError, match="not found") as info:
        load(path)
    assert info.value.path == str(path)


# --- the strict YAML loader (core/strict_yaml.py), shared with judges files --------------

RUBRIC_CASES = [c for c in CLI_CASES if "--rubrics" in c.args and c.where]


@pytest.mark.timeout(10)  # the billion-laughs file must not expand
@pytest.mark.parametrize("case", RUBRIC_CASES, ids=lambda c: c.id)
def test_rubric_cases_of_the_corpus(case: BadCase, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO_ROOT)
    path = case.args[case.args.index("--rubrics") + 1]
    with pytest.raises(InputError) as info:
        load(path)
    text = str(info.value)
    assert text.startswith(case.where + ": ") and case.message in text, text
    assert len(text) < 600 and "\n" not in text, text


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{b}: &{b} [{', '.join(['*' + a] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi", strict=True)
)

STRICT = [
    ("alias bomb", BOMB, 1, "anchors (&name) are not allowed"),
    ("alias", "a: 1\nb: *a\n", 2, "aliases (*name) are not allowed"),
    ("python tag", "- !!python/object/apply:os.system [true]\n", 1, "'!!python/object/apply"),
    ("float tag", "x: !!float abc\n", 1, "explicit tags such as '!!float'"),
    ("local tag", "x: !thing 1\n", 1, "explicit tags such as '!thing'"),
    ("bare tag", "x: ! 1\n", 1, "explicit tags such as '!'"),
    ("duplicate key", "a: 1\nb: 2\na: 3\n", 3, "duplicate key 'a' (first on line 1)"),
    ("duplicate after int", "1: a\n0x1: b\n", 2, "duplicate key 1 (first on line 1)"),
    ("long duplicate key", "k" * 500 + ": 1\n" + "k" * 500 + ": 2\n", 2, "(500 characters)"),
    ("merge key", "a:\n  <<: {b: 1}\n", 2, "merge keys (<<) are not allowed"),
    ("list key", "? [a]\n: 1\n", 1, "a key must be a plain value"),
    ("deep", "[" * 40 + "]" * 40, 1, "nested deeper than 32 levels"),
    ("bad date", "a: 2001-02-30\n", 1, "invalid value (day is out of range for month)"),
    ("huge int", "a: " + "1" * 5000 + "\n", 1, "a number with more than 4300 digits"),
    ("surrogate escape", 'a: "\\ud800"\n', 1, "lone UTF-16 surrogate (\\ud800)"),
    ("nul escape", 'a:\n  - "x\\0"\n', 2, "contains a NUL character"),
    ("raw nul", "a: 1\nb: x\x00\n", 2, "character U+0000 is not allowed"),
    ("two documents", "a: 1\n---\nb: 2\n", 2, "expected a single document"),
    ("syntax", "a: [1, 2\n", 2, "invalid YAML"),
]


@pytest.mark.timeout(10)
@pytest.mark.parametrize(("case", "text", "line", "message"), STRICT, ids=[c[0] for c in STRICT])
def test_the_strict_loader_refuses_with_the_line(
    case: str, text: str, line: int, message: str
) -> None:
    with pytest.raises(yaml.YAMLError) as info:
        strict_yaml.parse(text)
    got, got_line = strict_yaml.describe(info.value, text)
    assert (got_line, message in got) == (line, True), (got_line, got)
    assert len(got) < 200, got


def test_the_strict_loader_reads_plain_data() -> None:
    text = "# c\na: [1, 2.5, true, null, '!!not a tag', \"&not an anchor\"]\nb: {c: d}\n"
    data, node = strict_yaml.parse(text)
    assert data == {"a": [1, 2.5, True, None, "!!not a tag", "&not an anchor"], "b": {"c": "d"}}
    assert node is not None and node.start_mark.line == 1
    assert strict_yaml.parse("") == (None, None)
    assert strict_yaml.parse("# nothing\n") == (None, None)


def test_skill_names_up_to_the_column_length(tmp_path: Path) -> None:
    from flask_eval.core.limits import MAX_CRITERION_NAME

    name = "N" * MAX_CRITERION_NAME
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"skills": [_skill_yaml(name=name)]}))
    assert load(path).names == (name,)
