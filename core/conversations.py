"""Conversations: an instance may be one turn of a multi-turn conversation (pure).

A conversation of N user turns (MT-Bench's ``turns``) becomes N ledger instances, one per
turn, whose ids are :func:`turn_id` (``"81:t2"``): each is judged with the conversation up
to it in view (docs/design/conversations.md). The instance of turn k carries the user's
turn k as its ``instruction`` (its reference as its ``answer``) and the earlier turns as
``history`` (:class:`Turn`: the user's text and its reference); a model's response to it
carries its answer to turn k as ``text`` and its earlier answers as ``history``. So each
ledger row holds everything its judge call shows, and no call reads another row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: the most user turns of one conversation
MAX_TURNS = 20

_TURN_ID = re.compile(r"^(?P<conversation>.+):t(?P<turn>[1-9][0-9]?)$")


@dataclass(frozen=True)
class Turn:
    """One earlier user turn of a conversation, and its reference answer ("": none)."""

    user: str
    reference: str = ""

    def to_data(self) -> dict[str, str]:
        return {"user": self.user, "reference": self.reference}


def turn_id(conversation: str, turn: int) -> str:
    """The instance id of turn ``turn`` (1-based) of the conversation ``conversation``."""
    return f"{conversation}:t{turn}"


def split_turn_id(instance_id: str) -> tuple[str, int] | None:
    """``(conversation, turn)`` of a turn's instance id, None for any other id."""
    match = _TURN_ID.match(instance_id)
    if match is None:
        return None
    return match["conversation"], int(match["turn"])
