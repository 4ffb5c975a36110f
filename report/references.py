"""Reference scores (human raters, or any other source) compared like a judge.

A reference file is CSV (with a header) or JSON Lines with the columns ``model``,
``instance_id``, ``skill`` and ``score``; a score that is empty, ``null``, ``N/A`` or
``NA`` means N/A. An optional ``probability`` column gives the probability the label's
cell was drawn with (``report --suggest-labels`` writes it; calibration weighs the label
by its inverse). Its rater is named on the command line (``human=labels.csv``). Its
scores become one more judge column of the score table, on the cells the run has.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flask_eval.core.errors import InputError
from flask_eval.core.files import MIB, read_text
from flask_eval.core.jsonl import read_json_lines
from flask_eval.core.text import clip, walk_strings

if TYPE_CHECKING:
    from flask_eval.report.scores import ScoreTable

COLUMNS: tuple[str, ...] = ("model", "instance_id", "skill", "score")
NA_TEXTS = frozenset({"", "n/a", "na", "none", "null"})
#: a CSV reference file is read whole: 12 skills x 2,000 instances x 10 models is ~15 MiB
MAX_CSV_BYTES = 256 * MIB
JSON_SUFFIXES = (".jsonl", ".json", ".ndjson")


@dataclass(frozen=True)
class ReferenceScore:
    model: str
    instance_id: str
    skill: str
    score: float | None  # None = N/A
    line: int
    #: the inclusion probability of the label's cell (None: not given)
    probability: float | None = None


@dataclass(frozen=True)
class Reference:
    name: str
    path: str
    scores: tuple[ReferenceScore, ...]


def parse_arg(text: str) -> tuple[str, str]:
    """``NAME=PATH`` -> (name, path)."""
    name, sep, path = text.partition("=")
    if not sep or not name.strip() or not path.strip():
        raise InputError(f"invalid --reference {clip(text)}: use NAME=PATH, e.g. human=labels.csv")
    return name.strip(), path.strip()


def _score(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise InputError(f"{where}: score must be a number or N/A, got {clip(value)}")
    if isinstance(value, int | float):
        number = float(value)
    else:
        text = str(value).strip()
        if text.lower() in NA_TEXTS:
            return None
        try:
            number = float(text)
        except ValueError:
            raise InputError(f"{where}: score must be a number or N/A, got {clip(text)}") from None
    if not math.isfinite(number):
        raise InputError(f"{where}: score must be finite, got {clip(value)}")
    return number


def _probability(value: Any, where: str) -> float | None:
    """An inclusion probability in (0, 1], or None when not given (empty)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        number = float(value) if not isinstance(value, bool) else float("nan")
    except (TypeError, ValueError):
        number = float("nan")
    if not 0.0 < number <= 1.0:
        raise InputError(f"{where}: probability must be a number in (0, 1], got {clip(value)}")
    return number


def _records(path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line, record)`` of a reference file: JSON Lines by its suffix, CSV otherwise.

    Both go through the input rules of every run input (core.files: regular files only;
    core.jsonl for JSON Lines; NUL and lone surrogates refused in CSV fields too).
    """
    if Path(path).suffix.lower() in JSON_SUFFIXES:
        yield from read_json_lines(path, "a reference file (JSON Lines)", allow_empty=True)
        return
    text = read_text(path, "a reference file (CSV with a header)", MAX_CSV_BYTES)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    start = 1  # the first physical line of the row being read
    try:
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise InputError(f"{path}:1: missing column(s): {', '.join(missing)}")
        start = reader.line_num + 1
        for row in reader:
            found = walk_strings(row)
            if found is not None:
                raise InputError(f"{path}:{start}: {found[0]} {found[1]}")
            yield start, dict(row)
            start = reader.line_num + 1
    except csv.Error as exc:
        raise InputError(f"{path}:{start}: invalid CSV: {str(exc)[:80]}") from None


def load(name: str, path: str) -> Reference:
    """Read and validate a reference file; raises InputError naming ``file:line``."""
    seen: dict[tuple[str, str, str], int] = {}
    scores: list[ReferenceScore] = []
    for number, obj in _records(path):
        where = f"{path}:{number}"
        missing = [c for c in COLUMNS if c not in obj]
        if missing:
            raise InputError(f"{where}: missing field(s): {', '.join(missing)}")
        keys = []
        for column in COLUMNS[:3]:
            value = obj[column]
            if value is None or isinstance(value, bool | dict | list) or not str(value).strip():
                raise InputError(f"{where}: {column} must be a non-empty string or number")
            keys.append(str(value).strip())
        key = (keys[0], keys[1], keys[2])
        if key in seen:
            shown = ", ".join(clip(k) for k in key)
            raise InputError(f"{where}: duplicate score for ({shown}) (first on line {seen[key]})")
        seen[key] = number
        chance = _probability(obj.get("probability"), where)
        scores.append(ReferenceScore(*key, _score(obj["score"], where), number, chance))
    if not scores:
        raise InputError(f"{path}: no reference scores")
    return Reference(name, path, tuple(scores))


def attach(table: ScoreTable, references: Sequence[Reference]) -> tuple[ScoreTable, list[int]]:
    """``table`` with one judge column per reference; also how many of each reference's
    scores match no cell of the table (they are left out)."""
    import numpy as np  # here: the producer reads references without the report's arrays

    from flask_eval.report.scores import NA, NONE, SCORED

    if not references:
        return table, []
    names = [r.name for r in references]
    clash = sorted(set(names) & set(table.judges)) or sorted(
        {n for n in names if names.count(n) > 1}
    )
    if clash:
        raise InputError(f"reference name already used: {', '.join(clash)}")
    row = {
        (table.models[m], table.instances[i], table.skills[s]): n
        for n, (m, i, s) in enumerate(
            zip(table.model.tolist(), table.instance.tolist(), table.skill.tolist(), strict=True)
        )
    }
    state = np.full((table.n_cells, len(references)), NONE, dtype=np.int8)
    score = np.full((table.n_cells, len(references)), np.nan)
    unmatched = []
    for col, ref in enumerate(references):
        missed = 0
        for item in ref.scores:
            n = row.get((item.model, item.instance_id, item.skill))
            if n is None:
                missed += 1
            elif item.score is None:
                state[n, col] = NA
            else:
                state[n, col] = SCORED
                score[n, col] = item.score
        unmatched.append(missed)
    return table.with_judges(names, state, score), unmatched


def model_means(
    table: ScoreTable, names: Sequence[str]
) -> list[tuple[str, str, float | None, int]]:
    """``(reference, model, mean, n)``: each reference column's mean score per model of
    ``table``, over the cells it scored (None when it scored none)."""
    import numpy as np

    from flask_eval.report.scores import SCORED

    out = []
    for name in names:
        col = table.judges.index(name)
        scored = table.state[:, col] == SCORED
        for m, model in enumerate(table.models):
            mine = scored & (table.model == m)
            n = int(np.count_nonzero(mine))
            mean = float(table.score[mine, col].mean()) if n else None
            out.append((name, model, mean, n))
    return out
