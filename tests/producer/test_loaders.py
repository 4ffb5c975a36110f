"""Tests of producer.loaders / producer.inputs: the bad-input corpus, examples, real data."""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from flask_eval.core.errors import InputError
from flask_eval.core.limits import MAX_INSTANCE_ID
from flask_eval.core.types import DIFFICULTY_LABELS, DOMAINS
from flask_eval.producer.inputs import Inputs, load_inputs, parse_responses_arg
from flask_eval.producer.loaders import MAX_LINE_BYTES, load_instances
from flask_eval.producer.responses import load_responses
from tests.bad_input_cases import BAD, CASES, CLI_CASES, FLASK_SKILLS, REPO_ROOT, BadCase

EXAMPLES = REPO_ROOT / "flask_eval" / "examples"
SHARED = Path("/work/shared/flask-data")
CURRENT_SET = SHARED / "evaluation_set" / "flask_evaluation.jsonl"
OLDER_SET = SHARED / "history" / "612d031" / "evaluation_set" / "flask_evaluation.jsonl"
OUTPUTS = SHARED / "model_output" / "outputs"


def _run(case: BadCase) -> Inputs:
    responses = [parse_responses_arg(arg) for arg in case.responses]
    return load_inputs(case.instances, responses, FLASK_SKILLS)


