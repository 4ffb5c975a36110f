"""Conversations written back as instances files hold them: one record per conversation
(``producer.conversations``' own shape: ``id``, ``turns``, ``references``, and what else
it carries), so that a file written by `annotate` or `eval` loads again as the same
turns, each with its earlier turns (``Instance.history``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from flask_eval.core.types import DIFFICULTY_LABELS, Instance

__all__ = ["conversation_record", "grouped"]


def grouped(instances: Iterable[Instance]) -> Iterator[Instance | list[Instance]]:
    """``instances`` in order, a conversation's turns together (a list, in turn order)
    where its first turn given comes; a one-shot instance alone."""
    turns: dict[str, list[Instance]] = {}
    order: list[Instance | str] = []
    for i in instances:
        if i.conversation is None:
            order.append(i)
        elif i.conversation in turns:
            turns[i.conversation].append(i)
        else:
            turns[i.conversation] = [i]
            order.append(i.conversation)
    for item in order:
        yield item if isinstance(item, Instance) else sorted(turns[item], key=_turn)


def _turn(instance: Instance) -> int:
    return instance.turn or 1


def conversation_record(turns: list[Instance], criteria_key: str = "skills") -> dict[str, Any]:
    """The record of a conversation whose turns are ``turns`` (its last turn's history
    gives the earlier ones: turns 1 to the last given are written). Its skills (under
    ``criteria_key``), domains and difficulty are written when it has them: a
    conversation that names no skills is judged on every criterion of the run."""
    last = turns[-1]
    users = [t.user for t in last.history] + [last.instruction]
    references = [t.reference for t in last.history] + [last.answer]
    record: dict[str, Any] = {"id": last.conversation, "turns": users}
    if any(references):
        record["references"] = references
    if last.skills:
        record[criteria_key] = list(last.skills)
    if last.domains:
        record["domain"] = list(last.domains)
    if last.difficulty:
        record["difficulty"] = DIFFICULTY_LABELS[last.difficulty - 1]
    if last.system_prompt:
        record["system_prompt"] = last.system_prompt
    if last.capability:
        record["category"] = last.capability
    return record
