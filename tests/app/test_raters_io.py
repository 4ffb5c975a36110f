"""Ratings files (app/raters_io.py) and their check against a run (app/raters.py
read_scores): each bad line an error at FILE:LINE, whatever the format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import update

from flask_eval.app.raters import read_scores, run_scale
from flask_eval.app.raters_io import file_format, read_ratings, read_score
from flask_eval.core.errors import InputError, Status
from flask_eval.core.types import Instance, JudgeConfig, Response, ResponseSet
from flask_eval.storage.models import JUDGMENT
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store

J = JUDGMENT.c
JUDGES = ("memory/j1", "memory/j2")
MODELS = ("alpha", "beta")
CRITERIA = ("Factuality", "Harmlessness")  # Harmlessness may be N/A
HEADER = "model,instance,criterion,score,rater,rationale\n"


def skill(name: str, allow_na: bool) -> dict[str, object]:
    rubric = {str(k): f"level {k}" for k in range(1, 6)}
    return {"name": name, "ability": "a", "criterion": name, "rubric": rubric, "allow_na": allow_na}


def make_run(
    store: Store,
    n: int = 6,
    *,
    name: str = "r1",
    pairs: list[tuple[str, str]] | None = None,
    judges: tuple[str, ...] = JUDGES,
) -> RunInfo:
    """A run of ``n`` instances ("0".."n-1", each judged on both criteria) answered by
    alpha and beta (absolute, or the ordered ``pairs``), its judges' rows pending."""
    instances = [Instance(str(i), f"question {i}", f"answer {i}", CRITERIA) for i in range(n)]
    sets = [
        ResponseSet(m, f"{m}.jsonl", tuple(Response(m, i.id, f"{m} on {i.id}") for i in instances))
        for m in MODELS
    ]
    config = {
        "judges": [JudgeConfig(j, j).to_data() for j in judges],
        "skills": [skill(CRITERIA[0], False), skill(CRITERIA[1], True)],
        "mode": "instance",
        "models": list(MODELS),
        **({"pairwise": {"plan": "all", "swap": False}} if pairs else {}),
    }
    run, created = store.create_run(
        name=name,
        fingerprint="f" * 64,
        mode="instance",
        config=config,
        instances=instances,
        response_sets=sets,
        judges=list(judges),
        pairs=pairs,
    )
    assert created
    return run


def set_scores(store: Store, run_id: int, judge: str, scores: dict[tuple[str, str], int]) -> None:
    """Mark ``judge``'s rows done with ``scores[(instance, criterion)]`` (every model)."""
    with store.engine.begin() as conn:
        for (instance_id, criterion), score in scores.items():
            conn.execute(
                update(JUDGMENT)
                .where(
                    J.run_id == run_id,
                    J.judge == judge,
                    J.instance_id == instance_id,
                    J.criterion == criterion,
                )
                .values(status=Status.DONE.value, score=score)
            )


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'ratings.db'}")


def test_format_by_extension_then_by_content(tmp_path: Path) -> None:
    assert file_format(write(tmp_path, "a.csv", '{"x": 1}\n')) == "csv"
    assert file_format(write(tmp_path, "a.jsonl", "model\n")) == "jsonl"
    assert file_format(write(tmp_path, "a.txt", '\n {"model": "alpha"}\n')) == "jsonl"
    assert file_format(write(tmp_path, "a", HEADER)) == "csv"


