"""Auto-J and HHH Alignment as Prometheus ships them: the real files (skipped when
../shared/prometheus-data is absent) and bad files, refused in one line naming the place."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from flask_eval.core.errors import InputError
from flask_eval.producer.importing import INSTANCE_CRITERION
from flask_eval.producer.pairwise_sets import (
    LABEL_FIRST,
    LABEL_SECOND,
    LABEL_TIE,
    OVERALL,
    PairLabel,
    load_autoj_pairwise,
    load_hhh_alignment,
    load_pairwise_set,
)
from tests.conftest import REPO

DATA = REPO.parent / "shared" / "prometheus-data" / "eval" / "benchmark" / "data"


def real(name: str) -> Path:
    path = DATA / name
    if not path.exists():
        pytest.skip(f"Prometheus data not available ({path})")
    return path


def test_autoj_real_file() -> None:
    path = real("autoj_pairwise.json")
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    got = load_autoj_pairwise(str(path))
    assert len(got.instances) == len(got.labels) == len(records) == 1392
    # the counts the file holds, label by label (Auto-J: 0 = response 1, 2 = tie)
    assert Counter(lb.label for lb in got.labels) == Counter(r["label"] for r in records)
    assert Counter(lb.label for lb in got.labels) == {0: 520, 1: 499, 2: 373}
    assert got.models == ("response-1", "response-2")
    first, second = got.response_sets
    for n in (0, 700, len(records) - 1):
        inst, rec = got.instances[n], records[n]
        assert inst.id == f"autoj-{n + 1}" and inst.line == n + 1  # one record per line
        assert (inst.instruction, inst.task, inst.skills) == (
            rec["prompt"],
            rec["scenario"],
            (OVERALL,),
        )
        assert inst.answer == "" and not inst.rubrics
        assert first.responses[n].text == rec["response 1"]
        assert second.responses[n].text == rec["response 2"]
        assert {first.responses[n].instance_id, second.responses[n].instance_id} == {inst.id}
        assert got.labels[n] == PairLabel(inst.id, "response-1", "response-2", rec["label"])
    assert len({i.id for i in got.instances}) == len(records)
    assert load_autoj_pairwise(str(path)) == got  # stable ids and order
    assert load_pairwise_set(str(path)).labels == got.labels


def test_hhh_real_file() -> None:
    path = real("hhh_alignment_eval.json")
    records = json.loads(path.read_text())
    got = load_hhh_alignment(str(path))
    assert len(got.instances) == len(records) == 221
    assert got.models == ("chosen", "rejected")
    assert {lb.label for lb in got.labels} == {LABEL_FIRST}  # the chosen one is better
    assert Counter(i.task for i in got.instances) == Counter(r["source"] for r in records)
    chosen, rejected = got.response_sets
    first = got.instances[0]
    assert first.id == "hhh-1" and first.skills == (INSTANCE_CRITERION,)
    assert first.instruction.startswith("Can you tell me what kind of knife")
    assert chosen.responses[0].text.startswith("Sorry, I'm not interested in helping you")
    assert rejected.responses[0].text == "Why would you want to do something like that?"
    rubric = first.rubrics[INSTANCE_CRITERION]
    assert rubric.criteria.startswith("Does the model's response avoid causing any potential")
    assert sorted(rubric.scores) == [1, 2, 3, 4, 5]
    # nothing of the template is left in what is judged
    for inst, c, r in zip(got.instances, chosen.responses, rejected.responses, strict=True):
        for text in (inst.instruction, c.text, r.text):
            assert "###" not in text and "[RESULT]" not in text
        assert c.text != r.text
    assert load_pairwise_set(str(path)) == got


def test_labels_in_either_order() -> None:
    label = PairLabel("i", "a", "b", LABEL_FIRST)
    assert (label.in_order("a", "b"), label.in_order("b", "a")) == (LABEL_FIRST, LABEL_SECOND)
    tie = PairLabel("i", "a", "b", LABEL_TIE)
    assert tie.in_order("b", "a") == LABEL_TIE
    with pytest.raises(ValueError, match="not 'a' and 'c'"):
        label.in_order("a", "c")


def autoj_line(**change: object) -> str:
    record: dict[str, object] = {
        "scenario": "chitchat",
        "label": 2,
        "prompt": "hi",
        "response 1": "hello",
        "response 2": "",
    }
    record.update(change)
    return json.dumps({k: v for k, v in record.items() if v is not DROP})


DROP = object()


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_autoj_small_file_and_custom_models(tmp_path: Path) -> None:
    path = write(tmp_path, "a.jsonl", autoj_line() + "\n\n" + autoj_line(label=0, scenario=DROP))
    got = load_autoj_pairwise(path, ["gpt", "claude"])
    assert [i.id for i in got.instances] == ["autoj-1", "autoj-3"]  # blank line 2 skipped
    assert [lb.label for lb in got.labels] == [LABEL_TIE, LABEL_FIRST]
    assert [i.task for i in got.instances] == ["chitchat", None]
    assert got.response_sets[1].responses[0].text == ""  # an empty response is judged
    assert got.labels[0].first_model == "gpt"


@pytest.mark.parametrize(
    ("lines", "says"),
    [
        ([autoj_line(), "{not json"], ":2: invalid JSON"),
        ([autoj_line(label=3)], ":1: field 'label' must be 0 (response 1 is better)"),
        ([autoj_line(label=True)], ":1: field 'label' must be 0"),
        ([autoj_line(label="1")], ":1: field 'label' must be 0"),
        ([autoj_line(label=1.0)], ":1: field 'label' must be 0"),
        ([autoj_line(label=DROP)], ":1: field 'label' must be 0"),
        (
            [autoj_line(), autoj_line(**{"response 2": DROP})],
            ":2: field 'response 2' must be a string, got missing",
        ),
        ([autoj_line(**{"response 1": 5})], ":1: field 'response 1' must be a string, got"),
        ([autoj_line(prompt="  ")], ":1: field 'prompt' is empty"),
        ([autoj_line(scenario="")], ":1: field 'scenario' must be a non-empty string"),
        (["[1, 2]"], ":1: expected a JSON object"),
        (['{"label": 0, "label": 1}'], ":1: key 'label' appears twice"),
        ([""], "no records"),
    ],
)
def test_bad_autoj_files(tmp_path: Path, lines: list[str], says: str) -> None:
    path = write(tmp_path, "bad.jsonl", "\n".join(lines) + "\n")
    with pytest.raises(InputError) as exc:
        load_autoj_pairwise(path)
    text = str(exc.value)
    assert "\n" not in text and exc.value.exit_code == 2
    assert text.startswith(path) and says in text


PROMPT = (
    "###Task Description:\nJudge it.\n\n###The instruction to evaluate:\n{instruction}\n\n"
    "###Response to evaluate:\n{response}\n\n###Score Rubrics:\n[{criteria}]\n"
    + "".join(f"Score {k}: level {k}.\n" for k in range(1, 6))
    + "\n###Feedback: "
)


def hhh_record(instruction: str = "q?", criteria: str = "Is it kind?", **change: object) -> dict:
    record: dict[str, object] = {
        "source": "helpful",
        "chosen_instruction": PROMPT.format(
            instruction=instruction, response="yes", criteria=criteria
        ),
        "rejected_instruction": PROMPT.format(
            instruction=instruction, response="no", criteria=criteria
        ),
    }
    record.update(change)
    return record


def test_hhh_small_file(tmp_path: Path) -> None:
    path = write(tmp_path, "h.json", json.dumps([hhh_record(), hhh_record("other?")]))
    got = load_hhh_alignment(path, ("good", "bad"))
    assert [i.instruction for i in got.instances] == ["q?", "other?"]
    assert [r.text for r in got.response_sets[0].responses] == ["yes", "yes"]
    assert [r.text for r in got.response_sets[1].responses] == ["no", "no"]
    assert got.labels[1] == PairLabel("hhh-2", "good", "bad", LABEL_FIRST)
    assert got.instances[0].rubrics[INSTANCE_CRITERION].criteria == "Is it kind?"
    assert load_pairwise_set(path, ("good", "bad")) == got


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"a": 1}, "expected a JSON list of records, got object"),
        ([], "no records"),
        ([hhh_record(), 7], "record 2: expected an object"),
        (
            [hhh_record(chosen_instruction="Score me")],
            "record 1 (source 'helpful'): field 'chosen_instruction': the prompt does not start",
        ),
        ([hhh_record(rejected_instruction=None)], "field 'rejected_instruction' must be a string"),
        (
            [hhh_record(rejected_instruction=hhh_record("else?")["rejected_instruction"])],
            "record 1 (source 'helpful'): the chosen and rejected prompts differ in their "
            "instruction",
        ),
        (
            [
                hhh_record(
                    rejected_instruction=hhh_record(criteria="Other?")["rejected_instruction"]
                )
            ],
            "differ in their rubric",
        ),
        ([hhh_record(source=3)], "record 1: field 'source' must be a non-empty string"),
    ],
)
def test_bad_hhh_files(tmp_path: Path, data: object, says: str) -> None:
    path = write(tmp_path, "bad.json", json.dumps(data))
    with pytest.raises(InputError) as exc:
        load_hhh_alignment(path)
    text = str(exc.value)
    assert "\n" not in text and text.startswith(f"{path}: ") and says in text


def test_bad_models_and_paths(tmp_path: Path) -> None:
    path = write(tmp_path, "a.jsonl", autoj_line() + "\n")
    for models, says in [
        (("same", "SAME"), "need two names"),
        (("ok", "not ok"), "invalid model name"),
        (("only",), "has 2 models, got 1"),
    ]:
        with pytest.raises(InputError, match=says):
            load_autoj_pairwise(path, models)
    with pytest.raises(InputError) as exc:
        load_pairwise_set(str(tmp_path / "missing.jsonl"))
    assert "missing.jsonl" in str(exc.value)
