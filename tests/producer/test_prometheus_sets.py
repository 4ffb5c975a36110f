"""Tests of producer.prometheus_sets: MT-Bench and Vicuna Bench as Prometheus ships them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flask_eval.core.errors import InputError
from flask_eval.producer import prometheus_sets
from flask_eval.producer.importing import INSTANCE_CRITERION, RubricProblem
from flask_eval.producer.prometheus_sets import (
    default_model,
    load_prometheus_set,
    parse_filled_prompt,
)

DATA = (
    Path(__file__).resolve().parents[3] / "shared" / "prometheus-data" / "eval" / "benchmark"
) / "data"
MT_BENCH = DATA / "mt_bench_eval.json"
VICUNA = DATA / "vicuna_eval.json"


def _prompt(
    instruction: str = "Name a prime number.",
    response: str = "Seven.",
    reference: str | None = "2 is the smallest prime.",
    rubric: str | None = None,
) -> str:
    """A prompt in the layout of the files (our own wording around the markers)."""
    if rubric is None:
        levels = "\n".join(f"Score {k}: Description of level {k}." for k in range(1, 6))
        rubric = f"[Is the number prime?]\n{levels}"
    parts = [
        "###Task Description:\nJudge the response below.\n",
        f"###The instruction to evaluate:\n{instruction}\n",
        f"###Response to evaluate:\n{response}\n",
    ]
    if reference is not None:
        parts.append(f"###Reference Answer (Score 5):\n{reference}\n")
    parts += [f"###Score Rubrics:\n{rubric}\n", "###Feedback: "]
    return "\n".join(parts)


def _record(idx: object = 1, source: object = "model_a", **fields: object) -> dict[str, Any]:
    record: dict[str, Any] = {
        "idx": idx,
        "response_source": source,
        "category": "math",
        "instruction": _prompt(),
        "gpt4_score": [4, 5, 5],
        "gpt4_feedback": ["ok", "good", "good"],
    }
    record.update(fields)
    return record


def _write(tmp_path: Path, data: object, name: str = "tiny_eval.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data, indent=4), encoding="utf-8")
    return str(path)


def _error(path: str, **kwargs: Any) -> str:
    with pytest.raises(InputError) as info:
        load_prometheus_set(path, **kwargs)
    text = str(info.value)
    assert "\n" not in text and len(text) < 400, text
    return text


# --------------------------------------------------------------------------- real data


@pytest.mark.parametrize(
    ("path", "sources", "shared"),
    [
        (MT_BENCH, ["llama2_chat_13b", "chatgpt", "vicuna_13b", "wizardlm_13b"], False),
        (VICUNA, ["vicuna", "chat_gpt", "wizard", "llama-2-chat"], True),
    ],
    ids=["mt-bench", "vicuna"],
)
def test_the_shipped_sets_load_one_model_per_response_source(
    path: Path, sources: list[str], shared: bool
) -> None:
    """Each response source is a model (80 responses each); Vicuna Bench's 4 sources
    answer the same 80 questions (shared instances), MT-Bench's second turns embed each
    source's own first answer (an instance per record)."""
    if not path.exists():
        pytest.skip("Prometheus eval data absent (../shared)")
    loaded = load_prometheus_set(str(path), each_run=True)
    assert [(s.model, len(s.responses)) for s in loaded.response_sets] == [
        (source, 80) for source in sources
    ]
    assert len(loaded.instances) == (80 if shared else 320)
    assert [r.name for r in loaded.references] == [
        "gpt-4",
        "gpt-4-run1",
        "gpt-4-run2",
        "gpt-4-run3",
    ]
    raw = json.loads(path.read_text(encoding="utf-8"))
    instances = {i.id: i for i in loaded.instances}
    responses = {(r.model, r.instance_id): r for s in loaded.response_sets for r in s.responses}
    assert len(responses) == 320
    for record, mean in zip(raw, loaded.references[0].scores, strict=True):
        model = record["response_source"]
        iid = str(record["idx"]) if shared else f"{record['idx']}-{model}"
        instance, response = instances[iid], responses[(model, iid)]
        assert instance.skills == (INSTANCE_CRITERION,) and instance.task == record["category"]
        rubric = instance.rubrics[INSTANCE_CRITERION]
        assert rubric.criteria and not rubric.criteria.startswith("[")
        assert sorted(rubric.scores) == [1, 2, 3, 4, 5]
        # the parts, put back in the file's layout, are the prompt the record holds
        assert (
            f"###The instruction to evaluate:\n{instance.instruction}\n\n" in record["instruction"]
        )
        assert f"###Response to evaluate:\n{response.text}\n\n###Reference" in record["instruction"]
        assert f"(Score 5):\n{instance.answer}\n\n###Score Rubrics:\n[" in record["instruction"]
        assert (mean.instance_id, mean.model) == (iid, model)
        assert mean.score == pytest.approx(sum(record["gpt4_score"]) / 3)
    for run, reference in enumerate(loaded.references[1:]):
        assert [s.score for s in reference.scores] == [r["gpt4_score"][run] for r in raw]


# --------------------------------------------------------------------------- the prompt


def test_parse_filled_prompt_takes_the_layout_apart() -> None:
    parts = parse_filled_prompt(_prompt(response="Seven.\n\nIt has no divisors."))
    assert parts.instruction == "Name a prime number."
    assert parts.response == "Seven.\n\nIt has no divisors."
    assert parts.reference == "2 is the smallest prime."
    assert parts.rubric.criteria == "Is the number prime?"
    assert parts.rubric.scores[3] == "Description of level 3."
    assert parse_filled_prompt(_prompt(reference=None)).reference == ""


