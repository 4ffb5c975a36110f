"""Conversations in input files: their user turns, references and a model's answers.

An instances file may hold conversations (a record with ``turns``, one record for the
whole conversation) beside one-shot instructions. Two shapes load as they are:

* MT-Bench's ``question.jsonl`` (lm-sys/FastChat, ``fastchat/llm_judge/data/mt_bench``):
  ``{question_id, category, turns: [turn1, turn2], reference?: [ref1, ref2]}``;
  ``question_id`` (an integer) becomes the conversation's id ``"81"``;
* ours: ``{id, turns, references?, skills?, system_prompt?, category?, domain?,
  difficulty?}``; ``criteria`` may name the criteria as in one-shot instances, and
  ``reference`` is read as ``references``.

A conversation of N turns becomes N instances (:func:`expand`), ids
``core.conversations.turn_id(conv, k)`` (``"81:t1"``, ``"81:t2"``): turn k's instance has
the user's turn k as its instruction, turn k's reference (``""``: none) as its answer and
the earlier turns, each with its reference, as its history. ``category`` is the
instance's ``capability`` (the report's capability rows: MT-Bench's categories). A
conversation that names no skills (``skills`` or ``criteria``) is judged on every
criterion of the run (FLASK's skills, a ``--rubrics`` set or a ``--criteria`` file),
as instances are with custom criteria; references are optional (MT-Bench gives them for
some categories only).

References per turn come inline (``reference``/``references``: at most one per turn, the
last ones may be left out) or from a reference-answer file (:func:`load_reference_answers`,
``run --reference-answers FILE``): FastChat's ``model_answer`` format, MT-Bench's
``reference_answer/gpt-4.jsonl``, ``{question_id, answer_id, model_id, choices: [{index,
turns: [a1, a2]}], tstamp}``, whose ``question_id`` names a conversation and whose
``choices[0].turns`` give one reference per turn; they replace the conversation's inline
references.

A model's response to a conversation (``producer.responses``) is one line per
conversation: ``{"id"|"question_id": ..., "turns": [a1, a2]}``, or FastChat's
``model_answer`` line (``choices[0].turns``); it becomes one response per turn, turn k's
answer as its text and the answers before it as its history (:func:`answer_turns`).
Every problem raises :class:`~core.errors.InputError` naming the file and line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from flask_eval.core.conversations import MAX_TURNS, Turn, turn_id
from flask_eval.core.errors import InputError
from flask_eval.core.jsonl import json_type, read_json_lines
from flask_eval.core.limits import MAX_DOMAIN, MAX_INSTANCE_ID
from flask_eval.core.text import clip
from flask_eval.core.types import Instance
from flask_eval.producer.importing import RubricProblem, check_identifier

__all__ = [
    "TurnIds",
    "add_turns",
    "answer_turns",
    "attach_references",
    "category",
    "check_conversation_id",
    "expand",
    "inline_references",
    "is_conversation",
    "is_conversation_answer",
    "load_reference_answers",
    "one_of",
    "user_turns",
]

_REFERENCE_FILE = "a reference answer file (FastChat's model_answer JSON Lines)"


def is_conversation(record: Mapping[str, Any]) -> bool:
    """Whether an instances file's record is a conversation (it has ``turns``)."""
    return "turns" in record


def is_conversation_answer(record: Mapping[str, Any]) -> bool:
    """Whether a responses file's record answers a conversation (``turns``, or FastChat's
    ``choices``)."""
    return "turns" in record or "choices" in record


def _turn_list(value: object, key: str, path: str, line: int, *, allow_empty: bool) -> list[str]:
    """A list of 1 to MAX_TURNS strings (empty strings only with ``allow_empty``)."""
    if not isinstance(value, list):
        raise InputError(
            f"field {key!r} must be a list of turns (strings), got {json_type(value)}", path, line
        )
    if not value:
        raise InputError(
            f"field {key!r} is empty; a conversation has at least one turn", path, line
        )
    if len(value) > MAX_TURNS:
        raise InputError(
            f"field {key!r} has {len(value)} turns; a conversation has at most {MAX_TURNS}",
            path,
            line,
        )
    for n, turn in enumerate(value, 1):
        if not isinstance(turn, str):
            raise InputError(
                f"field {key!r}: turn {n} must be a string, got {json_type(turn)}", path, line
            )
        if not allow_empty and not turn.strip():
            raise InputError(f"field {key!r}: turn {n} is empty", path, line)
    return value


