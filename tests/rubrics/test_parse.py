"""Table-driven tests of rubrics.parse: scores come only from the final [SCORES] line."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from flask_eval.rubrics.parse import Parsed, parse
from flask_eval.rubrics.protocol import scores_line

R = "Readability"
F = "Factuality"
LC = "Logical Correctness"


@dataclass(frozen=True)
class Case:
    id: str
    output: str
    skills: tuple[str, ...] = (R,)
    scores: dict[str, int | None] | None = None
    error: str | None = None  # a substring the error must contain
    allow_na: tuple[str, ...] | None = None
    extra: dict[str, object] = field(default_factory=dict)


RATIONALE = "Readability: the answer is clear and well structured.\n\n"

CASES = [
    # --- valid --------------------------------------------------------------------------
    Case("single", RATIONALE + '[SCORES] {"Readability": 4}', scores={R: 4}),
    Case(
        "multi",
        'Both fine.\n[SCORES] {"Readability": 5, "Factuality": 2, "Logical Correctness": 1}',
        skills=(R, F, LC),
        scores={R: 5, F: 2, LC: 1},
    ),
    Case("key order free", '[SCORES] {"Factuality": 3, "Readability": 4}', (R, F), {R: 4, F: 3}),
    Case("na allowed", '[SCORES] {"Readability": 4, "Factuality": "N/A"}', (R, F), {R: 4, F: None}),
    Case("na spelled NA", '[SCORES] {"Readability": "NA"}', scores={R: None}),
    Case("na lowercase", '[SCORES] {"Readability": "n/a"}', scores={R: None}),
    Case(
        "case-insensitive keys",
        '[SCORES] {"readability": 3, "FACTUALITY": 2}',
        (R, F),
        {R: 3, F: 2},
    ),
    Case("integral float", '[SCORES] {"Readability": 4.0}', scores={R: 4}),
    Case("numeric string", '[SCORES] {"Readability": "4"}', scores={R: 4}),
    Case("trailing whitespace", '[SCORES] {"Readability": 2}   \n\n  \n', scores={R: 2}),
    Case("trailing code fence", '```\n[SCORES] {"Readability": 2}\n```\n', scores={R: 2}),
    Case("line in backticks", '`[SCORES] {"Readability": 5}`', scores={R: 5}),
    Case("line in bold", '**[SCORES] {"Readability": 5}**', scores={R: 5}),
    Case("bold marker", '**[SCORES]** {"Readability": 1}', scores={R: 1}),
    Case("marker colon", '[SCORES]: {"Readability": 1}', scores={R: 1}),
    Case("object in backticks", '[SCORES] `{"Readability": 3}`', scores={R: 3}),
    Case("no space after marker", '[SCORES]{"Readability": 3}', scores={R: 3}),
    Case("protocol helper line", scores_line({R: 5, F: None}), (R, F), {R: 5, F: None}),
    # --- the final line wins over anything quoted earlier -----------------------------
    Case(
        "quoted Score: 5 and [RESULT] 5",
        'The response says "Score: 5" and "[RESULT] 5".\nIt is poor.\n[SCORES] {"Readability": 2}',
        scores={R: 2},
    ),
    Case(
        "fake dict earlier",
        'The response ends with {"Readability": 5}; ignore it.\n[SCORES] {"Readability": 1}',
        scores={R: 1},
    ),
    Case(
        "fake scores line earlier",
        'Quoted: [SCORES] {"Readability": 5, "Factuality": 5}\n'
        'My verdict follows.\n[SCORES] {"Readability": 2, "Factuality": 3}',
        (R, F),
        {R: 2, F: 3},
    ),
    Case(
        "multiple scores lines, last counts",
        '[SCORES] {"Readability": 5}\n[SCORES] {"Readability": 3}',
        scores={R: 3},
    ),
    # --- errors ---------------------------------------------------------------------------
    Case("empty output", "", error="empty output"),
    Case("whitespace only", "  \n\t\n", error="empty output"),
    Case("no marker", 'Readability: 4\n{"Readability": 4}', error="no final"),
    Case("score phrase only", "Overall, Score: 5", error="no final"),
    Case(
        "marker followed by prose",
        '[SCORES] {"Readability": 4}\nI hope this helps!',
        error="followed by other text",
    ),
    Case("trailing period", '[SCORES] {"Readability": 4}.', scores={R: 4}),
    Case("prose before marker", 'Final: [SCORES] {"Readability": 4}', error="no final"),
    Case("list item marker", '- [SCORES] {"Readability": 4}', error="no final"),
    Case("marker without object", "[SCORES] 4", error="no JSON object"),
    Case("bad json", '[SCORES] {"Readability": 4,}', error="invalid JSON"),
    Case("single quotes", "[SCORES] {'Readability': 4}", error="invalid JSON"),
    Case("two objects", '[SCORES] {"Readability": 4} {"Readability": 5}', error="invalid JSON"),
    Case("nan", '[SCORES] {"Readability": NaN}', error="invalid JSON"),
    Case("json array", '[SCORES] ["Readability", 4]', error="no JSON object"),
    Case("array around object", '[SCORES] [{"Readability": 4}]', error="no final"),
    Case(
        "out of range high",
        '[SCORES] {"Factuality": 7}',
        (F,),
        error="score out of range for Factuality: 7",
    ),
    Case(
        "out of range zero",
        '[SCORES] {"Readability": 0}',
        error="score out of range for Readability: 0",
    ),
    Case("out of range string", '[SCORES] {"Readability": "6"}', error="out of range"),
    Case("negative", '[SCORES] {"Readability": -1}', error="out of range"),
    Case("fractional float", '[SCORES] {"Readability": 4.5}', error="not an integer"),
    Case(
        "missing skill", '[SCORES] {"Factuality": 4}', (F, R), error="missing skills: Readability"
    ),
    Case(
        "extra skill", '[SCORES] {"Readability": 4, "Humor": 3}', error="unexpected skills: Humor"
    ),
    Case("duplicate key", '[SCORES] {"Readability": 4, "readability": 2}', error="twice"),
    Case(
        "na not allowed",
        '[SCORES] {"Factuality": "N/A"}',
        (F,),
        allow_na=(),
        error="N/A not allowed for Factuality",
    ),
    Case("null rejected", '[SCORES] {"Readability": null}', error="invalid score"),
    Case(
        "bool true rejected",
        '[SCORES] {"Readability": true}',
        error="invalid score for Readability: true",
    ),
    Case("bool false rejected", '[SCORES] {"Readability": false}', error="invalid score"),
    Case("word score", '[SCORES] {"Readability": "good"}', error="invalid score"),
    Case("string with suffix", '[SCORES] {"Readability": "4/5"}', error="invalid score"),
    Case("nested object", '[SCORES] {"Readability": {"score": 4}}', error="invalid score"),
    Case("list value", '[SCORES] {"Readability": [4]}', error="invalid score"),
    Case(
        "real line is malformed, earlier line is not used",
        '[SCORES] {"Readability": 5}\n[SCORES] {"Readability": 9}',
        error="out of range",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_parse_table(case: Case) -> None:
    result = parse(case.output, case.skills, allow_na=case.allow_na)
    if case.error is None:
        assert result.error is None, result.error
        assert result.scores == case.scores
        assert result.ok
    else:
        assert result.scores is None
        assert result.error is not None
        assert case.error in result.error
        assert len(result.error) < 200
        assert not result.ok


def test_table_is_large_enough() -> None:
    assert len(CASES) >= 30
    assert len({c.id for c in CASES}) == len(CASES)


def test_scores_use_canonical_names_in_request_order() -> None:
    result = parse('[SCORES] {"factuality": 2, "READABILITY": 5}', [R, F])
    assert result.scores is not None
    assert list(result.scores) == [R, F]


def test_scores_are_plain_ints() -> None:
    result = parse('[SCORES] {"Readability": 4.0, "Factuality": "3"}', [R, F])
    assert result.scores is not None
    assert all(type(v) is int for v in result.scores.values())


def test_na_allowed_only_for_named_skills() -> None:
    out = '[SCORES] {"Readability": "N/A", "Factuality": "N/A"}'
    assert parse(out, [R, F], allow_na=[R]).error == "N/A not allowed for Factuality"
    assert parse(out, [R, F], allow_na=[R, F]).scores == {R: None, F: None}


def test_missing_and_extra_reported_together() -> None:
    error = parse('[SCORES] {"Humor": 3}', [R]).error
    assert error == "missing skills: Readability; unexpected skills: Humor"


def test_error_stays_short_with_many_extra_keys() -> None:
    keys = ", ".join(f'"{"k" * 100}{i}": 1' for i in range(50))
    error = parse(f'[SCORES] {{"Readability": 4, {keys}}}', [R]).error
    assert error is not None and error.startswith("unexpected skills: ")
    assert len(error) < 300


def test_no_final_line_message() -> None:
    assert parse("Score: 5", [R]).error == 'no final "[SCORES] {...}" line'


def test_parsed_requires_exactly_one_field() -> None:
    with pytest.raises(ValueError):
        Parsed(scores=None, error=None)
    with pytest.raises(ValueError):
        Parsed(scores={R: 4}, error="x")


@pytest.mark.parametrize("skills", [[], [R, "readability"]])
def test_bad_requested_skills(skills: list[str]) -> None:
    with pytest.raises(ValueError):
        parse('[SCORES] {"Readability": 4}', skills)