def _write(path: Path, records: Sequence[object]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def _instance(idx: object = 1, **fields: object) -> dict[str, object]:
    record: dict[str, object] = {
        "idx": idx,
        "instruction": "Add 2 and 3.",
        "answer": "5",
        "skill": ["Logical Correctness", "Conciseness"],
        "domain": ["Math"],
        "difficulty": "simple lifestyle knowledge",
    }
    record.update(fields)
    return record


# --------------------------------------------------------------------------- corpus


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_case(case: BadCase, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO_ROOT)
    with pytest.raises(InputError) as info:
        _run(case)
    err = info.value
    text = str(err)
    if case.where:
        assert text.startswith(case.where + ": "), text
    else:
        assert err.path is None and err.line is None, text
    assert case.message in text, text
    assert "\n" not in text and len(text) < 600, text


def test_corpus_is_complete_and_used() -> None:
    assert len(CASES) >= 50
    assert len({c.id for c in CASES}) == len(CASES)
    everything = CASES + CLI_CASES
    used = {Path(c.instances).name for c in everything}
    used |= {Path(arg.partition("=")[2]).name for c in everything for arg in c.responses}
    used |= {Path(arg).name for c in everything for arg in c.args}
    files = {p.name for p in (REPO_ROOT / BAD).iterdir()}
    assert len(files) >= 90
    assert files <= used, f"corpus files without a case: {sorted(files - used)}"


# --------------------------------------------------------------------------- examples


def test_examples_load() -> None:
    inputs = load_inputs(
        str(EXAMPLES / "instances.jsonl"),
        [
            ("model_a", str(EXAMPLES / "model_a.jsonl")),
            ("model_b", str(EXAMPLES / "model_b.jsonl")),
        ],
        FLASK_SKILLS,
    )
    total = len(inputs.instances)
    assert total >= 24
    assert inputs.coverage() == {"model_a": (total, total), "model_b": (total - 2, total)}
    assert [len(v) for v in inputs.missing().values()] == [0, 2]
    levels = Counter(i.difficulty for i in inputs.instances)
    assert set(levels) == {1, 2, 3, 4, 5} and min(levels.values()) >= 3
    domains = Counter(d for i in inputs.instances for d in i.domains)
    assert len(domains) >= 6 and set(domains) <= set(DOMAINS)
    assert sum(1 for i in inputs.instances if len(i.domains) == 2) >= 3
    assert sum(1 for i in inputs.instances if not i.domains) <= 1
    skills = Counter(s for i in inputs.instances for s in i.skills)
    assert set(skills) == set(FLASK_SKILLS) and min(skills.values()) >= 2
    model_b = inputs.response_sets[1]
    assert sum(1 for r in model_b.responses if r.text == "") == 1
    assert all(r.model == "model_b" for r in model_b.responses)


# --------------------------------------------------------------------------- public data

needs_data = pytest.mark.skipif(not CURRENT_SET.exists(), reason="public FLASK data absent")


@needs_data
def test_current_schema_public_set() -> None:
    instances = load_instances(str(CURRENT_SET), FLASK_SKILLS)
    assert len(instances) == 1740
    assert [i.id for i in instances[:3]] == ["1", "2", "3"]
    levels = Counter(i.difficulty for i in instances)
    assert levels == {3: 444, 4: 442, 1: 388, 2: 278, 5: 186, None: 2}
    assert sum(1 for i in instances if not i.domains) == 3
    assert all(1 <= len(i.skills) <= 3 for i in instances)
    assert all(i.line == n for n, i in enumerate(instances, start=1))


@pytest.mark.skipif(not OLDER_SET.exists(), reason="public FLASK data absent")
def test_older_schema_public_set() -> None:
    instances = load_instances(str(OLDER_SET), FLASK_SKILLS)
    assert len(instances) == 1700
    by_id = {i.id: i for i in instances}
    assert by_id["259"].domains == ("Math",)  # its stray "domain" string field is ignored
    assert Counter(i.difficulty for i in instances)[None] == 0


@needs_data
def test_public_responses_and_speed() -> None:
    files = sorted(glob.glob(str(OUTPUTS / "*.jsonl")))
    assert len(files) == 15
    start = time.process_time()  # CPU time: the tests run in parallel on a shared machine
    inputs = load_inputs(str(CURRENT_SET), [(Path(f).stem, f) for f in files], FLASK_SKILLS)
    elapsed = time.process_time() - start
    assert elapsed < 2.0, f"loading took {elapsed:.2f}s of CPU"
    assert all(cov == (1700, 1740) for cov in inputs.coverage().values())
    davinci = next(rs for rs in inputs.response_sets if rs.model == "davinci_003")
    assert sum(1 for r in davinci.responses if r.text == "") == 22


# --------------------------------------------------------------------------- details


def test_unknown_markers(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "i.jsonl",
        [
            _instance(1, domain=["-1"], difficulty=-1),
            _instance(2, domain=["Health", -1], difficulty="-1"),
            _instance(3, domain=[], difficulty=3),
            _instance("q-4", domain=["Math", "Coding"], difficulty="Expert level  knowledge"),
        ],
    )
    got = [(i.id, i.domains, i.difficulty) for i in load_instances(path, FLASK_SKILLS)]
    assert got == [
        ("1", (), None),
        ("2", ("Health",), None),
        ("3", (), 3),
        ("q-4", ("Math", "Coding"), 5),
    ]


def test_difficulty_labels_map_to_levels(tmp_path: Path) -> None:
    records = [_instance(n, difficulty=label) for n, label in enumerate(DIFFICULTY_LABELS, 1)]
    instances = load_instances(_write(tmp_path / "i.jsonl", records), FLASK_SKILLS)
    assert [i.difficulty for i in instances] == [1, 2, 3, 4, 5]


def test_older_schema_record(tmp_path: Path) -> None:
    record = {
        "question_id": 7,
        "text": "Add 2 and 3.",
        "answer": "",
        "metrics": ["Factuality"],
        "domain_labeled": ["Math", "-1"],
        "difficulty_labeled": "major level knowledge",
        "domain": "Social Sciences",
        "num_skills": 1,
    }
    (inst,) = load_instances(_write(tmp_path / "i.jsonl", [record]), FLASK_SKILLS)
    assert (inst.id, inst.instruction, inst.answer) == ("7", "Add 2 and 3.", "")
    assert (inst.skills, inst.domains, inst.difficulty) == (("Factuality",), ("Math",), 4)


def test_empty_responses_and_extra_fields(tmp_path: Path) -> None:
    inst = _write(tmp_path / "i.jsonl", [_instance(1), _instance("two")])
    resp = _write(
        tmp_path / "r.jsonl",
        [{"question_id": 1, "text": "", "model_id": "x"}, {"question_id": "two", "text": "5"}],
    )
    rs = load_responses("m", resp, {"1", "two"})
    assert [(r.instance_id, r.text, r.line) for r in rs.responses] == [
        ("1", "", 1),
        ("two", "5", 2),
    ]
    inputs = load_inputs(inst, [("m", resp)], FLASK_SKILLS)
    assert inputs.coverage() == {"m": (2, 2)}
    with pytest.raises(dataclasses.FrozenInstanceError):
        inputs.instances = ()  # type: ignore[misc]


def test_int_and_string_ids_collide(tmp_path: Path) -> None:
    path = _write(tmp_path / "i.jsonl", [_instance(1), _instance("1")])
    with pytest.raises(
        InputError, match=r"i\.jsonl:2: duplicate instance id '1' \(first on line 1\)"
    ):
        load_instances(path, FLASK_SKILLS)


def test_crlf_bom_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "i.jsonl"
    body = "\r\n".join(["", json.dumps(_instance(1)), "", json.dumps(_instance(2)), ""])
    path.write_bytes(b"\xef\xbb\xbf" + body.encode())
    assert [i.line for i in load_instances(str(path), FLASK_SKILLS)] == [2, 4]


def test_line_length_limit(tmp_path: Path) -> None:
    base = json.dumps(_instance(2, answer=""))
    pad = MAX_LINE_BYTES - len(base)
    exact = json.dumps(_instance(2, answer="x" * pad))
    assert len(exact) == MAX_LINE_BYTES
    path = tmp_path / "i.jsonl"
    path.write_text(json.dumps(_instance(1)) + "\n" + exact + "\n", encoding="utf-8")
    assert len(load_instances(str(path), FLASK_SKILLS)) == 2
    too_long = json.dumps(_instance(2, answer="x" * (pad + 1)))
    path.write_text(json.dumps(_instance(1)) + "\n" + too_long, encoding="utf-8")
    with pytest.raises(InputError, match=r"i\.jsonl:2: line is longer than 1048576 bytes"):
        load_instances(str(path), FLASK_SKILLS)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs a non-root POSIX user")
def test_unreadable_file(tmp_path: Path) -> None:
    path = Path(_write(tmp_path / "i.jsonl", [_instance(1)]))
    path.chmod(0)
    with pytest.raises(InputError, match="permission denied") as info:
        load_instances(str(path), FLASK_SKILLS)
    assert info.value.line is None


def test_known_skills_set_is_listed_sorted(tmp_path: Path) -> None:
    path = _write(tmp_path / "i.jsonl", [_instance(1, skill=["factuality"])])
    with pytest.raises(InputError) as info:
        load_instances(path, {"Readability", "Factuality"})
    assert str(info.value).endswith(
        "unknown skill 'factuality' (did you mean 'Factuality'?); "
        "valid skills: Factuality, Readability"
    )


def test_schema_of_first_record_missing_id(tmp_path: Path) -> None:
    path = _write(tmp_path / "i.jsonl", [{"answer": "5"}])
    with pytest.raises(InputError, match=r"i\.jsonl:1: missing field 'idx'; a FLASK instance"):
        load_instances(path, FLASK_SKILLS)


def test_parse_responses_arg() -> None:
    assert parse_responses_arg("gpt-4.1_x=out/a=b.jsonl") == ("gpt-4.1_x", "out/a=b.jsonl")
    assert parse_responses_arg("m" * 64 + "=p") == ("m" * 64, "p")
    for bad in ["m" * 65 + "=p", ".hidden=p", "=p", "a/b=p", "é=p"]:
        with pytest.raises(InputError, match="invalid model name") as info:
            parse_responses_arg(bad)
        assert repr(bad) in str(info.value) and info.value.path is None


def test_load_inputs_argument_errors() -> None:
    with pytest.raises(InputError, match="no responses files given"):
        load_inputs(str(EXAMPLES / "instances.jsonl"), [], FLASK_SKILLS)
    a = str(EXAMPLES / "model_a.jsonl")
    with pytest.raises(InputError, match="duplicate model name 'Model_A'"):
        load_inputs(
            str(EXAMPLES / "instances.jsonl"), [("model_a", a), ("Model_A", a)], FLASK_SKILLS
        )
    with pytest.raises(InputError, match="invalid model name"):
        load_inputs(str(EXAMPLES / "instances.jsonl"), [("no spaces", a)], FLASK_SKILLS)


# --------------------------------------------------------------------------- what is stored


def test_ids_up_to_the_column_length_and_valid_unicode_are_accepted(tmp_path: Path) -> None:
    """The limits are exact (an id of MAX_INSTANCE_ID characters fits both databases) and
    the text checks refuse only NUL and lone surrogates: a surrogate pair, raw non-ASCII
    and an escaped U+2028 are text like any other."""
    longest = "i" * MAX_INSTANCE_ID
    records = [
        _instance(longest, answer="emoji \ud83d\ude00 and caf\u00e9"),  # a pair, once dumped
        _instance(10 ** (MAX_INSTANCE_ID - 1), instruction="line\u2028separator ünïcode"),
    ]
    path = tmp_path / "i.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")  # \\u escapes
    first, second = load_instances(str(path), FLASK_SKILLS)
    assert first.id == longest and first.answer == "emoji \U0001f600 and café"
    assert len(second.id) == MAX_INSTANCE_ID and "\u2028" in second.instruction


