"""Load and validate FLASK inputs from JSON Lines files.

Two loaders, both strict and both raising :class:`~core.errors.InputError`
with the exact 1-based line of the first problem:

* :func:`load_instances` reads evaluation instances in either public FLASK schema
  (detected per record; one file must use one schema):

  - current (``evaluation_set/flask_evaluation.jsonl`` on ``main``): ``idx``,
    ``instruction``, ``answer``, ``skill``, ``domain``, ``difficulty``;
  - older (commit 612d031, the one FLASK's own scripts read): ``question_id``, ``text``,
    ``answer``, ``metrics``, ``domain_labeled``, ``difficulty_labeled``.

  Optional: ``system_prompt``; ``criteria`` (the names judged, instead of the skill
  field; see :mod:`rubrics.criteria` for ``custom_criteria``); ``rubrics``, the
  instance's own rubric per skill (FLASK-Hard), in a form of
  :func:`producer.importing.parse_rubric` (``criteria`` ``""``: the skill's own).
  ``images``: the instruction's images, a list of references (paths relative to the
  instances file's folder, ``data:`` URIs, URLs when fetching is on), read and checked
  by :func:`producer.images.record_images`.
  Any other field (``task``, ``domain_review``, ...) is ignored.

  A record with ``turns`` is a conversation (MT-Bench's ``question.jsonl`` as it is, or
  ours): one instance per turn, see :mod:`producer.conversations`.
* :func:`producer.responses.load_responses` reads one model's responses: ``question_id``
  + ``text`` (validated here, its texts read again when needed).

Skill names are not hard-coded: callers pass the rubric set's skill names.

Lines are read by :func:`core.jsonl.read_json_lines` (regular files only, strict UTF-8
and JSON, no NUL or lone surrogate in any string, each key once). Ids are checked here
against :data:`core.limits.MAX_INSTANCE_ID`, the length of their column, so SQLite and
PostgreSQL accept exactly the same inputs; every user value in a message is clipped.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from flask_eval.core.errors import InputError
from flask_eval.core.jsonl import MAX_LINE_BYTES, read_json_lines
from flask_eval.core.jsonl import json_type as _json_type
from flask_eval.core.limits import MAX_INSTANCE_ID
from flask_eval.core.text import clip, control_problem
from flask_eval.core.types import (
    DIFFICULTY_LABELS,
    DOMAINS,
    Instance,
    InstanceRubric,
)
from flask_eval.producer.conversations import (
    add_turns,
    category,
    check_conversation_id,
    expand,
    inline_references,
    is_conversation,
    one_of,
    user_turns,
)
from flask_eval.producer.images import record_images
from flask_eval.producer.importing import RubricProblem, parse_rubric

__all__ = ["MAX_LINE_BYTES", "load_instances", "read_json_lines"]

_UNKNOWN = "-1"
_DOMAIN_SET = frozenset(DOMAINS)
_LEVELS = {label.casefold(): level for level, label in enumerate(DIFFICULTY_LABELS, start=1)}


@dataclass(frozen=True)
class _Schema:
    """Field names of one FLASK instance schema."""

    name: str
    id: str
    instruction: str
    answer: str
    skills: str
    domains: str
    difficulty: str

    def fields(self) -> str:
        return ", ".join(
            (self.id, self.instruction, self.answer, self.skills, self.domains, self.difficulty)
        )


_CURRENT = _Schema(
    "current FLASK schema", "idx", "instruction", "answer", "skill", "domain", "difficulty"
)
_OLDER = _Schema(
    "older FLASK schema",
    "question_id",
    "text",
    "answer",
    "metrics",
    "domain_labeled",
    "difficulty_labeled",
)


# --------------------------------------------------------------------------- fields


def _field(record: dict[str, Any], key: str, path: str, line: int, hint: str = "") -> Any:
    try:
        return record[key]
    except KeyError:
        suffix = f" ({hint})" if hint else ""
        raise InputError(f"missing field {key!r}{suffix}", path, line) from None


def _wrong_type(key: str, expected: str, value: object, path: str, line: int) -> InputError:
    return InputError(f"field {key!r} must be {expected}, got {_json_type(value)}", path, line)


def _record_id(value: object, key: str, path: str, line: int) -> str:
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
        raise _wrong_type(key, "an integer or a non-empty string", value, path, line)
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


def _string(value: object, key: str, path: str, line: int, *, allow_empty: bool) -> str:
    if not isinstance(value, str):
        raise _wrong_type(key, "a string", value, path, line)
    if not allow_empty and not value.strip():
        raise InputError(f"field {key!r} is empty", path, line)
    return value


def _did_you_mean(name: str, choices: Collection[str]) -> str:
    folded = name.strip().casefold()
    for choice in choices:
        if choice.casefold() == folded:
            return f" (did you mean {choice!r}?)"
    return ""


def _skills(
    value: object,
    key: str,
    known: frozenset[str],
    listing: str,
    path: str,
    line: int,
    noun: str = "skill",
) -> tuple[str, ...]:
    plural = "criteria" if noun == "criterion" else f"{noun}s"
    if not isinstance(value, list):
        raise _wrong_type(key, f"a list of {noun} names", value, path, line)
    if not value:
        raise InputError(f"field {key!r} is empty; list the instance's {plural}", path, line)
    seen: set[str] = set()
    for name in value:
        if not isinstance(name, str):
            raise InputError(
                f"field {key!r} must be a list of {noun} names (strings), found {_json_type(name)}",
                path,
                line,
            )
        if name not in known:
            raise InputError(
                f"unknown {noun} {clip(name)}{_did_you_mean(name, known)}; "
                f"valid {plural}: {listing}",
                path,
                line,
            )
        if name in seen:
            raise InputError(f"{noun} {clip(name)} is listed twice in field {key!r}", path, line)
        seen.add(name)
    return tuple(value)


def _rubrics(
    value: object, skills: tuple[str, ...], known: frozenset[str], path: str, line: int
) -> dict[str, InstanceRubric]:
    """The ``rubrics`` field: the instance's own rubric for some of its skills."""
    if not isinstance(value, dict):
        raise _wrong_type("rubrics", "an object mapping skill names to rubrics", value, path, line)
    rubrics: dict[str, InstanceRubric] = {}
    for name, rubric in value.items():
        if name not in skills:
            hint = _did_you_mean(name, known) if name not in known else ""
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


