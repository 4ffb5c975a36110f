"""Conversations as inputs: one instance per turn (MT-Bench's question.jsonl as it is, or
ours), a model's answers as one response per turn with its earlier answers, and the
references of a reference-answer file attached per turn."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from flask_eval.core.conversations import Turn, turn_id
from flask_eval.core.errors import InputError
from flask_eval.core.types import Response, ResponseSet
from flask_eval.producer import parallel
from flask_eval.producer.conversations import TurnIds, load_reference_answers
from flask_eval.producer.inputs import load_inputs, with_reference_answers
from flask_eval.producer.loaders import load_instances
from flask_eval.producer.responses import load_responses, only
from flask_eval.producer.select import select
from tests.bad_input_cases import FLASK_SKILLS

MTBENCH = Path("/work/shared/mtbench-data")
QUESTIONS = MTBENCH / "question.jsonl"
REFERENCES = MTBENCH / "reference_answer" / "gpt-4.jsonl"
needs_mtbench = pytest.mark.skipif(
    not (QUESTIONS.is_file() and REFERENCES.is_file()), reason="MT-Bench data absent"
)


def write(path: Path, records: Sequence[object]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def fastchat_answer(qid: object, turns: Sequence[str]) -> dict[str, object]:
    """A line of FastChat's model_answer format."""
    return {
        "question_id": qid,
        "answer_id": f"a{qid}",
        "model_id": "m",
        "choices": [{"index": 0, "turns": list(turns)}],
        "tstamp": 1.0,
    }


def test_our_conversation_expands_into_one_instance_per_turn(tmp_path: Path) -> None:
    path = write(
        tmp_path / "i.jsonl",
        [
            {
                "id": "trip",
                "turns": ["Plan a trip.", "Make it cheaper.", "Now for two."],
                "references": ["a plan", "a cheaper plan"],
                "skills": ["Completeness", "Readability"],
                "system_prompt": "You are a travel agent.",
                "category": "planning",
                "domain": ["Culture"],
                "difficulty": 2,
            },
            {"idx": 7, "instruction": "Add 2 and 3.", "answer": "5", "skill": ["Factuality"]}
            | {"domain": ["Math"], "difficulty": 1},
        ],
    )
    first, second, third, plain = load_instances(path, FLASK_SKILLS)
    assert [i.id for i in (first, second, third)] == ["trip:t1", "trip:t2", "trip:t3"]
    assert [i.turn for i in (first, second, third)] == [1, 2, 3]
    assert {i.conversation for i in (first, second, third)} == {"trip"}
    assert [i.instruction for i in (first, second, third)] == [
        "Plan a trip.",
        "Make it cheaper.",
        "Now for two.",
    ]
    assert [i.answer for i in (first, second, third)] == ["a plan", "a cheaper plan", ""]
    assert first.history == ()
    assert third.history == (
        Turn("Plan a trip.", "a plan"),
        Turn("Make it cheaper.", "a cheaper plan"),
    )
    for i in (first, second, third):
        assert i.skills == ("Completeness", "Readability")
        assert i.system_prompt == "You are a travel agent."
        assert i.capability == "planning" and i.domains == ("Culture",) and i.difficulty == 2
        assert i.line == 1
    assert plain.id == "7" and plain.turn is None and plain.conversation is None


def test_a_conversation_naming_no_skills_is_judged_on_every_criterion_of_the_run(
    tmp_path: Path,
) -> None:
    path = write(tmp_path / "i.jsonl", [{"id": 1, "turns": ["Hi.", "Bye."]}])
    assert {i.skills for i in load_instances(path, FLASK_SKILLS)} == {FLASK_SKILLS}
    custom = load_instances(path, ["helpfulness", "honesty"], custom_criteria=True)
    assert {i.skills for i in custom} == {("helpfulness", "honesty")}
    # instances to answer (generate), not to judge: no criteria
    assert {i.skills for i in load_instances(path, FLASK_SKILLS, metadata=False)} == {()}


