"""Import FLASK's published GPT-4 reviews (``gpt_review/outputs/*.jsonl`` of kaistAI/FLASK).

FLASK's ``gpt_review/gpt4_eval.py`` writes one JSON object per line: the evaluation
instance it reviewed (``question_id`` in the older schema, ``idx`` in the current one,
with the instance's other fields), plus ``target_txt`` (the response), ``review`` (the
judge's text), ``score`` and ``total_tokens_step4``. ``score`` is the last ``{...}`` of
the review read as a Python dict, its keys lower-cased with ``_`` made a space
(``{"logical correctness": 4, "readability": "N/A"}``), ``{}`` when the review held none;
the line is empty when the record could not be written.

:func:`load_reviews` turns a file into one :class:`Review` per scored skill:

* a key names a skill by its name (any case, ``_`` or space), or by the word FLASK's
  own aggregation keeps (``aggregate_skill.py``: the second word of a ``logical ...``
  key, the first of any other: ``correctness``, ``commonsense``); a key that names no
  skill, or a skill twice, is an error;
* a score is an integer 1-5 (``4``, ``4.0`` or ``"4"``), or N/A (``"N/A"``, ``"na"``,
  ``"not applicable"``, any case), stored as ``None``; anything else is an error, so no
  text becomes a score the judge did not give;
* a review whose ``score`` is ``{}`` scored nothing: its instance is listed in
  :attr:`ReviewSet.unscored` (a failed judgment, not N/A).

Every problem raises :class:`~core.errors.InputError` naming ``file:line``. The records
are plain data; storing them as judgments of a named judge is the caller's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flask_eval.core.errors import InputError
from flask_eval.core.jsonl import json_type, read_json_lines
from flask_eval.core.limits import MAX_INSTANCE_ID
from flask_eval.core.text import clip, control_problem
from flask_eval.producer.inputs import MODEL_NAME_PATTERN

__all__ = ["FLASK_JUDGE", "Review", "ReviewSet", "load_reviews", "skill_aliases"]

#: the judge of FLASK's published reviews (``gpt_review/src/reviewer.jsonl``)
FLASK_JUDGE = "gpt-4-0613"
NA_TEXTS = frozenset({"n/a", "na", "not applicable"})
_MODEL_NAME = re.compile(MODEL_NAME_PATTERN)
_ID_FIELDS = ("question_id", "idx")


@dataclass(frozen=True)
class Review:
    """One skill's score of one review; ``score`` None means N/A."""

    model: str
    instance_id: str
    skill: str
    score: int | None
    line: int


@dataclass(frozen=True)
class ReviewSet:
    """A review file: its scores, and the instances whose review scored nothing."""

    model: str
    judge: str
    path: str
    reviews: tuple[Review, ...]
    unscored: tuple[str, ...] = field(default_factory=tuple)


def _fold(name: str) -> str:
    return " ".join(name.replace("_", " ").split()).casefold()


def _short(folded: str) -> str:
    """The word FLASK's aggregation keys a skill by."""
    words = folded.split(" ")
    return words[1] if words[0] == "logical" and len(words) > 1 else words[0]


def skill_aliases(skills: Collection[str]) -> dict[str, str]:
    """Review key (folded) -> skill name: each skill's folded name, and its short word
    where no other skill shares it."""
    aliases = {_fold(name): name for name in skills}
    shorts: dict[str, list[str]] = {}
    for folded, name in aliases.items():
        shorts.setdefault(_short(folded), []).append(name)
    for word, names in shorts.items():
        if len(names) == 1:
            aliases.setdefault(word, names[0])
    return aliases


def default_model(path: str) -> str:
    """``chatgpt_review.jsonl`` -> ``chatgpt``; ``alpaca_13b.jsonl`` -> ``alpaca_13b``."""
    return Path(path).name.split(".")[0].removesuffix("_review")


def _instance_id(record: Mapping[str, Any], path: str, line: int) -> str:
    present = [key for key in _ID_FIELDS if key in record]
    if not present:
        raise InputError("missing field 'question_id' (or 'idx'): which instance", path, line)
    key = present[0]
    value = record[key]
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).strip():
        raise InputError(
            f"field {key!r} must be an integer or a non-empty string, got {json_type(value)}",
            path,
            line,
        )
    text = str(value)
    if len(text) > MAX_INSTANCE_ID:
        raise InputError(f"field {key!r} is longer than {MAX_INSTANCE_ID} characters", path, line)
    problem = control_problem(text)
    if problem is not None:
        raise InputError(f"field {key!r} {problem}", path, line)
    return text


def _score(value: object) -> int | str | None:
    """The score of one key: 1-5, None for N/A, or a str saying what is wrong."""
    if isinstance(value, str):
        text = value.strip()
        if text.casefold() in NA_TEXTS:
            return None
        if text.isascii() and text.isdigit():
            value = int(text)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{json_type(value)} {clip(value)}"
    if isinstance(value, float):
        if not (math.isfinite(value) and value.is_integer()):
            return clip(value)
        value = int(value)
    return value if 1 <= value <= 5 else clip(value)


def load_reviews(
    path: str,
    known_skills: Collection[str],
    model: str | None = None,
    judge: str = FLASK_JUDGE,
) -> ReviewSet:
    """Read a FLASK review file (see the module docstring) of ``model`` (by default the
    file's name without ``_review``) judged by ``judge``, in file order."""
    name = model if model is not None else default_model(path)
    if _MODEL_NAME.fullmatch(name) is None:
        raise InputError(
            f"invalid model name {clip(name)}; use letters, digits, '.', '_' or '-'", path
        )
    aliases = skill_aliases(known_skills)
    ordered = sorted(known_skills) if isinstance(known_skills, set | frozenset) else known_skills
    listing = ", ".join(ordered)
    reviews: list[Review] = []
    unscored: list[str] = []
    first: dict[str, int] = {}
    for line, record in read_json_lines(path, "a FLASK review file (JSON Lines)"):
        instance_id = _instance_id(record, path, line)
        if instance_id in first:
            raise InputError(
                f"duplicate review of instance {clip(instance_id)} (first on line "
                f"{first[instance_id]})",
                path,
                line,
            )
        first[instance_id] = line
        if "score" not in record:
            raise InputError("missing field 'score' (the review's scores)", path, line)
        scores = record["score"]
        if not isinstance(scores, dict):
            raise InputError(
                f"field 'score' must be an object of skill scores, got {json_type(scores)}",
                path,
                line,
            )
        if not scores:
            unscored.append(instance_id)
            continue
        seen: dict[str, str] = {}
        for key, value in scores.items():
            skill = aliases.get(_fold(key))
            if skill is None:
                raise InputError(
                    f"score key {clip(key)} names no skill; skills: {listing}",
                    path,
                    line,
                )
            if skill in seen:
                raise InputError(
                    f"score keys {clip(seen[skill])} and {clip(key)} both name {skill!r}",
                    path,
                    line,
                )
            seen[skill] = key
            score = _score(value)
            if isinstance(score, str):
                raise InputError(
                    f"score of {clip(key)} must be an integer 1-5 or N/A, got {score}",
                    path,
                    line,
                )
            reviews.append(Review(name, instance_id, skill, score, line))
    return ReviewSet(name, judge, path, tuple(reviews), tuple(unscored))
