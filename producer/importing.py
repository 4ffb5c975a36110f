"""What the data importers share: one JSON document read strictly, instance rubrics, names.

* :func:`read_json_document` reads a whole JSON file (BiGGen Bench's dict keyed by id,
  Prometheus' eval sets, a list of records) under a size limit, each key once in every
  object (:func:`core.jsonl.unique_keys`), and refuses NUL or a lone surrogate anywhere.
* :func:`parse_rubric` turns an instance's own rubric into an
  :class:`~core.types.InstanceRubric`. Two shapes are accepted:

  - Prometheus / BiGGen Bench: ``{"criteria": ..., "score1_description": ..., ...,
    "score5_description": ...}``;
  - by score: ``{"criteria": ..., "1": ..., ..., "5": ...}`` (``criteria`` optional
    where the caller allows it: an empty ``criteria`` then means "the criterion of the
    skill of that name").

  A problem raises :class:`RubricProblem` with a message; the caller adds the place
  (``file:line`` or file and key).
* :data:`INSTANCE_CRITERION` is the name of the one criterion of an instance that brings
  its own rubric (BiGGen Bench, MT-Bench, Vicuna Bench): ``Instance.skills ==
  (INSTANCE_CRITERION,)`` and ``Instance.rubrics[INSTANCE_CRITERION]`` is its rubric.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from flask_eval.core.errors import InputError
from flask_eval.core.files import MIB, read_text
from flask_eval.core.jsonl import DuplicateKey, unique_keys
from flask_eval.core.jsonl import json_type as json_type
from flask_eval.core.limits import MAX_INSTANCE_ID, MAX_JUDGE_NAME
from flask_eval.core.text import clip, control_problem, escape_line, walk_strings
from flask_eval.core.types import InstanceRubric

__all__ = [
    "INSTANCE_CRITERION",
    "MAX_DOCUMENT_BYTES",
    "RubricProblem",
    "check_identifier",
    "check_judge_name",
    "json_type",
    "parse_rubric",
    "read_json_document",
    "score_1_to_5",
]

#: the criterion name of an instance judged on its own rubric only
INSTANCE_CRITERION = "rubric"
#: a JSON data set is read whole: BiGGen Bench's responses file is 3 MiB, a results
#: file of a dozen models ~40 MiB; the limit keeps a wrong path from filling memory
MAX_DOCUMENT_BYTES = 256 * MIB

SCORE_LEVELS: tuple[int, ...] = (1, 2, 3, 4, 5)
_PROMETHEUS_KEYS = {f"score{k}_description": k for k in SCORE_LEVELS}
_PLAIN_KEYS = {str(k): k for k in SCORE_LEVELS}


class RubricProblem(ValueError):
    """What is wrong with an instance rubric (the caller says where)."""


def read_json_document(path: str, what: str, max_bytes: int = MAX_DOCUMENT_BYTES) -> Any:
    """The parsed JSON of a whole file; InputError naming the file (and the line when
    the JSON parser or an escape says which)."""
    text = read_text(path, what, max_bytes)
    try:
        data = json.loads(text, object_pairs_hook=unique_keys)
    except DuplicateKey as exc:
        raise InputError(
            f"key {clip(exc.key)} appears twice in an object; give each key once", path
        ) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}; expected {what}", path, exc.lineno) from None
    except RecursionError:
        raise InputError("invalid JSON: nested too deeply", path) from None
    except ValueError as exc:
        detail = "a number has more than 4300 digits" if "digits" in str(exc) else str(exc)[:80]
        raise InputError(f"invalid JSON: {detail}", path) from None
    if "\\u" in text:
        found = walk_strings(data)
        if found is not None:
            place, problem = found
            raise InputError(f"{place} {problem}", path, escape_line(text))
    return data


def check_identifier(value: object, what: str, limit: int = MAX_INSTANCE_ID) -> str:
    """``value`` as an id or a name: a non-empty string within ``limit`` characters
    and without control characters; RubricProblem (a plain message) otherwise."""
    if not isinstance(value, str) or not value.strip():
        raise RubricProblem(f"{what} must be a non-empty string, got {json_type(value)}")
    if len(value) > limit:
        raise RubricProblem(f"{what} is longer than {limit} characters: {clip(value)}")
    problem = control_problem(value)
    if problem is not None:
        raise RubricProblem(f"{what} {problem}")
    return value


def check_judge_name(value: object, what: str) -> str:
    """An evaluator's name (it names a judge column of the report)."""
    return check_identifier(value, what, MAX_JUDGE_NAME)


def parse_rubric(value: object, *, require_criteria: bool = True) -> InstanceRubric:
    """An instance rubric in either accepted shape (see the module docstring)."""
    if not isinstance(value, Mapping):
        raise RubricProblem(
            "a rubric must be an object with 'criteria' and the texts of scores 1-5, "
            f"got {json_type(value)}"
        )
    criteria = value.get("criteria")
    if criteria is None and not require_criteria:
        criteria = ""
    elif not isinstance(criteria, str) or not criteria.strip():
        shown = "missing" if criteria is None else f"not a non-empty string ({json_type(criteria)})"
        raise RubricProblem(f"rubric 'criteria' is {shown}")
    keys = [k for k in value if k != "criteria"]
    table = _PROMETHEUS_KEYS if any(k in _PROMETHEUS_KEYS for k in keys) else _PLAIN_KEYS
    scores: dict[int, str] = {}
    for key in keys:
        level = table.get(key)
        if level is None:
            expected = ", ".join(["criteria", *table])
            raise RubricProblem(f"unknown rubric key {clip(key)}; expected {expected}")
        text = value[key]
        if not isinstance(text, str) or not text.strip():
            raise RubricProblem(
                f"rubric text of score {level} ({key!r}) must be a non-empty string, "
                f"got {json_type(text) if not isinstance(text, str) else 'an empty string'}"
            )
        scores[level] = text.strip()
    missing = [name for name, level in table.items() if level not in scores]
    if missing:
        names = ", ".join(repr(m) for m in missing)
        if table is _PLAIN_KEYS:
            names = f"the text of score {', '.join(missing)}"
        raise RubricProblem(f"rubric is missing {names}")
    return InstanceRubric(criteria.strip(), {k: scores[k] for k in SCORE_LEVELS})


def score_1_to_5(value: object) -> int:
    """A reference score: an integer 1-5 (``4`` or ``4.0``); RubricProblem otherwise.
    Booleans, strings and fractions are refused: a score is only what the rater gave."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RubricProblem(f"score must be an integer 1-5, got {json_type(value)} {clip(value)}")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise RubricProblem(f"score must be an integer 1-5, got {clip(value)}")
    if int(value) not in SCORE_LEVELS:
        raise RubricProblem(f"score must be an integer 1-5, got {clip(value)}")
    return int(value)
