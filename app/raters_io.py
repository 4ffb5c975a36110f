"""People's ratings in and out of a run as files (``flask-eval raters import|export``).

A ratings file is CSV (a header line naming the columns) or JSON Lines (one object per
line), told by its extension (``.csv``; ``.jsonl``, ``.ndjson``, ``.json``) or else by
its first character (``{``: JSON Lines). Its columns (keys):

``model``, ``instance``, ``criterion``, ``score``, ``rater``; optionally ``rationale``,
and ``model_b`` for a pairwise run (the response ``model`` is compared with, the ledger's
order), whose ``score`` is then ``A`` (model better), ``B`` (model_b better) or ``tie``
(or 1, 2, 3); an absolute score is an integer on the run's scale, or ``N/A`` (or empty,
or JSON ``null``) where the criterion allows N/A.

An import is checked whole before anything is written: a line naming a model, instance
or criterion the run does not have, a bad score, a bad rater's name, an over-long field
or a second line for the same rater, item and criterion is an InputError at
``FILE:LINE``, and nothing is written. Its ratings are then stored as the rows of
``human/RATER`` (``storage.ratings.import_ratings``), once: a rating the ledger holds
already is left as it is, so importing a file again stores nothing new.

An export writes the people's ratings of a run in exactly that format, sorted by rater,
model, model_b, instance and criterion (so an export imported into a copy of the run
gives the same export). A flagged item (the rater could not judge it) is no rating: it
is listed only by ``export --flagged`` (model[, model_b], instance, rater, reason).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from flask_eval.core.errors import InputError
from flask_eval.core.files import MIB, read_text
from flask_eval.core.jsonl import json_type, read_json_lines
from flask_eval.core.limits import MAX_CRITERION_NAME, MAX_INSTANCE_ID, MAX_MODEL_NAME
from flask_eval.core.people import RaterNameError, check_rater_name
from flask_eval.core.text import clip, control_problem, text_problem

__all__ = [
    "COLUMNS",
    "MAX_RATIONALE",
    "OPTIONAL",
    "RatingLine",
    "file_format",
    "read_ratings",
]

#: the columns every line has, and those it may have
COLUMNS = ("model", "instance", "criterion", "score", "rater")
OPTIONAL = ("rationale", "model_b")
#: the longest rationale, in characters
MAX_RATIONALE = 20_000
#: the largest CSV file read (a JSON Lines file is read line by line)
MAX_CSV_BYTES = 256 * MIB
#: the extensions of each format
EXTENSIONS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}
#: the longest field of each kind, in characters
_LIMITS = {
    "model": MAX_MODEL_NAME,
    "model_b": MAX_MODEL_NAME,
    "instance": MAX_INSTANCE_ID,
    "criterion": MAX_CRITERION_NAME,
    "rationale": MAX_RATIONALE,
}
_INTEGER = re.compile(r"[+-]?[0-9]{1,9}")
#: the words of N/A (case-insensitive), and of each pairwise verdict
NA_WORDS = frozenset({"n/a", "na", ""})
VERDICT_WORDS = {"a": 1, "b": 2, "tie": 3, "1": 1, "2": 2, "3": 3}


@dataclass(frozen=True)
class RatingLine:
    """One line of a ratings file, as written (its score read against the run later)."""

    line: int
    rater: str
    model: str
    model_b: str
    instance_id: str
    criterion: str
    #: an integer, a text (a number, a verdict, N/A), or None (JSON null)
    score: int | str | None
    rationale: str | None

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return (self.rater, self.model, self.model_b, self.instance_id, self.criterion)


def file_format(path: str) -> str:
    """``csv`` or ``jsonl``: by the extension, else by the first character."""
    by_name = EXTENSIONS.get(os.path.splitext(path)[1].casefold())
    if by_name is not None:
        return by_name
    text = read_text(path, "a ratings file (CSV or JSON Lines)", MAX_CSV_BYTES)
    return "jsonl" if text.lstrip().startswith("{") else "csv"


def read_ratings(path: str) -> list[RatingLine]:
    """Every line of a ratings file, each checked on its own (the columns, the rater's
    name, the lengths) and against the others (one line per rater, item and criterion);
    InputError at ``path:line`` for the first problem."""
    fmt = file_format(path)
    records = _csv_records(path) if fmt == "csv" else _jsonl_records(path)
    lines: list[RatingLine] = []
    seen: dict[tuple[str, str, str, str, str], int] = {}
    for lineno, record in records:
        rating = _rating_line(record, path, lineno)
        first = seen.setdefault(rating.key, lineno)
        if first != lineno:
            raise InputError(
                f"a second rating by {rating.rater!r} of the same item and criterion "
                f"(line {first} has one): give each rating once",
                path,
                lineno,
            )
        lines.append(rating)
    if not lines:
        raise InputError(
            f"no ratings; expected the columns {', '.join(COLUMNS)} (CSV with a header "
            "line, or JSON Lines)",
            path,
        )
    return lines


def _csv_records(path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    text = read_text(path, "a CSV file of ratings", MAX_CSV_BYTES)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header: list[str] | None = None
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InputError(f"invalid CSV: {exc}", path, start) from None
        if not row or all(not field.strip() for field in row):
            continue
        if header is None:
            header = _header(row, path, start)
            continue
        if len(row) != len(header):
            raise InputError(f"{len(row)} fields where the header names {len(header)}", path, start)
        yield start, dict(zip(header, row, strict=True))


def _header(row: list[str], path: str, line: int) -> list[str]:
    names = [name.strip().removeprefix("\ufeff") for name in row]
    _check_keys(names, path, line, "column")
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise InputError(f"column {clip(twice)} appears twice in the header", path, line)
    return names


def _check_keys(names: list[str], path: str, line: int, what: str) -> None:
    unknown = [n for n in names if n not in COLUMNS and n not in OPTIONAL]
    if unknown:
        raise InputError(
            f"unknown {what} {clip(unknown[0])}: expected {', '.join(COLUMNS)} and "
            f"optionally {', '.join(OPTIONAL)}",
            path,
            line,
        )
    missing = [n for n in COLUMNS if n not in names]
    if missing:
        raise InputError(f"missing {what} {missing[0]!r}", path, line)


def _jsonl_records(path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    for lineno, record in read_json_lines(path, "a JSON Lines file of ratings"):
        _check_keys(list(record), path, lineno, "key")
        yield lineno, record


def _rating_line(record: Mapping[str, Any], path: str, line: int) -> RatingLine:
    def text(key: str, *, optional: bool = False) -> str:
        value = record.get(key)
        if value is None and optional:
            return ""
        if isinstance(value, int) and not isinstance(value, bool) and key == "instance":
            value = str(value)  # an instance id written as a JSON number
        if not isinstance(value, str):
            raise InputError(f"{key} must be a string, not {json_type(value)}", path, line)
        if not value and not optional:
            raise InputError(f"{key} is empty", path, line)
        limit = _LIMITS.get(key)
        if limit is not None and len(value) > limit:
            raise InputError(f"{key} is longer than {limit} characters", path, line)
        problem = text_problem(value) if key == "rationale" else control_problem(value)
        if problem is not None:
            raise InputError(f"{key} {problem}", path, line)
        return value

    rater = text("rater")
    try:
        check_rater_name(rater)
    except RaterNameError as exc:
        raise InputError(str(exc), path, line) from None
    score = record.get("score")
    if isinstance(score, bool) or not (score is None or isinstance(score, int | str)):
        raise InputError(
            f"score must be an integer, a verdict or N/A, not {json_type(score)}", path, line
        )
    if isinstance(score, str) and len(score) > 20:
        raise InputError(f"invalid score {clip(score, 20)}", path, line)
    rationale = text("rationale", optional=True)
    return RatingLine(
        line,
        rater,
        text("model"),
        text("model_b", optional=True),
        text("instance"),
        text("criterion"),
        score,
        rationale or None,
    )


def read_score(
    raw: int | str | None, pairwise: bool, low: int, high: int, allow_na: bool
) -> int | None:
    """The score of ``raw`` (None: N/A); ValueError saying what is expected otherwise."""
    word = raw.strip().casefold() if isinstance(raw, str) else raw
    if pairwise:
        verdict = VERDICT_WORDS.get(str(word)) if word is not None else None
        if verdict is None:
            raise ValueError(f"invalid verdict {clip(raw)}: use A, B or tie (or 1, 2, 3)")
        return verdict
    if word is None or word in NA_WORDS:
        if not allow_na:
            raise ValueError(f"N/A is not allowed for this criterion: give {low}-{high}")
        return None
    if isinstance(word, str):
        if _INTEGER.fullmatch(word) is None:
            raise ValueError(f"invalid score {clip(raw)}: give an integer {low}-{high} or N/A")
        word = int(word)
    if not low <= word <= high:
        raise ValueError(f"score {word} is not on the run's scale {low}-{high}")
    return word


def write_rows(out: TextIO, fmt: str, fields: tuple[str, ...], rows: list[dict[str, Any]]) -> None:
    """``rows`` as CSV (a header line first) or JSON Lines, keys in ``fields`` order."""
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(fields)
        for row in rows:
            writer.writerow(["" if row[f] is None else row[f] for f in fields])
        return
    for row in rows:
        out.write(json.dumps({f: row[f] for f in fields}, ensure_ascii=False) + "\n")