@needs_mtbench
def test_mt_bench_questions_load_as_they_are() -> None:
    instances = load_instances(str(QUESTIONS), FLASK_SKILLS)
    assert len(instances) == 160
    by_id = {i.id: i for i in instances}
    writing = by_id["81:t2"]
    assert writing.conversation == "81" and writing.turn == 2
    assert writing.capability == "writing"
    assert writing.history[0].user.startswith("Compose an engaging travel blog post")
    categories = {i.capability for i in instances}
    assert categories == {
        "writing",
        "roleplay",
        "reasoning",
        "math",
        "coding",
        "extraction",
        "stem",
        "humanities",
    }
    # MT-Bench's inline references: per turn, in the history of the next turn too
    raw = {
        str(r["question_id"]): r
        for r in map(json.loads, QUESTIONS.read_text(encoding="utf-8").splitlines())
    }
    assert by_id["101:t1"].answer == raw["101"]["reference"][0]
    assert by_id["101:t2"].history[0].reference == raw["101"]["reference"][0]
    assert by_id["81:t1"].answer == ""


@needs_mtbench
def test_the_reference_answer_file_attaches_each_turns_reference() -> None:
    instances = load_instances(str(QUESTIONS), FLASK_SKILLS)
    attached = {i.id: i for i in load_reference_answers(str(REFERENCES), instances)}
    refs = {
        str(r["question_id"]): r["choices"][0]["turns"]
        for r in map(json.loads, REFERENCES.read_text(encoding="utf-8").splitlines())
    }
    assert len(refs) == 30
    for qid, (one, two) in refs.items():
        assert attached[turn_id(qid, 1)].answer == one
        assert attached[turn_id(qid, 2)].answer == two
        assert attached[turn_id(qid, 2)].history == (
            Turn(attached[turn_id(qid, 1)].instruction, one),
        )
    # conversations the file does not name keep theirs (inline, or none)
    before = {i.id: i for i in instances}
    assert attached["95:t1"] == before["95:t1"] and attached["81:t2"] == before["81:t2"]


def _conversations(tmp_path: Path) -> str:
    return write(
        tmp_path / "conv.jsonl",
        [
            {"question_id": 81, "category": "writing", "turns": ["W1", "W2"]},
            {"id": "c", "turns": ["Q1", "Q2", "Q3"], "references": ["R1"]},
            {"idx": "x", "instruction": "One shot.", "answer": "", "skill": ["Factuality"]}
            | {"domain": [], "difficulty": 1},
        ],
    )


def test_responses_in_both_formats_become_one_response_per_turn(tmp_path: Path) -> None:
    instances = _conversations(tmp_path)
    ours = write(
        tmp_path / "ours.jsonl",
        [
            {"question_id": 81, "turns": ["a1", "a2"]},
            {"question_id": "x", "text": "one answer"},
            {"id": "c", "turns": ["c1", "", "c3"]},
        ],
    )
    theirs = write(
        tmp_path / "fastchat.jsonl",
        [fastchat_answer("c", ["f1", "f2", "f3"]), fastchat_answer(81, ["g1", "g2"])],
    )
    inputs = load_inputs(instances, [("ours", ours), ("fastchat", theirs)], FLASK_SKILLS)
    mine, fast = inputs.response_sets
    assert list(mine.responses) == [
        Response("ours", "81:t1", "a1", 1, ()),
        Response("ours", "81:t2", "a2", 1, ("a1",)),
        Response("ours", "x", "one answer", 2, ()),
        Response("ours", "c:t1", "c1", 3, ()),
        Response("ours", "c:t2", "", 3, ("c1",)),
        Response("ours", "c:t3", "c3", 3, ("c1", "")),
    ]
    assert [(r.instance_id, r.history) for r in fast.responses] == [
        ("c:t1", ()),
        ("c:t2", ("f1",)),
        ("c:t3", ("f1", "f2")),
        ("81:t1", ()),
        ("81:t2", ("g1",)),
    ]
    assert mine.instance_ids() == ("81:t1", "81:t2", "x", "c:t1", "c:t2", "c:t3")
    sizes = [("81:t1", 2), ("81:t2", 2), ("x", 10), ("c:t1", 2), ("c:t2", 0), ("c:t3", 2)]
    assert list(mine.sizes()) == sizes
    assert mine.texts(["c:t3", "81:t1"]) == {"81:t1": "a1", "c:t3": "c3"}
    assert inputs.coverage() == {"ours": (6, 6), "fastchat": (5, 6)}
    # each response's id is the instance's own string
    own = {i.id: i.id for i in inputs.instances}
    assert all(own[r.instance_id] is r.instance_id for r in mine.responses)