def test_csv_and_jsonl_read_alike(tmp_path: Path) -> None:
    csv_path = write(
        tmp_path,
        "r.csv",
        HEADER + 'alpha,0,Factuality,4,alice,"fine, really"\n\nbeta,1,Harmlessness,N/A,bob,\n',
    )
    jsonl_path = write(
        tmp_path,
        "r.jsonl",
        json.dumps(
            {
                "model": "alpha",
                "instance": "0",
                "criterion": "Factuality",
                "score": 4,
                "rater": "alice",
                "rationale": "fine, really",
            }
        )
        + "\n\n"
        + json.dumps(
            {
                "model": "beta",
                "instance": 1,
                "criterion": "Harmlessness",
                "score": None,
                "rater": "bob",
            }
        )
        + "\n",
    )
    by_csv, by_jsonl = read_ratings(csv_path), read_ratings(jsonl_path)
    assert [(r.line, r.key, r.rationale) for r in by_csv] == [
        (2, ("alice", "alpha", "", "0", "Factuality"), "fine, really"),
        (4, ("bob", "beta", "", "1", "Harmlessness"), None),
    ]
    assert [(r.key, r.rationale) for r in by_jsonl] == [(r.key, r.rationale) for r in by_csv]
    assert [r.line for r in by_jsonl] == [1, 3]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("model,instance,criterion,score\n", 1, "missing column 'rater'"),
        ("model,instance,criterion,score,rater,judge\n", 1, "unknown column 'judge'"),
        ("model,model,instance,criterion,score,rater\n", 1, "appears twice"),
        (HEADER + "alpha,0,Factuality,4,alice,x,y\n", 2, "7 fields where the header names 6"),
        (HEADER + "alpha,0,Factuality,4,al ice,\n", 2, "invalid rater name"),
        (HEADER + "alpha,0,Factuality,4,panel,\n", 2, "invalid rater name"),
        (HEADER + "alpha,,Factuality,4,alice,\n", 2, "instance is empty"),
        (HEADER + "m" * 65 + ",0,Factuality,4,alice,\n", 2, "model is longer than 64"),
        (HEADER + "alpha,0,Factuality,4,alice," + "w" * 20_001 + "\n", 2, "rationale is longer"),
        (HEADER + "alpha,0,Fact\x01,4,alice,\n", 2, "control character"),
        (
            HEADER + "alpha,0,Factuality,4,alice,\nbeta,0,Factuality,4,alice,\n"
            "alpha,0,Factuality,2,alice,\n",
            4,
            "(line 2 has one)",
        ),
        (HEADER, None, "no ratings"),
    ],
)
def test_a_bad_csv_line_is_an_error_at_its_line(
    tmp_path: Path, text: str, line: int | None, message: str
) -> None:
    path = write(tmp_path, "bad.csv", text)
    with pytest.raises(InputError) as caught:
        read_ratings(path)
    assert (caught.value.path, caught.value.line) == (path, line)
    assert message in caught.value.message
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"model": "alpha", "instance": "0", "criterion": "Factuality", "score": 4}, "missing key"),
        (
            {"model": 3, "instance": "0", "criterion": "F", "score": 4, "rater": "a"},
            "model must be a string, not number",
        ),
        (
            {"model": "alpha", "instance": "0", "criterion": "F", "score": True, "rater": "a"},
            "score must be an integer, a verdict or N/A, not boolean",
        ),
        (
            {"model": "alpha", "instance": "0", "criterion": "F", "score": 4, "rater": "a", "x": 1},
            "unknown key 'x'",
        ),
    ],
)
def test_a_bad_jsonl_line_is_an_error_at_its_line(
    tmp_path: Path, record: dict[str, object], message: str
) -> None:
    good = {"model": "alpha", "instance": "0", "criterion": "F", "score": 4, "rater": "a"}
    path = write(tmp_path, "bad.jsonl", json.dumps(good) + "\n" + json.dumps(record) + "\n")
    with pytest.raises(InputError) as caught:
        read_ratings(path)
    assert (caught.value.line, message in caught.value.message) == (2, True), caught.value


@pytest.mark.parametrize(
    ("raw", "pairwise", "allow_na", "expected"),
    [
        (3, False, False, 3),
        (" 5 ", False, False, 5),
        ("N/A", False, True, None),
        ("na", False, True, None),
        ("", False, True, None),
        (None, False, True, None),
        ("A", True, False, 1),
        ("b", True, False, 2),
        ("TIE", True, False, 3),
        (2, True, False, 2),
        ("3", True, False, 3),
    ],
)
def test_scores_read(
    raw: int | str | None, pairwise: bool, allow_na: bool, expected: int | None
) -> None:
    assert read_score(raw, pairwise, 1, 5, allow_na) == expected