def one_of(record: Mapping[str, Any], keys: tuple[str, ...], path: str, line: int) -> str | None:
    """The one of ``keys`` the record has (None: none); InputError when it has several."""
    given = [key for key in keys if key in record]
    if len(given) > 1:
        raise InputError(f"fields {given[0]!r} and {given[1]!r} both given; give one", path, line)
    return given[0] if given else None


def category(record: Mapping[str, Any], path: str, line: int) -> str | None:
    """A conversation's ``category`` (MT-Bench's), its instances' capability; None: none."""
    value = record.get("category")
    if value is None:
        return None
    try:
        return check_identifier(value, "field 'category'", MAX_DOMAIN)
    except RubricProblem as exc:
        raise InputError(str(exc), path, line) from None


def user_turns(record: Mapping[str, Any], path: str, line: int) -> tuple[str, ...]:
    """A conversation's user turns (``turns``): 1 to MAX_TURNS non-empty strings."""
    return tuple(_turn_list(record["turns"], "turns", path, line, allow_empty=False))


def inline_references(
    record: Mapping[str, Any], turns: int, path: str, line: int
) -> tuple[str, ...]:
    """One reference per turn (``""``: none) from ``reference`` (MT-Bench's) or
    ``references`` (ours): a list of strings, no longer than the turns."""
    keys = [key for key in ("reference", "references") if key in record]
    if len(keys) > 1:
        raise InputError("fields 'reference' and 'references' both given; give one", path, line)
    if not keys:
        return ("",) * turns
    key = keys[0]
    value = record[key]
    if not isinstance(value, list) or not all(isinstance(r, str) for r in value):
        shown = json_type(value) if not isinstance(value, list) else "a list with a non-string"
        raise InputError(
            f"field {key!r} must be a list of reference answers (strings), one per turn, "
            f"got {shown}",
            path,
            line,
        )
    if len(value) > turns:
        raise InputError(
            f"field {key!r} has {len(value)} references for {turns} turn(s); give at most "
            "one per turn",
            path,
            line,
        )
    return (*value, *("",) * (turns - len(value)))


def check_conversation_id(conversation: str, key: str, turns: int, path: str, line: int) -> None:
    """InputError when the ids of the conversation's turns would be longer than an
    instance id may be (``core.limits.MAX_INSTANCE_ID``)."""
    longest = MAX_INSTANCE_ID - len(turn_id("", turns))
    if len(conversation) > longest:
        raise InputError(
            f"field {key!r} is longer than {longest} characters (its turns' ids add "
            f"':t1' ... ':t{turns}'): {clip(conversation)}",
            path,
            line,
        )


def expand(template: Instance, turns: Sequence[str], references: Sequence[str]) -> list[Instance]:
    """The instances of a conversation: one per turn, from ``template`` (the
    conversation's id, skills, domains, difficulty, system prompt, capability, line)."""
    conversation = template.id
    history = tuple(Turn(user, ref) for user, ref in zip(turns, references, strict=True))
    return [
        replace(
            template,
            id=turn_id(conversation, k),
            instruction=turns[k - 1],
            answer=references[k - 1],
            turn=k,
            conversation=conversation,
            history=history[: k - 1],
        )
        for k in range(1, len(turns) + 1)
    ]


def add_turns(
    instances: list[Instance],
    first_line: dict[str, int],
    turns: Sequence[Instance],
    path: str,
    line: int,
) -> None:
    """A conversation's turns (from ``line``) added to ``instances``, each id unique
    among the file's instances (``first_line``: id -> its line)."""
    for turn in turns:
        previous = first_line.get(turn.id)
        if previous is not None:
            raise InputError(
                f"conversation {clip(turn.conversation)}: the id of its turn {turn.turn}, "
                f"{clip(turn.id)}, is already an instance id (line {previous}); instance "
                "ids must be unique",
                path,
                line,
            )
        first_line[turn.id] = line
    instances.extend(turns)


