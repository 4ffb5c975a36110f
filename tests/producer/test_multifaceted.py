"""Tests of producer.multifaceted: Multifaceted Bench's layouts, the criteria of each
instance, responses from the file or --responses, and bad input by file and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flask_eval.core.errors import InputError
from flask_eval.producer.multifaceted import load_multifaceted, rubric_names
from flask_eval.producer.sources import Sources, load_sources

DIMENSIONS = ("style", "background_knowledge", "informativeness", "harmlessness")


def rubric(criteria: str) -> dict[str, Any]:
    return {
        "criteria": criteria,
        "score_descriptions": {str(k): f"{criteria} at level {k}" for k in range(1, 6)},
    }


def record(source: str = "mt-bench", n: int = 4, **fields: object) -> dict[str, Any]:
    """One row as the data set ships it: a preference per dimension, a rubric for each."""
    row: dict[str, Any] = {
        "source": source,
        "preference_set": [
            {"dimension": d, "subdimension": "x", "preference": "p", "description": "d"}
            for d in DIMENSIONS[:n]
        ],
        "system": "You are a careful assistant who writes tersely.",
        "prompt": "Explain rain.",
        "reference_answer": "Water vapour condenses and falls.",
        "rubrics": [rubric(f"Does the response follow preference {k}?") for k in range(n)],
    }
    row.update(fields)
    return row


def write_lines(tmp_path: Path, rows: list[dict[str, Any]], name: str = "mf.jsonl") -> str:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def error_of(path: str, **kw: Any) -> str:
    with pytest.raises(InputError) as info:
        load_multifaceted(path, **kw)
    text = str(info.value)
    assert "\n" not in text and len(text) < 400, text
    return text


# --------------------------------------------------------------------------- layouts


def test_json_lines_rows_become_instances_numbered_from_zero(tmp_path: Path) -> None:
    path = write_lines(tmp_path, [record("mt-bench"), record("koala", n=3)])
    instances, sets = load_multifaceted(path)
    assert [i.id for i in instances] == ["0", "1"]
    first, second = instances
    assert first.skills == DIMENSIONS and second.skills == DIMENSIONS[:3]
    assert first.system_prompt.startswith("You are a careful")
    assert first.instruction == "Explain rain." and first.answer.startswith("Water")
    assert (first.task, second.task, first.line, second.line) == ("mt-bench", "koala", 1, 2)
    assert first.rubrics["style"].criteria == "Does the response follow preference 0?"
    assert first.rubrics["harmlessness"].scores[5].endswith("at level 5")
    assert sets == []


def test_a_json_list_and_an_object_keyed_by_id_load_alike(tmp_path: Path) -> None:
    rows = [record(), record("koala")]
    listed = tmp_path / "mf.json"
    listed.write_text(json.dumps(rows, indent=2))
    keyed = tmp_path / "eval.json"  # Janus's evaluation output: keyed by id, 'rubric'
    janus = {str(k): {**r, "id": str(k)} for k, r in enumerate(rows)}
    for r in janus.values():
        r["rubric"] = r.pop("rubrics")
    keyed.write_text(json.dumps(janus, indent=4))
    a, _ = load_multifaceted(str(listed))
    b, _ = load_multifaceted(str(keyed))
    assert [(i.id, i.task, i.skills, dict(i.rubrics)) for i in a] == [
        (i.id, i.task, i.skills, dict(i.rubrics)) for i in b
    ]


def test_own_ids_aliases_and_the_flat_rubric_shape(tmp_path: Path) -> None:
    flat = {"criteria": "Terse?", **{f"score{k}_description": f"s{k}" for k in range(1, 6)}}
    row = record(n=1, id=17, rubrics=[flat])
    row["user_prompt"] = row.pop("prompt")
    (inst,), _ = load_multifaceted(write_lines(tmp_path, [row]))
    assert inst.id == "17" and inst.instruction == "Explain rain."
    assert inst.rubrics["style"].scores == {k: f"s{k}" for k in range(1, 6)}


def test_criteria_are_numbered_when_the_preferences_do_not_name_them() -> None:
    names = rubric_names
    assert names({}, 3) == ("rubric_1", "rubric_2", "rubric_3")
    prefs = [{"dimension": d} for d in ("style", "style")]  # not distinct
    assert names({"preference_set": prefs}, 2) == ("rubric_1", "rubric_2")
    assert names({"preference_set": prefs[:1]}, 2) == ("rubric_1", "rubric_2")  # too few
    assert names({"preference_set": [{"dimension": "Has Spaces"}]}, 1) == ("rubric_1",)
    assert names({"preference_set": [{"dimension": "style"}]}, 1) == ("style",)


def test_responses_the_file_carries_by_model(tmp_path: Path) -> None:
    rows = [
        record(response="r0", response_model_name="janus-7b"),
        record(),  # no response: an instance only
        record(response="", response_model_name="janus-7b"),
    ]
    instances, sets = load_multifaceted(write_lines(tmp_path, rows))
    assert len(instances) == 3
    assert [(s.model, [(r.instance_id, r.text) for r in s.responses]) for s in sets] == [
        ("janus-7b", [("0", "r0"), ("2", "")])
    ]
    _, renamed = load_multifaceted(write_lines(tmp_path, rows), "mine")
    assert [s.model for s in renamed] == ["mine"]


def test_sources_take_responses_files_and_name_every_criterion(tmp_path: Path) -> None:
    path = write_lines(tmp_path, [record(), record(n=2), record(rubrics=[rubric("a")] * 2)])
    answers = tmp_path / "m.jsonl"
    answers.write_text('{"question_id": 0, "text": "a"}\n{"question_id": "2", "text": "b"}\n')
    loaded = load_sources(Sources(multifaceted=path, responses=[("m", str(answers))]))
    assert loaded.skillset.names == (*DIMENSIONS, "rubric_1", "rubric_2")
    (answered,) = loaded.inputs.response_sets
    assert sorted(r.instance_id for r in answered.responses) == ["0", "2"]
    assert loaded.inputs.coverage()["m"] == (2, 3)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"rubrics": None}, "field 'rubrics' must be a non-empty list"),
        ({"rubrics": []}, "got an empty list"),
        ({"system": ""}, "field 'system' is empty"),
        ({"prompt": 3}, "field 'prompt' must be a string"),
        ({"source": ""}, "field 'source' must be a non-empty string"),
        ({"rubric": [rubric("x")]}, "fields 'rubrics' and 'rubric' both given"),
        ({"response": "r"}, "name the model with --model NAME"),
        ({"response": "r", "response_model_name": "a/b"}, "not a valid model name"),
    ],
)
def test_a_bad_record_names_the_file_and_line(
    tmp_path: Path, row: dict[str, Any], expected: str
) -> None:
    path = write_lines(tmp_path, [record(), record(**row)])
    text = error_of(path)
    assert text.startswith(f"{path}:2: ") and expected in text, text


def test_missing_fields_and_rubrics_without_five_scores(tmp_path: Path) -> None:
    for field in ("rubrics", "system", "prompt", "reference_answer"):
        row = record()
        del row[field]
        assert f"missing field {field!r}" in error_of(write_lines(tmp_path, [row]))
    short = rubric("c")
    del short["score_descriptions"]["5"]
    text = error_of(write_lines(tmp_path, [record(rubrics=[rubric("a"), short])]))
    assert "rubric 2" in text and "score 5" in text, text
    no_criteria = {"score_descriptions": rubric("c")["score_descriptions"]}
    no_text = write_lines(tmp_path, [record(rubrics=[no_criteria])])
    assert "'criteria' is missing" in error_of(no_text)
    row = record()
    del row["reference_answer"]  # reference-free: not needed
    (inst,), _ = load_multifaceted(write_lines(tmp_path, [row]), reference=False)
    assert inst.answer == ""


def test_duplicate_ids_in_lines_a_list_and_keys(tmp_path: Path) -> None:
    path = write_lines(tmp_path, [record(id="a"), record(id="b"), record(id="a")])
    text = error_of(path)
    assert text.startswith(f"{path}:3: ") and "'a' also on line 1" in text, text
    listed = tmp_path / "mf.json"
    listed.write_text(json.dumps([record(), record(id="0")]))
    assert "record 2: instance id '0' also on record 1" in error_of(str(listed))
    keyed = tmp_path / "eval.json"
    keyed.write_text(json.dumps({"x": record(id="y")}))
    assert "key 'x': field 'id' is 'y'; it must equal the key" in error_of(str(keyed))


def test_not_a_data_set(tmp_path: Path) -> None:
    broken = tmp_path / "b.jsonl"
    broken.write_text(json.dumps(record()) + "\n{oops\n")
    assert error_of(str(broken)).startswith(f"{broken}:2: ")
    empty = tmp_path / "e.json"
    empty.write_text("[]")
    assert "no records" in error_of(str(empty))
    assert "invalid model name" in error_of(write_lines(tmp_path, [record()]), model="a b")


def test_sources_refuse_what_does_not_go_with_the_file(tmp_path: Path) -> None:
    path = write_lines(tmp_path, [record()])
    with pytest.raises(InputError, match="carries no responses; add --responses"):
        load_sources(Sources(multifaceted=path))
    with pytest.raises(InputError, match="give exactly one of"):
        load_sources(Sources(multifaceted=path, biggen=path))
    with pytest.raises(InputError, match="carries a rubric per instance"):
        load_sources(Sources(multifaceted=path, rubrics="r.yaml"))
    carried = write_lines(tmp_path, [record(response="x", response_model_name="m")], "c.jsonl")
    answers = tmp_path / "m.jsonl"
    answers.write_text('{"question_id": 0, "text": "a"}\n')
    with pytest.raises(InputError, match="duplicate model name"):
        load_sources(Sources(multifaceted=carried, responses=[("M", str(answers))]))
    unknown = tmp_path / "u.jsonl"
    unknown.write_text('{"question_id": 9, "text": "a"}\n')
    with pytest.raises(InputError):
        load_sources(Sources(multifaceted=path, responses=[("m", str(unknown))]))