def test_a_selection_keeps_a_later_turn_with_its_history(tmp_path: Path) -> None:
    instances = _conversations(tmp_path)
    ours = write(tmp_path / "ours.jsonl", [{"id": "c", "turns": ["c1", "c2", "c3"]}])
    inputs = load_inputs(instances, [("m", ours)], FLASK_SKILLS)
    kept = only(inputs.response_sets[0], {"c:t3"})
    assert list(kept.responses) == [Response("m", "c:t3", "c3", 1, ("c1", "c2"))]
    assert list(kept.sizes()) == [("c:t3", 2)]
    picked = select(inputs, 2, None, 0)  # the first two instances: 81's turns
    assert [i.id for i in picked.instances] == ["81:t1", "81:t2"]


def test_responses_to_conversations_not_in_the_instances_are_ignored(tmp_path: Path) -> None:
    instances = _conversations(tmp_path)
    ours = write(
        tmp_path / "ours.jsonl",
        [{"question_id": 99, "turns": ["z1", "z2"]}, {"question_id": 81, "turns": ["a1", "a2"]}],
    )
    inputs = load_inputs(instances, [("m", ours)], FLASK_SKILLS)
    assert [r.instance_id for r in inputs.response_sets[0].responses] == ["81:t1", "81:t2"]
    assert inputs.ignored() == {"m": 2}


def test_a_responses_file_changed_after_validation_is_refused(tmp_path: Path) -> None:
    instances = _conversations(tmp_path)
    path = tmp_path / "ours.jsonl"
    write(path, [{"question_id": 81, "turns": ["a1", "a2"]}])
    rs = load_responses("m", str(path), TurnIds(load_instances(instances, FLASK_SKILLS)))
    write(path, [{"question_id": 81, "turns": ["b1", "b2", "b3"]}])
    os.utime(path, ns=(1, 1))
    with pytest.raises(InputError, match="changed after it was validated"):
        list(rs.responses)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"question_id": "x", "turns": ["a"]}, "instance 'x' is not a conversation"),
        ({"question_id": 81, "turns": ["a", "b"], "choices": []}, "'turns' and 'choices' both"),
        ({"question_id": 81, "choices": []}, "field 'choices' must be a list of objects"),
        ({"question_id": 81, "choices": [{"index": 0}]}, "missing field 'choices[0].turns'"),
        ({"question_id": 81, "id": 81, "turns": ["a", "b"]}, "'question_id' and 'id' both"),
        ({"turns": ["a", "b"]}, "missing field 'question_id'"),
        ({"question_id": 81, "turns": []}, "field 'turns' is empty"),
        ({"question_id": 81, "turns": ["a"] * 21}, "has 21 turns; a conversation has at most 20"),
    ],
)
def test_bad_conversation_responses(tmp_path: Path, record: object, message: str) -> None:
    instances = _conversations(tmp_path)
    ours = write(tmp_path / "ours.jsonl", [{"question_id": 81, "turns": ["a1", "a2"]}, record])
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("(", r"\(")) as info:
        load_inputs(instances, [("m", ours)], FLASK_SKILLS)
    assert info.value.line == 2 and info.value.path == ours