class TurnIds(dict[str, str]):
    """Instance id -> the instance's own id string (what ``load_responses`` checks a
    responses file against), and ``turns``: each conversation's number of turns."""

    def __init__(self, instances: Iterable[Instance]) -> None:
        super().__init__()
        self.turns: dict[str, int] = {}
        for instance in instances:
            self[instance.id] = instance.id
            if instance.conversation is not None and instance.turn is not None:
                known = self.turns.get(instance.conversation, 0)
                self.turns[instance.conversation] = max(known, instance.turn)


def answer_turns(record: Mapping[str, Any], path: str, line: int) -> tuple[str, ...]:
    """The answers of a conversation line (a model's, or references): ``turns``, or
    FastChat's ``choices[0].turns``; 1 to MAX_TURNS strings, empty ones allowed."""
    if "text" in record:
        raise InputError(
            "a response gives 'text' (the answer to one instance) or 'turns' (the answers "
            "to a conversation's turns), not both",
            path,
            line,
        )
    if "turns" in record and "choices" in record:
        raise InputError("fields 'turns' and 'choices' both given; give one", path, line)
    if "turns" in record:
        return tuple(_turn_list(record["turns"], "turns", path, line, allow_empty=True))
    choices = record["choices"]
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        shown = "an empty list" if choices == [] else json_type(choices)
        raise InputError(
            f"field 'choices' must be a list of objects with 'turns' (FastChat's "
            f"model_answer format), got {shown}",
            path,
            line,
        )
    if "turns" not in choices[0]:
        raise InputError("missing field 'choices[0].turns'", path, line)
    return tuple(_turn_list(choices[0]["turns"], "choices[0].turns", path, line, allow_empty=True))


def _question_id(record: Mapping[str, Any], path: str, line: int) -> str:
    """A reference answer's ``question_id`` (an integer or a string) as a conversation id."""
    if "question_id" not in record:
        raise InputError("missing field 'question_id' (the conversation's id)", path, line)
    value = record["question_id"]
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value
    raise InputError(
        f"field 'question_id' must be an integer or a non-empty string, got {json_type(value)}",
        path,
        line,
    )


def load_reference_answers(path: str, instances: Sequence[Instance]) -> tuple[Instance, ...]:
    """``instances`` with the references of a reference-answer file attached to the turns
    of the conversations it names (replacing their inline references).

    Each line is FastChat's ``model_answer`` (``question_id`` and ``choices[0].turns``,
    or ``turns``): its ``question_id`` must name a conversation of ``instances``, once,
    and give exactly one answer per turn. The file may leave conversations out (MT-Bench
    gives references for math, reasoning and coding only). InputError names the line.
    """
    turns: dict[str, int] = TurnIds(instances).turns
    if not turns:
        raise InputError(
            "the instances hold no conversation (records with 'turns'): reference answers "
            "attach to conversations' turns",
            path,
        )
    found: dict[str, tuple[str, ...]] = {}
    first_line: dict[str, int] = {}
    for line, record in read_json_lines(path, _REFERENCE_FILE):
        conversation = _question_id(record, path, line)
        if not is_conversation_answer(record):
            raise InputError(
                "missing field 'choices' (FastChat's model_answer format: "
                "choices[0].turns, one answer per turn)",
                path,
                line,
            )
        answers = answer_turns(record, path, line)
        count = turns.get(conversation)
        if count is None:
            raise InputError(
                f"question_id {clip(conversation)} names no conversation of the instances",
                path,
                line,
            )
        if conversation in first_line:
            raise InputError(
                f"duplicate reference answer for conversation {clip(conversation)} "
                f"(first on line {first_line[conversation]})",
                path,
                line,
            )
        first_line[conversation] = line
        if len(answers) != count:
            raise InputError(
                f"conversation {clip(conversation)} has {count} turn(s), its reference "
                f"answer gives {len(answers)}",
                path,
                line,
            )
        found[conversation] = answers
    return attach_references(instances, found)


def attach_references(
    instances: Iterable[Instance], references: Mapping[str, Sequence[str]]
) -> tuple[Instance, ...]:
    """``instances`` with the references of each conversation named in ``references``
    (one per turn) as its turns' answers and in their histories."""
    out: list[Instance] = []
    for instance in instances:
        refs = references.get(instance.conversation) if instance.conversation else None
        if refs is None or instance.turn is None:
            out.append(instance)
            continue
        history = tuple(Turn(t.user, refs[n]) for n, t in enumerate(instance.history))
        out.append(replace(instance, answer=refs[instance.turn - 1], history=history))
    return tuple(out)
