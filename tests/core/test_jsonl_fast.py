"""The JSON Lines reader's fast path (the C scanner called directly) takes exactly what
``json.loads`` with its checks takes, and leaves every other line to the slow path's
error (issue 24: validation at 10M lines)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flask_eval.core.errors import InputError
from flask_eval.core.jsonl import _parse_fast, parse_object, read_json_lines

pytestmark = pytest.mark.unit

LINES = [
    '{"question_id": 1, "text": "plain"}\n',
    '{"question_id": 1, "text": "plain"}\r\n',
    '{"question_id": 1, "text": "plain"}',
    '{"question_id": 1, "text": "plain"}  \t\r\n',
    '  {"question_id": 1, "text": "leading spaces"}\n',
    '\t{"a": 1}\n',
    '{"a": 1} {"b": 2}\n',  # two objects on a line
    '{"a": 1}\x0b\n',  # a whitespace JSON does not know
    '{"a": 1}\u2028\n',
    '{"a": 1, "a": 2}\n',  # a key twice
    '{"a": {"b": 1, "b": 2}}\n',  # nested, twice
    '{"a": 1, "\\u0061": 2}\n',  # the same key, escaped
    '{"text": "nul \\u0000 here"}\n',
    '{"text": "lone \\ud800 surrogate"}\n',
    '{"text": "a pair \\ud83d\\ude00 is fine"}\n',
    '{"text": "a backslash \\\\u0000 is text"}\n',
    '{"\\u0000key": 1}\n',
    '{"a": NaN, "b": Infinity}\n',
    '{"a": [1, 2, {"c": "d"}], "e": null, "f": true}\n',
    "[1, 2, 3]\n",
    '"a string"\n',
    "3\n",
    '{"a": 1\n',  # truncated
    '{"a": "unterminated\n',
    '{"a": 1,}\n',
    "{'a': 1}\n",
    '\ufeff{"a": 1}\n',  # a BOM the reader did not remove
    '{"a": "tab\tin a string"}\n',  # a raw control character (strict JSON refuses it)
    '{"a": 1}\r',
    "{}\n",
    '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}\n",  # nested too deeply
    '{"n": 1' + "0" * 5000 + "}\n",  # more digits than Python converts
]


def outcome(parse: object, text: str) -> tuple[str, object]:
    try:
        return "ok", parse(text, "f.jsonl", 7)  # type: ignore[operator]
    except InputError as exc:
        return "error", str(exc)


@pytest.mark.parametrize("text", LINES, ids=range(len(LINES)))
def test_the_fast_path_parses_or_refuses_like_the_slow_one(text: str) -> None:
    fast, slow = outcome(_parse_fast, text), outcome(parse_object, text)
    assert fast == slow
    if slow[0] == "ok":  # and the value is what json.loads makes of the line
        assert slow[1] == json.loads(text)


def test_a_file_reads_the_same_through_either_path(tmp_path: Path) -> None:
    good = [line for line in LINES if outcome(parse_object, line)[0] == "ok"]
    path = tmp_path / "f.jsonl"
    path.write_text("".join(g if g.endswith("\n") else g + "\n" for g in good), "utf-8")
    read = [record for _, record in read_json_lines(str(path))]
    assert read == [json.loads(g) for g in good]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"a": 1}\n\n   \n{"a": 1, "a": 2}\n', "utf-8")
    with pytest.raises(InputError, match=r"bad\.jsonl:4: key 'a' appears twice"):
        list(read_json_lines(str(bad)))