def _domains(value: object, key: str, path: str, line: int) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _wrong_type(key, "a list of domain names", value, path, line)
    domains: list[str] = []
    for name in value:
        if name == -1 or name == _UNKNOWN:
            continue  # FLASK's "unknown domain" marker
        if not isinstance(name, str):
            raise InputError(
                f"field {key!r} must be a list of domain names (strings), found {_json_type(name)}",
                path,
                line,
            )
        if name not in _DOMAIN_SET:
            raise InputError(
                f"unknown domain {clip(name)}{_did_you_mean(name, DOMAINS)}; "
                f'valid domains: {", ".join(DOMAINS)} (or "-1" for unknown)',
                path,
                line,
            )
        if name in domains:
            raise InputError(f"domain {clip(name)} is listed twice in field {key!r}", path, line)
        domains.append(name)
    return tuple(domains)


def _difficulty(value: object, key: str, path: str, line: int) -> int | None:
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
    raise _wrong_type(key, "a difficulty label or a level 1-5", value, path, line)


# --------------------------------------------------------------------------- loaders


def _detect_schema(record: dict[str, Any], path: str, line: int) -> _Schema:
    has_current = _CURRENT.id in record
    has_older = _OLDER.id in record
    if has_current and has_older:
        raise InputError(
            f"record has both {_CURRENT.id!r} and {_OLDER.id!r}; use one schema: "
            f"{_CURRENT.fields()} or (older) {_OLDER.fields()}",
            path,
            line,
        )
    if has_current or (not has_older and _CURRENT.instruction in record):
        return _CURRENT
    if has_older or _OLDER.instruction in record:
        return _OLDER
    raise InputError(
        f"missing field {_CURRENT.id!r}; a FLASK instance needs {_CURRENT.fields()} "
        f"(or, older schema, {_OLDER.fields()})",
        path,
        line,
    )


def _skill_order(known_skills: Collection[str]) -> tuple[str, ...]:
    """The skills in the caller's order (sorted, when given as a set)."""
    return tuple(
        sorted(known_skills) if isinstance(known_skills, set | frozenset) else known_skills
    )


def _missing(
    record: dict[str, Any], schema: _Schema, *, custom: bool, reference: bool
) -> list[str]:
    """The fields an instance needs that ``record`` lacks, all of them: FLASK's own
    instances need every field of their schema (the skills unless ``criteria`` names
    them); with custom criteria only the id and the instruction; the reference answer is
    optional where the judges never see it or the criteria are custom."""
    needed = [schema.id, schema.instruction]
    if reference and not custom:
        needed.append(schema.answer)
    if not custom:
        if "criteria" not in record:
            needed.append(schema.skills)
        needed += [schema.domains, schema.difficulty]
    return [key for key in needed if key not in record]