def test_a_backslash_before_u0000_is_text_not_a_nul(tmp_path: Path) -> None:
    path = _write(tmp_path / "i.jsonl", [_instance(1, answer="C:\\u0000 is a path")])
    (inst,) = load_instances(path, FLASK_SKILLS)
    assert inst.answer == "C:\\u0000 is a path"


def test_nul_and_surrogates_are_refused_in_any_field(tmp_path: Path) -> None:
    """Also in fields the loader ignores and in keys: the check is one walk of the line."""
    for raw, where in [
        ('"task": "a\\u0000"', "field 'task'"),
        ('"nested": {"deep": ["x", "\\udfff"]}', "field 'nested'.'deep'[1]"),
        ('"k\\u0000ey": 1', "a key of the object"),
    ]:
        line = json.dumps(_instance(1))[:-1] + ", " + raw + "}"
        path = tmp_path / "i.jsonl"
        path.write_text(line + "\n")
        with pytest.raises(InputError) as info:
            load_instances(str(path), FLASK_SKILLS)
        assert str(info.value).startswith(f"{path}:1: {where} contains"), str(info.value)


@pytest.mark.timeout(10)
def test_a_fifo_is_refused_without_being_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "i.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=r"is a named pipe \(FIFO\), not a regular file"):
        load_instances(str(fifo), FLASK_SKILLS)