@pytest.mark.parametrize(
    ("raw", "pairwise", "allow_na", "message"),
    [
        (0, False, True, "not on the run's scale 1-5"),
        ("6", False, True, "not on the run's scale 1-5"),
        ("4.5", False, True, "invalid score"),
        ("N/A", False, False, "N/A is not allowed"),
        (None, False, False, "N/A is not allowed"),
        ("N/A", True, True, "invalid verdict"),
        (4, True, False, "invalid verdict"),
        ("first", True, False, "invalid verdict"),
    ],
)
def test_bad_scores_say_what_is_expected(
    raw: int | str | None, pairwise: bool, allow_na: bool, message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        read_score(raw, pairwise, 1, 5, allow_na)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("gamma,0,Factuality,4,alice,", "unknown model 'gamma': run 'r1' has 'alpha', 'beta'"),
        ("alpha,99,Factuality,4,alice,", "unknown instance '99' in run 'r1'"),
        ("alpha,0,Depth,4,alice,", "unknown criterion 'Depth' of instance '0'"),
        ("alpha,0,Factuality,N/A,alice,", "N/A is not allowed"),
        ("alpha,0,Factuality,7,alice,", "not on the run's scale 1-5"),
    ],
)
def test_lines_are_checked_against_the_run(
    store: Store, tmp_path: Path, line: str, message: str
) -> None:
    run = make_run(store)
    path = write(tmp_path, "r.csv", HEADER + "alpha,0,Harmlessness,N/A,alice,\n" + line + "\n")
    with pytest.raises(InputError) as caught:
        read_scores(store, run, read_ratings(path), path)
    assert caught.value.line == 3 and message in caught.value.message, caught.value


def test_pairwise_lines_name_a_comparison_of_the_run(database_url: str, tmp_path: Path) -> None:
    store = Store(database_url)
    run = make_run(store, pairs=[("alpha", "beta")])
    head = "model,model_b,instance,criterion,score,rater\n"
    good = "alpha,beta,0,Factuality,A,alice\nalpha,beta,1,Factuality,tie,alice\n"
    path = write(tmp_path, "ok.csv", head + good)
    assert read_scores(store, run, read_ratings(path), path) == [1, 3]
    for bad, message in (
        ("beta,alpha,0,Factuality,A,bob", "does not compare 'beta' with 'alpha' (in that order)"),
        ("alpha,,0,Factuality,4,bob", "compares responses in pairs: give model_b"),
        ("alpha,beta,0,Factuality,5,bob", "invalid verdict"),
    ):
        path = write(tmp_path, "bad.csv", head + good + bad + "\n")
        with pytest.raises(InputError) as caught:
            read_scores(store, run, read_ratings(path), path)
        assert caught.value.line == 4 and message in caught.value.message, caught.value


def test_an_absolute_run_refuses_model_b(store: Store, tmp_path: Path) -> None:
    run = make_run(store)
    path = write(
        tmp_path,
        "r.csv",
        "model,model_b,instance,criterion,score,rater\nalpha,beta,0,Factuality,A,a\n",
    )
    with pytest.raises(InputError, match="grades each response alone: leave model_b empty"):
        read_scores(store, run, read_ratings(path), path)


def test_the_scale_is_the_judges_protocols(store: Store) -> None:
    run = make_run(store)
    assert (run_scale(run).low, run_scale(run).high) == (1, 5)


def test_an_unknown_instance_is_named_as_such(store: Store, tmp_path: Path) -> None:
    run = make_run(store)
    path = write(tmp_path, "r.csv", HEADER + "alpha,99,Factuality,4,alice,\n")
    with pytest.raises(InputError, match=r"r\.csv:2: unknown instance '99' in run 'r1'"):
        read_scores(store, run, read_ratings(path), path)