def load_instances(
    path: str,
    known_skills: Collection[str],
    *,
    custom_criteria: bool = False,
    reference: bool = True,
    metadata: bool = True,
) -> list[Instance]:
    """Load FLASK instances from a JSON Lines file, in file order.

    ``known_skills`` are the skill names of the rubric set (or, with ``custom_criteria``,
    the criteria of a :mod:`rubrics.criteria` file, in its order); every instance's
    skills must be among them. With ``custom_criteria`` an instance needs only its id and
    instruction (``answer``, the domains and the difficulty are optional), and without
    ``reference`` (judges never see it) the answer is optional too. Raises InputError
    naming the file and line of the first problem (every missing field of that line).
    Without ``metadata`` (instances to answer or to annotate, not to judge) the skills,
    domains and difficulty are optional: what an instance carries is still checked.
    """
    if not known_skills:
        raise ValueError("known_skills is empty")
    known = frozenset(known_skills)
    order = _skill_order(known_skills)
    listing = ", ".join(order)
    instances: list[Instance] = []
    first_line: dict[str, int] = {}
    schema: _Schema | None = None
    schema_line = 0
    names = _Names(known, listing, "criterion" if custom_criteria else "skill", order)
    for line, record in read_json_lines(path):
        if is_conversation(record):
            unjudged = not custom_criteria and not metadata
            turns = _conversation(record, names, unjudged, path, line)
            add_turns(instances, first_line, turns, path, line)
            continue
        this = _detect_schema(record, path, line)
        if schema is None:
            schema, schema_line = this, line
        elif this is not schema:
            raise InputError(
                f"mixed schemas: this record uses the {this.name} ({this.id}, "
                f"{this.instruction}, ...) but line {schema_line} uses the {schema.name} "
                f"({schema.id}, {schema.instruction}, ...); convert the file to one schema",
                path,
                line,
            )
        missing = _missing(
            record, this, custom=custom_criteria or not metadata, reference=reference
        )
        if missing:
            hint = (
                f"with --criteria an instance needs {this.id} and {this.instruction}; "
                f"{this.answer}, {this.domains} and {this.difficulty} are optional"
                if custom_criteria
                else f"{this.name}: {this.fields()}"
                if metadata
                else f"an instance needs {this.id} and {this.instruction}"
            )
            fields = ", ".join(repr(key) for key in missing)
            plural = "s" if len(missing) > 1 else ""
            raise InputError(f"missing field{plural} {fields} ({hint})", path, line)
        instance_id = _record_id(record[this.id], this.id, path, line)
        previous = first_line.get(instance_id)
        if previous is not None:
            raise InputError(
                f"duplicate instance id {clip(instance_id)} (first on line {previous}); "
                "instance ids must be unique",
                path,
                line,
            )
        first_line[instance_id] = line
        instruction = _string(
            record[this.instruction], this.instruction, path, line, allow_empty=False
        )
        answer = _string(record.get(this.answer, ""), this.answer, path, line, allow_empty=True)
        if "criteria" in record:
            noun = "criterion" if custom_criteria else "skill"
            skills = _skills(record["criteria"], "criteria", known, listing, path, line, noun)
        elif custom_criteria:
            skills = order
        elif not metadata and this.skills not in record:
            skills = ()
        else:
            skills = _skills(record[this.skills], this.skills, known, listing, path, line)
        system_prompt = _string(
            record.get("system_prompt", ""), "system_prompt", path, line, allow_empty=True
        )
        rubrics = (
            _rubrics(record["rubrics"], skills, known, path, line) if "rubrics" in record else {}
        )
        domains = _domains(record.get(this.domains, []), this.domains, path, line)
        difficulty = _difficulty(record.get(this.difficulty, -1), this.difficulty, path, line)
        instances.append(
            Instance(
                id=instance_id,
                instruction=instruction,
                answer=answer,
                skills=skills,
                domains=domains,
                difficulty=difficulty,
                line=line,
                system_prompt=system_prompt,
                rubrics=rubrics,
                images=record_images(record, "images", path, line),
            )
        )
    return instances


# --------------------------------------------------------------------------- conversations


@dataclass(frozen=True)
class _Names:
    """The criteria an instance may name, and those a conversation naming none is judged
    on (every criterion of the run)."""

    known: frozenset[str]
    listing: str
    noun: str
    default: tuple[str, ...]


def _conversation(
    record: dict[str, Any], names: _Names, unjudged: bool, path: str, line: int
) -> list[Instance]:
    """The instances of a conversation record, one per turn (``producer.conversations``);
    ``unjudged``: a conversation naming no skills has none (instances to answer)."""
    key = one_of(record, ("id", "question_id"), path, line)
    if key is None:
        raise InputError(
            "missing field 'id' (or MT-Bench's 'question_id'); a conversation needs an id "
            "and its 'turns'",
            path,
            line,
        )
    conversation = _record_id(record[key], key, path, line)
    turns = user_turns(record, path, line)
    check_conversation_id(conversation, key, len(turns), path, line)
    references = inline_references(record, len(turns), path, line)
    named = one_of(record, ("skills", "criteria"), path, line)
    skills = (
        _skills(record[named], named, names.known, names.listing, path, line, names.noun)
        if named is not None
        else ()
        if unjudged
        else names.default
    )
    template = Instance(
        id=conversation,
        instruction="",
        answer="",
        skills=skills,
        domains=_domains(record.get("domain", []), "domain", path, line),
        difficulty=_difficulty(record.get("difficulty", -1), "difficulty", path, line),
        line=line,
        system_prompt=_string(
            record.get("system_prompt", ""), "system_prompt", path, line, allow_empty=True
        ),
        rubrics=_rubrics(record["rubrics"], skills, names.known, path, line)
        if "rubrics" in record
        else {},
        capability=category(record, path, line),
    )
    return expand(template, turns, references)