def test_check_run_name() -> None:
    from flask_eval.core.limits import MAX_RUN_NAME
    from flask_eval.producer.inputs import check_run_name

    assert check_run_name("r" * MAX_RUN_NAME) == "r" * MAX_RUN_NAME
    for bad, message in [
        ("", "non-empty"),
        ("r" * (MAX_RUN_NAME + 1), f"longer than {MAX_RUN_NAME} characters"),
        ("a\x00b", "NUL"),
        ("a\udcffb", "lone UTF-16 surrogate"),
        ("a\nb", "control character"),
    ]:
        with pytest.raises(InputError, match=message) as info:
            check_run_name(bad)
        assert len(str(info.value)) < 200


# --------------------------------------------------------------------------- reference files


@pytest.mark.timeout(10)
@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_reference_files_must_be_regular_files(tmp_path: Path, suffix: str) -> None:
    from flask_eval.report import references

    fifo = tmp_path / f"fifo{suffix}"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=r"is a named pipe \(FIFO\)"):
        references.load("human", str(fifo))
    zero = tmp_path / f"zero{suffix}"
    zero.symlink_to("/dev/zero")
    with pytest.raises(InputError, match="is a character device"):
        references.load("human", str(zero))
    (tmp_path / f"dir{suffix}").mkdir()
    with pytest.raises(InputError, match="is a directory"):
        references.load("human", str(tmp_path / f"dir{suffix}"))


HEADER = "model,instance_id,skill,score\n"


@pytest.mark.parametrize(
    ("suffix", "content", "message"),
    [
        (".csv", HEADER + "m,1,F,3\nm,2\x00,F,4\n", ":3: field 'instance_id' contains a NUL"),
        (
            ".jsonl",
            '{"model": "m", "instance_id": "\\ud800", "skill": "F", "score": 3}\n',
            ":1: field 'instance_id' contains a lone UTF-16 surrogate",
        ),
        (
            ".jsonl",
            '{"model": "m", "model": "n", "instance_id": 1, "skill": "F", "score": 3}\n',
            ":1: key 'model' appears twice",
        ),
        (".csv", HEADER + 'm,1,F,"' + "x" * 200_000 + '"\n', ":2: invalid CSV: field larger"),
        (".csv", HEADER + "m,1,F," + "9" * 5000 + "\n", "score must be finite, got '9999"),
        (".csv", HEADER + "m,1,F,3\nm,1,F,4\n", "duplicate score for ('m', '1', 'F')"),
    ],
)
def test_bad_reference_files(tmp_path: Path, suffix: str, content: str, message: str) -> None:
    from flask_eval.report import references

    path = tmp_path / f"ref{suffix}"
    path.write_bytes(content.encode("utf-8", "surrogatepass"))
    with pytest.raises(InputError) as info:
        references.load("human", str(path))
    assert message in str(info.value) and len(str(info.value)) < 300, str(info.value)


