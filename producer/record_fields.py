"""The fields of an input record, read and checked: ids, strings, skill and criterion
names, an instance's own rubrics, its domains and its difficulty. Each raises
:class:`~core.errors.InputError` naming the file and the 1-based line; every user value in
a message is clipped. Ids are checked against :data:`core.limits.MAX_INSTANCE_ID`, the
length of their column, so SQLite and PostgreSQL accept exactly the same inputs.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from flask_eval.core.errors import InputError
from flask_eval.core.jsonl import json_type
from flask_eval.core.limits import MAX_INSTANCE_ID
from flask_eval.core.text import clip, control_problem
from flask_eval.core.types import DIFFICULTY_LABELS, DOMAINS, InstanceRubric
from flask_eval.producer.importing import RubricProblem, parse_rubric

__all__ = [
    "did_you_mean",
    "difficulty_level",
    "domain_names",
    "instance_rubrics",
    "record_id",
    "required",
    "skill_names",
    "string",
    "wrong_type",
]

_UNKNOWN = "-1"
_DOMAIN_SET = frozenset(DOMAINS)
_LEVELS = {label.casefold(): level for level, label in enumerate(DIFFICULTY_LABELS, start=1)}


def required(record: dict[str, Any], key: str, path: str, line: int, hint: str = "") -> Any:
    """``record[key]``; InputError naming the missing field (and ``hint``)."""
    try:
        return record[key]
    except KeyError:
        suffix = f" ({hint})" if hint else ""
        raise InputError(f"missing field {key!r}{suffix}", path, line) from None


def wrong_type(key: str, expected: str, value: object, path: str, line: int) -> InputError:
    """The error of a field whose value is not of the ``expected`` kind."""
    return InputError(f"field {key!r} must be {expected}, got {json_type(value)}", path, line)


def record_id(value: object, key: str, path: str, line: int) -> str:
    """An instance id as stored: checked here against the column's length, so both
    databases accept exactly the same ids (SQLite would store any length)."""
    too_long = False
    if isinstance(value, int) and not isinstance(value, bool):
        # a digit takes log2(10) < 4 bits: past 4 bits per allowed digit, skip str()
        too_long = value.bit_length() > 4 * MAX_INSTANCE_ID
        text = "" if too_long else str(value)
    elif isinstance(value, str) and value.strip():
        text = value
    else:
        raise wrong_type(key, "an integer or a non-empty string", value, path, line)
    if too_long or len(text) > MAX_INSTANCE_ID:
        raise InputError(
            f"field {key!r} is longer than {MAX_INSTANCE_ID} characters: {clip(value)}",
            path,
            line,
        )
    problem = control_problem(text)
    if problem is not None:
        raise InputError(f"field {key!r} {problem}", path, line)
    return text


def string(value: object, key: str, path: str, line: int, *, allow_empty: bool) -> str:
    """A string field (blank only with ``allow_empty``)."""
    if not isinstance(value, str):
        raise wrong_type(key, "a string", value, path, line)
    if not allow_empty and not value.strip():
        raise InputError(f"field {key!r} is empty", path, line)
    return value


def did_you_mean(name: str, choices: Collection[str]) -> str:
    """A hint naming the choice ``name`` differs from only in case or spacing, or ""."""
    folded = name.strip().casefold()
    for choice in choices:
        if choice.casefold() == folded:
            return f" (did you mean {choice!r}?)"
    return ""


def skill_names(
    value: object,
    key: str,
    known: frozenset[str],
    listing: str,
    path: str,
    line: int,
    noun: str = "skill",
) -> tuple[str, ...]:
    """A list of skill (or criterion) names, each in ``known`` and named once."""
    plural = "criteria" if noun == "criterion" else f"{noun}s"
    if not isinstance(value, list):
        raise wrong_type(key, f"a list of {noun} names", value, path, line)
    if not value:
        raise InputError(f"field {key!r} is empty; list the instance's {plural}", path, line)
    seen: set[str] = set()
    for name in value:
        if not isinstance(name, str):
            raise InputError(
                f"field {key!r} must be a list of {noun} names (strings), found {json_type(name)}",
                path,
                line,
            )
        if name not in known:
            raise InputError(
                f"unknown {noun} {clip(name)}{did_you_mean(name, known)}; "
                f"valid {plural}: {listing}",
                path,
                line,
            )
        if name in seen:
            raise InputError(f"{noun} {clip(name)} is listed twice in field {key!r}", path, line)
        seen.add(name)
    return tuple(value)


def instance_rubrics(
    value: object, skills: tuple[str, ...], known: frozenset[str], path: str, line: int
) -> dict[str, InstanceRubric]:
    """The ``rubrics`` field: the instance's own rubric for some of its skills."""
    if not isinstance(value, dict):
        raise wrong_type("rubrics", "an object mapping skill names to rubrics", value, path, line)
    rubrics: dict[str, InstanceRubric] = {}
    for name, rubric in value.items():
        if name not in skills:
            hint = did_you_mean(name, known) if name not in known else ""
            raise InputError(
                f"field 'rubrics': {clip(name)} is not one of this instance's skills{hint} "
                f"({', '.join(skills)})",
                path,
                line,
            )
        try:
            rubrics[name] = parse_rubric(rubric, require_criteria=False)
        except RubricProblem as exc:
            raise InputError(f"field 'rubrics', skill {clip(name)}: {exc}", path, line) from None
    return rubrics


def domain_names(value: object, key: str, path: str, line: int) -> tuple[str, ...]:
    """A list of FLASK domains (``-1``, FLASK's unknown domain, left out)."""
    if not isinstance(value, list):
        raise wrong_type(key, "a list of domain names", value, path, line)
    domains: list[str] = []
    for name in value:
        if name == -1 or name == _UNKNOWN:
            continue  # FLASK's "unknown domain" marker
        if not isinstance(name, str):
            raise InputError(
                f"field {key!r} must be a list of domain names (strings), found {json_type(name)}",
                path,
                line,
            )
        if name not in _DOMAIN_SET:
            raise InputError(
                f"unknown domain {clip(name)}{did_you_mean(name, DOMAINS)}; "
                f'valid domains: {", ".join(DOMAINS)} (or "-1" for unknown)',
                path,
                line,
            )
        if name in domains:
            raise InputError(f"domain {clip(name)} is listed twice in field {key!r}", path, line)
        domains.append(name)
    return tuple(domains)


def difficulty_level(value: object, key: str, path: str, line: int) -> int | None:
    """A difficulty level 1-5 from a level or a label (None: unknown, ``-1``)."""
    labels = ", ".join(repr(label) for label in DIFFICULTY_LABELS)
    if isinstance(value, int) and not isinstance(value, bool):
        if value == -1:
            return None
        if 1 <= value <= len(DIFFICULTY_LABELS):
            return value
        raise InputError(
            f"difficulty level {value} is out of range; use 1-5, -1 for unknown, "
            f"or a label: {labels}",
            path,
            line,
        )
    if isinstance(value, str):
        if value.strip() == _UNKNOWN:
            return None
        level = _LEVELS.get(" ".join(value.split()).casefold())
        if level is not None:
            return level
        raise InputError(
            f"unknown difficulty label {clip(value)}; valid labels: {labels} (or -1 for unknown)",
            path,
            line,
        )
    raise wrong_type(key, "a difficulty label or a level 1-5", value, path, line)
