"""Tests of producer.biggen: BiGGen Bench's shipped files, and bad input by file and key."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from flask_eval.core.errors import InputError
from flask_eval.producer import biggen
from flask_eval.producer.biggen import load_biggen, load_biggen_evals
from flask_eval.producer.importing import INSTANCE_CRITERION

BIGGEN = Path(__file__).resolve().parents[3] / "shared" / "prometheus-data" / "BiGGen-Bench"
RESPONSES = BIGGEN / "sample_responses.json"
EVALS = BIGGEN / "sample_evals.json"


def _record(key: str = "planning_trip_0", **fields: object) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": key,
        "capability": "planning",
        "task": "trip",
        "instance_idx": 0,
        "system_prompt": "You plan trips.",
        "input": "Plan a day in Lyon.",
        "reference_answer": "Morning: old town. Afternoon: museum.",
        "score_rubric": {
            "criteria": "Is the plan feasible?",
            **{f"score{k}_description": f"level {k}" for k in range(1, 6)},
        },
        "response": "Walk around.",
        "response_model_name": "model-a",
    }
    record.update(fields)
    return record


def _write(tmp_path: Path, data: object, name: str = "biggen.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return str(path)


def _error(call: Any, *args: Any) -> str:
    with pytest.raises(InputError) as info:
        call(*args)
    text = str(info.value)
    assert "\n" not in text and len(text) < 400, text
    return text


# --------------------------------------------------------------------------- real data


@pytest.mark.skipif(not RESPONSES.exists(), reason="BiGGen Bench data absent (../shared)")
def test_the_shipped_responses_file_loads() -> None:
    """All 765 instances with ``llm_judge=True``; by default without BiGGen's 18
    llm_judge ones (refinement's llm_judge_absolute and llm_judge_relative), as BiGGen's
    pipeline leaves them out for Prometheus evaluators."""
    every, _ = load_biggen(str(RESPONSES), llm_judge=True)
    instances, response_sets = load_biggen(str(RESPONSES))
    assert len(every) == 765 and len(instances) == 765 - 18
    left_out = [i for i in every if i not in instances]
    assert {(i.capability, i.task) for i in left_out} == {
        ("refinement", "llm_judge_absolute"),
        ("refinement", "llm_judge_relative"),
    }
    assert all("llm_judge" in i.id for i in left_out)
    assert len({i.capability for i in instances}) == 9
    assert len({(i.capability, i.task) for i in instances}) == 75
    assert len({i.id for i in instances}) == 765 - 18
    for instance in instances:
        assert instance.skills == (INSTANCE_CRITERION,)
        rubric = instance.rubrics[INSTANCE_CRITERION]
        assert rubric.criteria and sorted(rubric.scores) == [1, 2, 3, 4, 5]
        assert all(rubric.scores.values())
        assert instance.instruction.strip() and instance.system_prompt.strip()
    first = instances[0]
    assert first.id == "planning_travel_plan_0"
    assert (first.capability, first.task) == ("planning", "travel_plan")
    assert first.system_prompt == "You are a travel agent that can design travel plans."
    assert first.answer.startswith("Day 1 - Morning:")
    assert "Paris" in first.rubrics[INSTANCE_CRITERION].criteria
    assert [(s.model, len(s.responses)) for s in response_sets] == [("sample-model", 747)]
    assert [r.instance_id for r in response_sets[0].responses] == [i.id for i in instances]


@pytest.mark.skipif(not EVALS.exists(), reason="BiGGen Bench data absent (../shared)")
def test_the_shipped_evals_file_gives_reference_ratings() -> None:
    references = load_biggen_evals(str(EVALS))
    assert [r.name for r in references] == ["prometheus-eval/prometheus-7b-v2.0"]
    scores = references[0].scores
    assert len(scores) == 695
    assert Counter(s.score for s in scores) == {5.0: 695}  # the mock file scores 5 everywhere
    assert {(s.model, s.skill) for s in scores} == {("sample-model", INSTANCE_CRITERION)}
    instances, _ = load_biggen(str(RESPONSES), llm_judge=True) if RESPONSES.exists() else ([], [])
    if instances:
        assert {s.instance_id for s in scores} <= {i.id for i in instances}


# --------------------------------------------------------------------------- behaviour


def test_records_without_a_response_add_instances_only(tmp_path: Path) -> None:
    bare = _record("coding_sort_1")
    del bare["response"], bare["response_model_name"]
    data = {"planning_trip_0": _record(), "coding_sort_1": bare}
    instances, sets = load_biggen(_write(tmp_path, data))
    assert [i.id for i in instances] == ["planning_trip_0", "coding_sort_1"]
    assert [(s.model, [r.instance_id for r in s.responses]) for s in sets] == [
        ("model-a", ["planning_trip_0"])
    ]


def test_llm_judge_instances_are_left_out_unless_asked_and_checked_all_the_same(
    tmp_path: Path,
) -> None:
    judge = _record(
        "refinement_llm_judge_absolute_0", capability="refinement", task="llm_judge_absolute"
    )
    data = {"planning_trip_0": _record(), judge["id"]: judge}
    path = _write(tmp_path, data)
    instances, sets = load_biggen(path)
    assert [i.id for i in instances] == ["planning_trip_0"]
    assert [r.instance_id for r in sets[0].responses] == ["planning_trip_0"]
    kept, kept_sets = load_biggen(path, llm_judge=True)
    assert [i.id for i in kept] == ["planning_trip_0", judge["id"]]
    assert len(kept_sets[0].responses) == 2
    broken = _write(tmp_path, {**data, judge["id"]: {**judge, "score_rubric": "none"}}, "b.json")
    assert "key 'refinement_llm_judge_absolute_0'" in _error(load_biggen, broken)


def test_responses_are_grouped_by_model_and_can_be_renamed(tmp_path: Path) -> None:
    data = {
        "a_x_0": _record("a_x_0", response_model_name="meta-llama/Llama-2-7b-chat-hf"),
        "a_x_1": _record("a_x_1", response_model_name="meta-llama/Llama-2-7b-chat-hf"),
    }
    path = _write(tmp_path, data)
    assert "not a valid model name" in _error(load_biggen, path)
    _, sets = load_biggen(path, model="llama-2-7b")
    assert [(s.model, len(s.responses)) for s in sets] == [("llama-2-7b", 2)]
    two = {"a_x_0": _record("a_x_0"), "a_x_1": _record("a_x_1", response_model_name="b")}
    _, sets = load_biggen(_write(tmp_path, two, "two.json"))
    assert [s.model for s in sets] == ["model-a", "b"]


def test_evals_skip_unparsed_scores_and_group_by_evaluator(tmp_path: Path) -> None:
    data = {
        "a_x_0": _record("a_x_0", score=4, eval_model_name="judge-1"),
        "a_x_1": _record("a_x_1", score=None, eval_model_name="judge-1"),
        "a_x_2": _record("a_x_2", score=2.0, eval_model_name="judge-2"),
    }
    references = load_biggen_evals(_write(tmp_path, data))
    assert [(r.name, [(s.instance_id, s.score) for s in r.scores]) for r in references] == [
        ("judge-1", [("a_x_0", 4.0)]),
        ("judge-2", [("a_x_2", 2.0)]),
    ]


# --------------------------------------------------------------------------- bad input

_GOOD_RUBRIC = _record()["score_rubric"]
_BAD_RECORDS: list[tuple[str, dict[str, Any], str]] = [
    ("id mismatch", _record(id="other"), "field 'id' is 'other'; it must equal the key"),
    ("no capability", _record(capability=None), "field 'capability' must be a non-empty"),
    ("empty task", _record(task="  "), "field 'task' must be a non-empty string"),
    ("no input", _record(input=""), "field 'input' is empty"),
    ("input not text", _record(input=["a"]), "field 'input' must be a string, got array"),
    ("answer not text", _record(reference_answer=3), "'reference_answer' must be a string"),
    ("no rubric", {k: v for k, v in _record().items() if k != "score_rubric"}, "'score_rubric'"),
    (
        "rubric missing a score",
        _record(score_rubric={k: v for k, v in _GOOD_RUBRIC.items() if "3" not in k}),
        "field 'score_rubric': rubric is missing 'score3_description'",
    ),
    (
        "rubric text not a string",
        _record(score_rubric={**_GOOD_RUBRIC, "score2_description": 2}),
        "rubric text of score 2 ('score2_description') must be a non-empty string",
    ),
    (
        "rubric without criteria",
        _record(score_rubric={k: v for k, v in _GOOD_RUBRIC.items() if k != "criteria"}),
        "rubric 'criteria' is missing",
    ),
    (
        "rubric unknown key",
        _record(score_rubric={**_GOOD_RUBRIC, "score6_description": "x"}),
        "unknown rubric key 'score6_description'",
    ),
    ("response not text", _record(response=None), "field 'response' must be a string"),
    (
        "response without a model",
        {k: v for k, v in _record().items() if k != "response_model_name"},
        "missing field 'response_model_name'",
    ),
]


@pytest.mark.parametrize(
    ("record", "message"), [c[1:] for c in _BAD_RECORDS], ids=[c[0] for c in _BAD_RECORDS]
)
def test_a_bad_record_names_the_file_and_key(
    tmp_path: Path, record: dict[str, Any], message: str
) -> None:
    if record["id"] == "planning_trip_0":
        record = {**record, "id": "k_1"}
    path = _write(tmp_path, {"planning_trip_9": _record("planning_trip_9"), "k_1": record})
    text = _error(load_biggen, path)
    assert text.startswith(f"{path}: key 'k_1': "), text
    assert message in text, text


@pytest.mark.parametrize(
    ("content", "message", "line"),
    [
        ("[]", "expected a JSON object keyed by instance id, got array", None),
        ("{}", "no records", None),
        ('{"a": 1}', "key 'a': expected an object, got number", None),
        ('{\n  "a": {},\n  "a": {}\n}', "key 'a' appears twice in an object", None),
        ('{\n  "a": {\n    "input": "x",\n  }\n}', "invalid JSON", 4),
        ('{\n  "a": {\n    "input": "\\u0000"\n  }\n}', "contains a NUL character", 3),
        ('{"a\\u0007b": {}}', "control character", None),
    ],
)
def test_a_bad_file_is_one_line(
    tmp_path: Path, content: str, message: str, line: int | None
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    text = _error(load_biggen, str(path))
    where = f"{path}:{line}: " if line else f"{path}: "
    assert text.startswith(where), text
    assert message in text, text


def test_the_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path, {"planning_trip_0": _record()})
    monkeypatch.setattr(biggen, "MAX_BYTES", 100)
    assert "file is larger than 100 bytes" in _error(load_biggen, path)
    assert "file is larger than 100 bytes" in _error(load_biggen_evals, path)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"score": 6}, "field 'score': score must be an integer 1-5, got 6"),
        ({"score": "5"}, "score must be an integer 1-5, got string '5'"),
        ({"score": True}, "score must be an integer 1-5, got boolean"),
        ({"score": 4.5}, "score must be an integer 1-5, got 4.5"),
        ({"eval_model_name": ""}, "field 'eval_model_name' must be a non-empty string"),
        ({"response_model_name": "a b"}, "response_model_name 'a b' is not a valid model name"),
    ],
)
def test_bad_evals_name_the_file_and_key(
    tmp_path: Path, fields: dict[str, object], message: str
) -> None:
    record = _record("a_x_0", score=3, eval_model_name="judge")
    record.update(fields)
    path = _write(tmp_path, {"a_x_0": record})
    text = _error(load_biggen_evals, path)
    assert text.startswith(f"{path}: key 'a_x_0': "), text
    assert message in text, text
    missing = _record("a_x_0", eval_model_name="judge")
    assert "missing field 'score'" in _error(
        load_biggen_evals, _write(tmp_path, {"a_x_0": missing}, "m.json")
    )