def test_reference_files_with_bom_quoted_newlines_and_line_separators(tmp_path: Path) -> None:
    """CSV rows are numbered by their first physical line; a U+2028 inside a JSON string
    is not a line break (str.splitlines would split there)."""
    from flask_eval.report import references

    csv_path = tmp_path / "ref.csv"
    csv_path.write_bytes(b"\xef\xbb\xbf" + (HEADER + 'm,"multi\nline",F,3\nm,2,F,n/a\n').encode())
    ref = references.load("human", str(csv_path))
    assert [(s.instance_id, s.score, s.line) for s in ref.scores] == [
        ("multi\nline", 3.0, 2),
        ("2", None, 4),
    ]
    jsonl = tmp_path / "ref.jsonl"
    row = {"model": "m", "instance_id": "a\u2028b", "skill": "F", "score": 2}
    jsonl.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    assert references.load("human", str(jsonl)).scores[0].instance_id == "a\u2028b"


# --------------------------------------------------------------------------- optional fields

HARD_SET = SHARED / "evaluation_set" / "flask_hard_evaluation.jsonl"
_LEVELS = {str(k): f"level {k} of the instance" for k in range(1, 6)}
_PROMETHEUS_RUBRIC = {
    "criteria": "Does the LaTeX compile?",
    **{f"score{k}_description": f"level {k}" for k in range(1, 6)},
}


def test_system_prompt_criteria_and_instance_rubrics(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "i.jsonl",
        [
            _instance(
                1,
                system_prompt="You are terse.",
                rubrics={
                    "Logical Correctness": _PROMETHEUS_RUBRIC,
                    "Conciseness": {"criteria": "Short?", **_LEVELS},
                },
            ),
            _instance(2, criteria=["Factuality"], rubrics={"Factuality": _LEVELS}),
            _instance(3, rubrics={}),
        ],
    )
    first, second, third = load_instances(path, FLASK_SKILLS)
    assert first.system_prompt == "You are terse."
    assert first.rubrics["Logical Correctness"].criteria == "Does the LaTeX compile?"
    assert dict(first.rubrics["Logical Correctness"].scores) == {
        k: f"level {k}" for k in range(1, 6)
    }
    assert first.rubrics["Conciseness"].criteria == "Short?"
    # "criteria" replaces the skill field; a rubric by score without criteria keeps the
    # skill's own criterion (criteria "")
    assert second.skills == ("Factuality",) and second.rubrics["Factuality"].criteria == ""
    assert second.rubrics["Factuality"].scores[5] == "level 5 of the instance"
    assert (third.system_prompt, dict(third.rubrics)) == ("", {})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"system_prompt": 3}, "field 'system_prompt' must be a string, got number"),
        ({"rubrics": []}, "field 'rubrics' must be an object mapping skill names to rubrics"),
        (
            {"rubrics": {"Harmlessness": _LEVELS}},
            "field 'rubrics': 'Harmlessness' is not one of this instance's skills "
            "(Logical Correctness, Conciseness)",
        ),
        ({"rubrics": {"conciseness": _LEVELS}}, "(did you mean 'Conciseness'?)"),
        ({"rubrics": {"Kindness": _LEVELS}}, "'Kindness' is not one of this instance's skills"),
        (
            {"rubrics": {"Conciseness": {k: v for k, v in _LEVELS.items() if k != "4"}}},
            "field 'rubrics', skill 'Conciseness': rubric is missing the text of score 4",
        ),
        (
            {"rubrics": {"Conciseness": {**_LEVELS, "2": 2}}},
            "rubric text of score 2 ('2') must be a non-empty string, got number",
        ),
        ({"rubrics": {"Conciseness": {**_LEVELS, "2": " "}}}, "got an empty string"),
        ({"rubrics": {"Conciseness": {**_LEVELS, "6": "x"}}}, "unknown rubric key '6'"),
        ({"rubrics": {"Conciseness": {**_LEVELS, "criteria": 1}}}, "rubric 'criteria' is not"),
        ({"rubrics": {"Conciseness": "be short"}}, "a rubric must be an object"),
        (
            {"rubrics": {"Conciseness": {**_PROMETHEUS_RUBRIC, "5": "x"}}},
            "unknown rubric key '5'",
        ),
        ({"criteria": ["Kindness"]}, "unknown skill 'Kindness'"),
        ({"criteria": "Conciseness"}, "field 'criteria' must be a list of skill names"),
    ],
)
def test_bad_optional_fields_name_file_and_line(
    tmp_path: Path, fields: dict[str, object], message: str
) -> None:
    path = _write(tmp_path / "i.jsonl", [_instance(1), _instance(2, **fields)])
    with pytest.raises(InputError) as info:
        load_instances(path, FLASK_SKILLS)
    text = str(info.value)
    assert text.startswith(f"{path}:2: "), text
    assert message in text, text
    assert "\n" not in text and len(text) < 600, text


