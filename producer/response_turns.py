"""The lines of a responses file (``producer.responses``) that concern conversations
(``producer.conversations``): a line answering a whole conversation, checked against its
turns in the instances file, and the one-answer lines that may not name a conversation
or one of its turns (a conversation is answered on one line). Each problem raises
:class:`~core.errors.InputError` naming the file and line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flask_eval.core.conversations import split_turn_id, turn_id
from flask_eval.core.errors import InputError
from flask_eval.core.text import clip
from flask_eval.producer.conversations import answer_turns
from flask_eval.producer.record_fields import record_id, required

__all__ = ["Answered", "check_new_conversation", "check_not_turn", "conversation_answer", "turn_of"]


def turn_of(instance_id: str, turns: Mapping[str, int]) -> bool:
    """Whether ``instance_id`` is a turn of one of the conversations ``turns``."""
    split = split_turn_id(instance_id)
    return split is not None and 0 < split[1] <= turns.get(split[0], 0)


def check_not_turn(
    qid: str, canonical: Mapping[str, str], turns: Mapping[str, int], path: str, line: int
) -> None:
    """InputError for a one-answer line (``text``) naming a conversation or one of its
    turns: a conversation is answered on one line, every turn (the judge of turn k is
    shown the model's answers to the turns before it)."""
    if not turns:
        return
    if qid in canonical:
        split = split_turn_id(qid)
        if split is not None and turn_of(qid, turns):
            raise InputError(
                f"instance {clip(qid)} is turn {split[1]} of conversation {clip(split[0])}; "
                f"answer the conversation on one line: "
                f'{{"question_id": {clip(split[0])}, "turns": [...]}}',
                path,
                line,
            )
    elif qid in turns:
        raise InputError(
            f"{clip(qid)} is a conversation of {turns[qid]} turn(s); give the model's answer "
            "to each in 'turns' instead of 'text'",
            path,
            line,
        )


def check_new_conversation(first: str, first_line: Mapping[str, int], path: str, line: int) -> None:
    """InputError for a conversation answered twice (``first``: its first turn's id)."""
    previous = first_line.get(first)
    if previous is not None:
        conversation = first.rpartition(":")[0]
        raise InputError(
            f"duplicate response for conversation {clip(conversation)} (first on line "
            f"{previous}); keep one response per conversation",
            path,
            line,
        )


@dataclass(frozen=True)
class Answered:
    """A conversation line: the ids of its turns' instances, the answers, and whether
    the conversation is not in the instances file (its responses are ignored)."""

    ids: tuple[str, ...]
    answers: tuple[str, ...]
    unknown: bool


_CONVERSATION_HINT = (
    "a conversation's response needs question_id (or id) and turns (or FastChat's choices)"
)


def conversation_answer(
    record: dict[str, Any],
    path: str,
    line: int,
    canonical: Mapping[str, str],
    turns: Mapping[str, int],
) -> Answered:
    """A line answering a conversation, checked against the conversation's turns."""
    given = [key for key in ("question_id", "id") if key in record]
    if len(given) > 1:
        raise InputError("fields 'question_id' and 'id' both given; give one", path, line)
    key = given[0] if given else "question_id"
    conversation = record_id(required(record, key, path, line, _CONVERSATION_HINT), key, path, line)
    answers = answer_turns(record, path, line)
    count = turns.get(conversation)
    if count is None:
        if conversation in canonical:
            raise InputError(
                f"instance {clip(conversation)} is not a conversation; answer it with 'text'",
                path,
                line,
            )
        unknown = tuple(turn_id(conversation, k) for k in range(1, len(answers) + 1))
        taken = next((i for i in unknown if i in canonical), None)
        if taken is not None:
            raise InputError(
                f"{clip(conversation)} is not a conversation of the instances file, and "
                f"{clip(taken)} is an instance of its own; answer that instance with 'text'",
                path,
                line,
            )
        return Answered(unknown, answers, True)
    if len(answers) != count:
        raise InputError(
            f"conversation {clip(conversation)} has {count} turn(s) in the instances file, "
            f"this response gives {len(answers)} answer(s); give one answer per turn",
            path,
            line,
        )
    ids = tuple(canonical[turn_id(conversation, k)] for k in range(1, count + 1))
    return Answered(ids, answers, False)
