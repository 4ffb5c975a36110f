"""A parked batch call (workers/batch_lane.py) as the ledger keeps it: what it keeps of
the call's rendering (:func:`request_of`, read back by :func:`generate_of`), its estimated
prompt tokens (:func:`tokens_of`) and which planned calls fit a token budget
(:func:`within_tokens`)."""

from __future__ import annotations

from typing import Any

from flask_eval.rubrics.messages import text_of, to_data
from flask_eval.storage.batch_rows import OpenCall
from flask_eval.workers.calls import Call
from flask_eval.workers.judge import GenerateConfig


def request_of(call: Call) -> dict[str, Any]:
    """What a parked call keeps of its rendering: enough to send it in a batch."""
    g = call.generate
    schema = None if g.schema is None else dict(g.schema)
    generate = {
        "max_tokens": g.max_tokens,
        "temperature": g.temperature,
        "timeout": g.timeout,
        "schema": schema,
        "seed": g.seed,
    }
    return {"messages": to_data(call.messages), "generate": generate}


def tokens_of(call: Call) -> int:
    """A parked call's prompt tokens, estimated (four characters a token)."""
    return sum(len(text_of(m)) for m in call.messages) // 4 + 1


def generate_of(data: dict[str, Any]) -> GenerateConfig:
    return GenerateConfig(**data)


def within_tokens(calls: list[OpenCall], room: int, at_least_one: bool) -> list[OpenCall]:
    """The first of ``calls`` whose tokens fit in ``room`` (one at least if ``at_least_one``:
    a call larger than the whole limit still goes, alone)."""
    chosen: list[OpenCall] = []
    used = 0
    for c in calls:
        if used + c.tokens > room and (chosen or not at_least_one):
            break
        chosen.append(c)
        used += c.tokens
    return chosen
