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
and JSON, no NUL or lone surrogate in any string, each key once), their fields by
:mod:`producer.record_fields` (ids checked against :data:`core.limits.MAX_INSTANCE_ID`,
the length of their column, so SQLite and PostgreSQL accept exactly the same inputs);
every user value in a message is clipped.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from flask_eval.core.errors import InputError
from flask_eval.core.jsonl import MAX_LINE_BYTES, read_json_lines
from flask_eval.core.text import clip
from flask_eval.core.types import Instance
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
from flask_eval.producer.record_fields import (
    difficulty_level,
    domain_names,
    instance_rubrics,
    record_id,
    skill_names,
    string,
)

__all__ = ["MAX_LINE_BYTES", "load_instances", "read_json_lines"]


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
        instance_id = record_id(record[this.id], this.id, path, line)
        previous = first_line.get(instance_id)
        if previous is not None:
            raise InputError(
                f"duplicate instance id {clip(instance_id)} (first on line {previous}); "
                "instance ids must be unique",
                path,
                line,
            )
        first_line[instance_id] = line
        instruction = string(
            record[this.instruction], this.instruction, path, line, allow_empty=False
        )
        answer = string(record.get(this.answer, ""), this.answer, path, line, allow_empty=True)
        if "criteria" in record:
            noun = "criterion" if custom_criteria else "skill"
            skills = skill_names(record["criteria"], "criteria", known, listing, path, line, noun)
        elif custom_criteria:
            skills = order
        elif not metadata and this.skills not in record:
            skills = ()
        else:
            skills = skill_names(record[this.skills], this.skills, known, listing, path, line)
        system_prompt = string(
            record.get("system_prompt", ""), "system_prompt", path, line, allow_empty=True
        )
        rubrics = (
            instance_rubrics(record["rubrics"], skills, known, path, line)
            if "rubrics" in record
            else {}
        )
        domains = domain_names(record.get(this.domains, []), this.domains, path, line)
        difficulty = difficulty_level(record.get(this.difficulty, -1), this.difficulty, path, line)
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
    conversation = record_id(record[key], key, path, line)
    turns = user_turns(record, path, line)
    check_conversation_id(conversation, key, len(turns), path, line)
    references = inline_references(record, len(turns), path, line)
    named = one_of(record, ("skills", "criteria"), path, line)
    skills = (
        skill_names(record[named], named, names.known, names.listing, path, line, names.noun)
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
        domains=domain_names(record.get("domain", []), "domain", path, line),
        difficulty=difficulty_level(record.get("difficulty", -1), "difficulty", path, line),
        line=line,
        system_prompt=string(
            record.get("system_prompt", ""), "system_prompt", path, line, allow_empty=True
        ),
        rubrics=instance_rubrics(record["rubrics"], skills, names.known, path, line)
        if "rubrics" in record
        else {},
        capability=category(record, path, line),
    )
    return expand(template, turns, references)
