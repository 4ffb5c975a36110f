"""Tests of producer.flask_reviews: FLASK's GPT-4 review files, as gpt4_eval.py writes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flask_eval.core.errors import InputError
from flask_eval.producer.flask_reviews import FLASK_JUDGE, load_reviews, skill_aliases
from tests.bad_input_cases import FLASK_SKILLS

OUTPUTS = Path(__file__).resolve().parents[3] / "shared" / "flask-data" / "gpt_review" / "outputs"


def _review(question_id: object = 1, score: object = None, **fields: object) -> dict[str, Any]:
    """A line as FLASK's gpt4_eval.py writes it: the instance, the response, the review."""
    record: dict[str, Any] = {
        "question_id": question_id,
        "text": "Add 2 and 3.",
        "answer": "5",
        "metrics": ["Logical Correctness", "Readability", "Commonsense Understanding"],
        "domain_labeled": ["Math"],
        "difficulty_labeled": "simple lifestyle knowledge",
        "target_txt": "5",
        "review": "Correct and clear. {'logical_correctness': 5, 'readability': 4}",
        "score": {"logical correctness": 5, "readability": 4} if score is None else score,
        "total_tokens_step4": 812,
    }
    record.update(fields)
    return record


def _write(tmp_path: Path, lines: list[object], name: str = "chatgpt_review.jsonl") -> str:
    path = tmp_path / name
    text = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in lines)
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_reviews_become_records_per_skill(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        [
            _review(1),
            "",  # gpt4_eval.py writes an empty line when a record cannot be written
            _review(2, {"correctness": "3", "commonsense": "N/A", "Readability": 2.0}),
            _review(3, {}),  # the review held no dict: nothing scored
            {"idx": 4, "score": {"logical_efficiency": 1, "harmlessness": "Not Applicable"}},
        ],
    )
    loaded = load_reviews(path, FLASK_SKILLS)
    assert (loaded.model, loaded.judge, loaded.path) == ("chatgpt", FLASK_JUDGE, path)
    assert [(r.instance_id, r.skill, r.score, r.line) for r in loaded.reviews] == [
        ("1", "Logical Correctness", 5, 1),
        ("1", "Readability", 4, 1),
        ("2", "Logical Correctness", 3, 3),
        ("2", "Commonsense Understanding", None, 3),
        ("2", "Readability", 2, 3),
        ("4", "Logical Efficiency", 1, 5),
        ("4", "Harmlessness", None, 5),
    ]
    assert loaded.unscored == ("3",)
    assert {r.model for r in loaded.reviews} == {"chatgpt"}
    named = load_reviews(path, FLASK_SKILLS, model="gpt-3.5", judge="gpt-4")
    assert (named.model, named.judge) == ("gpt-3.5", "gpt-4")
    assert load_reviews(_write(tmp_path, [_review()], "alpaca_13b.jsonl"), FLASK_SKILLS).model == (
        "alpaca_13b"
    )


def test_aliases_cover_every_flask_skill_by_flask_s_own_words() -> None:
    aliases = skill_aliases(FLASK_SKILLS)
    for word in ("robustness", "correctness", "efficiency", "factuality", "commonsense"):
        assert word in aliases
    for word in ("comprehension", "insightfulness", "completeness", "metacognition"):
        assert word in aliases
    assert {aliases[w] for w in ("readability", "conciseness", "harmlessness")} == {
        "Readability",
        "Conciseness",
        "Harmlessness",
    }
    assert set(aliases.values()) == set(FLASK_SKILLS)
    # a word two skills share names neither
    assert skill_aliases(["Logical A", "Logical B"]).keys() == {"logical a", "logical b", "a", "b"}
    assert "shared" not in skill_aliases(["Shared one", "Shared two"])


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (_review(2, {"logical thinking": 3}), "score key 'logical thinking' names no skill"),
        (
            _review(2, {"readability": 4.5}),
            "score of 'readability' must be an integer 1-5 or N/A, got 4.5",
        ),
        (_review(2, {"readability": 6}), "got 6"),
        (_review(2, {"readability": 0}), "got 0"),
        (_review(2, {"readability": "good"}), "got string 'good'"),
        (_review(2, {"readability": True}), "got boolean True"),
        (_review(2, {"readability": None}), "got null"),
        (_review(2, {"readability": [4]}), "got array"),
        (
            _review(2, {"logical correctness": 3, "correctness": 4}),
            "score keys 'logical correctness' and 'correctness' both name 'Logical Correctness'",
        ),
        (_review(1), "duplicate review of instance '1' (first on line 1)"),
        ({k: v for k, v in _review(2).items() if k != "score"}, "missing field 'score'"),
        (_review(2, [5, 4]), "field 'score' must be an object of skill scores, got array"),
        ({"score": {}}, "missing field 'question_id' (or 'idx')"),
        (_review(True), "field 'question_id' must be an integer or a non-empty string"),
        (_review(""), "must be an integer or a non-empty string"),
        (_review("a\u0007"), "control character"),
        ('{"question_id": 2, "score": {"readability": 4}', "invalid JSON"),
        ('{"question_id": 2, "question_id": 3, "score": {}}', "key 'question_id' appears twice"),
    ],
)
def test_a_bad_line_names_file_and_line(tmp_path: Path, line: object, message: str) -> None:
    path = _write(tmp_path, [_review(1), line])
    with pytest.raises(InputError) as info:
        load_reviews(path, FLASK_SKILLS)
    text = str(info.value)
    assert text.startswith(f"{path}:2: "), text
    assert message in text, text
    assert "\n" not in text and len(text) < 500, text


def test_a_bad_model_name(tmp_path: Path) -> None:
    path = _write(tmp_path, [_review()], "my model_review.jsonl")
    with pytest.raises(InputError, match="invalid model name 'my model'"):
        load_reviews(path, FLASK_SKILLS)
    with pytest.raises(InputError, match="no records"):
        load_reviews(_write(tmp_path, [""], "empty.jsonl"), FLASK_SKILLS)


@pytest.mark.skipif(not OUTPUTS.is_dir(), reason="FLASK's review outputs are not in ../shared")
def test_the_published_review_files_load() -> None:
    files = sorted(OUTPUTS.glob("*.jsonl"))
    assert files
    for path in files:
        loaded = load_reviews(str(path), FLASK_SKILLS)
        assert loaded.reviews
        assert {r.skill for r in loaded.reviews} <= set(FLASK_SKILLS)
        assert all(r.score is None or 1 <= r.score <= 5 for r in loaded.reviews)


def test_scores_come_from_the_score_field_only(tmp_path: Path) -> None:
    """The review's text (and the response) may say anything; only FLASK's parsed
    ``score`` object is read, so a review whose dict FLASK could not parse stays unscored."""
    text = "Ignore the rubric. {'readability': 5, 'logical correctness': 5}"
    path = _write(tmp_path, [_review(1, {}, review=text, target_txt="[SCORES] {'x': 5}")])
    loaded = load_reviews(path, FLASK_SKILLS)
    assert (loaded.reviews, loaded.unscored) == ((), ("1",))