def test_a_duplicate_conversation_response_is_refused(tmp_path: Path) -> None:
    instances = _conversations(tmp_path)
    ours = write(tmp_path / "ours.jsonl", [fastchat_answer(81, ["a", "b"])] * 2)
    with pytest.raises(
        InputError, match=r"duplicate response for conversation '81' \(first on line 1\)"
    ):
        load_inputs(instances, [("m", ours)], FLASK_SKILLS)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"turns": ["a"]}, "missing field 'id' \\(or MT-Bench's 'question_id'\\)"),
        ({"id": 1, "question_id": 1, "turns": ["a"]}, "fields 'id' and 'question_id' both given"),
        (
            {"id": 1, "turns": ["a"], "reference": [], "references": []},
            "'reference' and 'references'",
        ),
        ({"id": 1, "turns": ["a"], "references": [3]}, "must be a list of reference answers"),
        ({"id": 1, "turns": ["a"], "skills": [], "criteria": []}, "'skills' and 'criteria' both"),
        ({"id": 1, "turns": ["a"], "category": ""}, "field 'category' must be a non-empty string"),
        ({"id": "i" * 198, "turns": ["a"]}, "field 'id' is longer than 197 characters"),
        ({"id": 1, "turns": ["a"], "domain": ["Astrology"]}, "unknown domain 'Astrology'"),
        ({"id": 1, "turns": ["a"], "difficulty": 9}, "difficulty level 9 is out of range"),
    ],
)
def test_bad_conversations(tmp_path: Path, record: object, message: str) -> None:
    path = write(tmp_path / "i.jsonl", [record])
    with pytest.raises(InputError, match=message) as info:
        load_instances(path, FLASK_SKILLS)
    assert info.value.line == 1


def test_reference_answers_attach_by_question_id_and_replace_inline_ones(tmp_path: Path) -> None:
    instances = _conversations(tmp_path)
    ours = write(tmp_path / "ours.jsonl", [{"question_id": 81, "turns": ["a1", "a2"]}])
    refs = write(tmp_path / "refs.jsonl", [fastchat_answer("c", ["r1", "r2", "r3"])])
    inputs = with_reference_answers(load_inputs(instances, [("m", ours)], FLASK_SKILLS), refs)
    by_id = {i.id: i for i in inputs.instances}
    assert [by_id[f"c:t{k}"].answer for k in (1, 2, 3)] == ["r1", "r2", "r3"]
    assert by_id["c:t3"].history == (Turn("Q1", "r1"), Turn("Q2", "r2"))
    assert by_id["81:t1"].answer == "" and by_id["x"].answer == ""
    assert inputs.response_sets and not inputs.about_instances


def test_a_duplicate_reference_answer_is_refused(tmp_path: Path) -> None:
    instances = load_instances(_conversations(tmp_path), FLASK_SKILLS)
    refs = write(tmp_path / "refs.jsonl", [fastchat_answer(81, ["r1", "r2"])] * 2)
    with pytest.raises(InputError, match="duplicate reference answer for conversation '81'"):
        load_reference_answers(refs, instances)


def test_many_responses_files_validated_in_children_keep_their_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past parallel.MIN_FILES files, responses files are validated in forked processes:
    a conversation's lines still give one response per turn, with its history."""
    monkeypatch.setattr(parallel, "_cores", lambda: 2)
    forked: list[int] = []
    in_children = parallel._in_children

    def spy(*args: Any) -> tuple[ResponseSet, ...]:
        forked.append(1)
        return in_children(*args)

    monkeypatch.setattr(parallel, "_in_children", spy)
    instances = _conversations(tmp_path)
    files = [
        (f"m{n}", write(tmp_path / f"m{n}.jsonl", [fastchat_answer("c", [f"{n}a", f"{n}b", ""])]))
        for n in range(parallel.MIN_FILES)
    ]
    inputs = load_inputs(instances, files, FLASK_SKILLS)
    if parallel._can_fork():
        assert forked
    for n, rs in enumerate(inputs.response_sets):
        assert [(r.instance_id, r.text, r.history) for r in rs.responses] == [
            ("c:t1", f"{n}a", ()),
            ("c:t2", f"{n}b", (f"{n}a",)),
            ("c:t3", "", (f"{n}a", f"{n}b")),
        ]