def test_custom_criteria_mode_ignores_the_skill_field(tmp_path: Path) -> None:
    path = _write(tmp_path / "i.jsonl", [_instance(1), _instance(2, criteria=["Tone"])])
    loaded = load_instances(path, ["Tone", "Accuracy"], custom_criteria=True)
    assert [i.skills for i in loaded] == [("Tone", "Accuracy"), ("Tone",)]
    with pytest.raises(InputError, match=r"i\.jsonl:1: unknown skill 'Logical Correctness'"):
        load_instances(path, ["Tone", "Accuracy"])


@pytest.mark.skipif(not HARD_SET.exists(), reason="public FLASK data absent")
def test_flask_hard_public_set_has_no_instance_rubrics() -> None:
    instances = load_instances(str(HARD_SET), FLASK_SKILLS)
    assert len(instances) == 89
    assert all(not i.rubrics and i.system_prompt == "" for i in instances)
    assert Counter(i.difficulty for i in instances) == {5: 89}


def test_every_missing_field_of_a_line_is_named_at_once(tmp_path: Path) -> None:
    path = _write(tmp_path / "i.jsonl", [{"idx": 1, "instruction": "Name a prime."}])
    with pytest.raises(InputError) as info:
        load_instances(path, FLASK_SKILLS)
    assert str(info.value) == (
        f"{path}:1: missing fields 'answer', 'skill', 'domain', 'difficulty' (current FLASK "
        "schema: idx, instruction, answer, skill, domain, difficulty)"
    )


def test_a_reference_free_run_needs_no_answer(tmp_path: Path) -> None:
    record = {k: v for k, v in _instance(1).items() if k != "answer"}
    path = _write(tmp_path / "i.jsonl", [record])
    with pytest.raises(InputError, match="missing field 'answer'"):
        load_instances(path, FLASK_SKILLS)
    (instance,) = load_instances(path, FLASK_SKILLS, reference=False)
    assert instance.answer == ""


def test_custom_criteria_instances_need_an_id_and_an_instruction_only(tmp_path: Path) -> None:
    criteria = ("Clarity", "Empathy")
    path = _write(
        tmp_path / "i.jsonl",
        [
            {"idx": 1, "instruction": "Say hi."},
            {
                "idx": 2,
                "instruction": "Say bye.",
                "answer": "Bye.",
                "domain": ["Math"],
                "difficulty": 2,
                "criteria": ["Empathy"],
            },
        ],
    )
    first, second = load_instances(path, criteria, custom_criteria=True)
    assert (first.answer, first.skills, first.domains, first.difficulty) == ("", criteria, (), None)
    assert (second.answer, second.skills, second.domains, second.difficulty) == (
        "Bye.",
        ("Empathy",),
        ("Math",),
        2,
    )
    bad = _write(tmp_path / "b.jsonl", [{"idx": 1, "answer": "x"}, {"instruction": "y"}])
    with pytest.raises(InputError) as info:
        load_instances(bad, criteria, custom_criteria=True)
    assert str(info.value) == (
        f"{bad}:1: missing field 'instruction' (with --criteria an instance needs idx and "
        "instruction; answer, domain and difficulty are optional)"
    )
