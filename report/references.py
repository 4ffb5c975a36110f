"""Reference scores (human raters, or any other source) compared like a judge.

A reference file is CSV (with a header) or JSON Lines with the columns ``model``,
``instance_id``, ``skill`` and ``score``; a score that is empty, ``null``, ``N/A`` or
``NA`` means N/A. Its rater is named on the command line (``human=labels.csv``). Its
scores become one more judge column of the score table, on the cells the run has.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from flask_eval.exceptions import InputError
from report.scores import NA, NONE, SCORED, ScoreTable

COLUMNS: tuple[str, ...] = ("model", "instance_id", "skill", "score")
NA_TEXTS = frozenset({"", "n/a", "na", "none", "null"})


@dataclass(frozen=True)
class ReferenceScore:
    model: str
    instance_id: str
    skill: str
    score: float | None  # None = N/A
    line: int


@dataclass(frozen=True)
class Reference:
    name: str
    path: str
    scores: tuple[ReferenceScore, ...]


def parse_arg(text: str) -> tuple[str, str]:
    """``NAME=PATH`` -> (name, path)."""
    name, sep, path = text.partition("=")
    if not sep or not name.strip() or not path.strip():
        raise InputError(f"invalid --reference {text!r}: use NAME=PATH, e.g. human=labels.csv")
    return name.strip(), path.strip()


def _score(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise InputError(f"{where}: score must be a number or N/A, got {value!r}")
    if isinstance(value, int | float):
        number = float(value)
    else:
        text = str(value).strip()
        if text.lower() in NA_TEXTS:
            return None
        try:
            number = float(text)
        except ValueError:
            raise InputError(f"{where}: score must be a number or N/A, got {text!r}") from None
    if not math.isfinite(number):
        raise InputError(f"{where}: score must be finite, got {value!r}")
    return number


def _records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from None
    if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{number}: invalid JSON: {exc.msg}") from None
            if not isinstance(obj, dict):
                raise InputError(f"{path}:{number}: expected a JSON object")
            yield number, obj
        return
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise InputError(f"{path}:1: missing column(s): {', '.join(missing)}")
    for number, row in enumerate(reader, start=2):
        yield number, dict(row)


def load(name: str, path: str) -> Reference:
    """Read and validate a reference file; raises InputError naming ``file:line``."""
    seen: dict[tuple[str, str, str], int] = {}
    scores: list[ReferenceScore] = []
    for number, obj in _records(Path(path)):
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
            raise InputError(f"{where}: duplicate score for {key} (first on line {seen[key]})")
        seen[key] = number
        scores.append(ReferenceScore(*key, _score(obj["score"], where), number))
    if not scores:
        raise InputError(f"{path}: no reference scores")
    return Reference(name, path, tuple(scores))


def attach(table: ScoreTable, references: Sequence[Reference]) -> tuple[ScoreTable, list[int]]:
    """``table`` with one judge column per reference; also how many of each reference's
    scores match no cell of the table (they are left out)."""
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