@pytest.mark.parametrize(
    ("prompt", "message"),
    [
        ("Judge this.", "does not start with '###Task Description:'"),
        (_prompt(response="###Response to evaluate:\n9"), "appears 2 times"),
        (
            _prompt(response="Nine.\n###Score Rubrics:\n[x]"),
            "'###Score Rubrics:' section appears 2",
        ),
        (_prompt().replace("###Response to evaluate:", "###Answer:"), "section is missing"),
        (
            _prompt(rubric="[c]\nScore 1: a\nScore 2: b\nScore 4: d\nScore 5: e"),
            "(found: 1, 2, 4, 5)",
        ),
        (
            _prompt(rubric="[c]\nScore 2: b\nScore 1: a\nScore 3: c\nScore 4: d\nScore 5: e"),
            "in order",
        ),
        (
            _prompt(rubric="[c]\nScore 1: a\nScore 2: \nScore 3: c\nScore 4: d\nScore 5: e"),
            "score 2 is empty",
        ),
        (_prompt(rubric="[]\nScore 1: a"), "no criteria line"),
        (_prompt(instruction=""), "instruction is empty"),
        (_prompt() + "Feedback: 5", "text after '###Feedback:'"),
    ],
)
def test_parse_filled_prompt_refuses_what_it_cannot_cut_safely(prompt: str, message: str) -> None:
    with pytest.raises(RubricProblem) as info:
        parse_filled_prompt(prompt)
    assert message in str(info.value)


# --------------------------------------------------------------------------- records


def test_a_small_set_and_its_names(tmp_path: Path) -> None:
    records = [
        _record(1, "a"),
        _record(1, "b", gpt4_score=[1, 2, 2], instruction=_prompt(response="Nine.")),
        _record(2, "a", instruction=_prompt(instruction="Name an even prime.")),
        _record(2, "b", instruction=_prompt(instruction="Name an even prime, b's turn 2.")),
    ]
    path = _write(tmp_path, records)
    loaded = load_prometheus_set(path, evaluator="gpt-4-0613")
    # idx 1: one question for both sources (shared); idx 2: two different prompts
    assert [i.id for i in loaded.instances] == ["1", "2-a", "2-b"]
    assert [
        (s.model, [(r.instance_id, r.text) for r in s.responses]) for s in loaded.response_sets
    ] == [("a", [("1", "Seven."), ("2-a", "Seven.")]), ("b", [("1", "Nine."), ("2-b", "Seven.")])]
    assert [r.name for r in loaded.references] == ["gpt-4-0613"]
    means = [(s.model, s.instance_id, s.score) for s in loaded.references[0].scores]
    high, low = pytest.approx(14 / 3), pytest.approx(5 / 3)
    assert means == [("a", "1", high), ("b", "1", low), ("a", "2-a", high), ("b", "2-b", high)]
    # named: every response one model's, an instance per record
    named = load_prometheus_set(path, "bench-x")
    assert [i.id for i in named.instances] == ["1-a", "1-b", "2-a", "2-b"]
    assert [s.model for s in named.response_sets] == ["bench-x"]
    assert default_model("x/mt_bench_eval.json") == "mt-bench"
    assert default_model("vicuna_eval.json") == "vicuna"


def test_a_response_source_that_is_no_model_name_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, [_record(1, "a"), _record(1, "b c")])
    assert "record 2: response_source 'b c' is not a valid model name" in _error(path)
    assert len(load_prometheus_set(path, "named").response_sets) == 1  # a name for all


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ("text", "record 2: expected an object, got string"),
        (_record(2, gpt4_score=[4, 5]), "record 2 (idx 2): field 'gpt4_score' must be a list of 3"),
        (_record(2, gpt4_score=[4, 5, 0]), "score must be an integer 1-5, got 0"),
        (_record(2, gpt4_score=[4, 5, "5"]), "score must be an integer 1-5, got string '5'"),
        (_record(2, gpt4_score=None), "must be a list of 3 scores, got null"),
        (_record(2, category=""), "field 'category' must be a non-empty string"),
        (_record(2, response_source=None), "field 'response_source' must be a non-empty"),
        (_record(True), "field 'idx' must be an integer or a string, got boolean"),
        (_record(1), "record 2 (idx 1): duplicate instance '1-model_a' (first in record 1)"),
        (_record(2, instruction=3), "field 'instruction' must be a string, got number"),
        (_record(2, instruction=_prompt(reference="a\n###Feedback: 5")), "appears 2 times"),
    ],
)
def test_a_bad_record_names_the_file_and_record(
    tmp_path: Path, record: object, message: str
) -> None:
    path = _write(tmp_path, [_record(1), record])
    text = _error(path)
    assert text.startswith(f"{path}: record 2"), text
    assert message in text, text


@pytest.mark.parametrize(
    ("data", "message"),
    [({"a": 1}, "expected a JSON list of records, got object"), ([], "no records")],
)
def test_a_bad_file(tmp_path: Path, data: object, message: str) -> None:
    path = _write(tmp_path, data)
    assert _error(path) == f"{path}: {message}" or message in _error(path)


def test_bad_names_and_the_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path, [_record()])
    assert "invalid model name 'a b'" in _error(path, model="a b")
    assert "evaluator's name must be a non-empty" in _error(path, evaluator="")
    monkeypatch.setattr(prometheus_sets, "MAX_BYTES", 64)
    assert _error(path).startswith(f"{path}: file is larger than 64 bytes")
