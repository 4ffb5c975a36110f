"""The earlier answers stored with a run's responses to conversations' turns
(``response.history``), by (model, instance): what a judge of such a turn is shown
besides the response, for the estimates of a stored run's calls."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import select

from flask_eval.storage.models import RESPONSE
from flask_eval.storage.records import answers_of
from flask_eval.storage.store import Store

__all__ = ["response_histories"]

R = RESPONSE.c
#: instance ids per statement (SQLite's bound parameters are limited)
IDS_PER_QUERY = 900

Key = tuple[str, str]  # (model, instance id)


def response_histories(
    store: Store, run_id: int, keys: Collection[Key] | None = None
) -> dict[Key, tuple[str, ...]]:
    """Each stored response's earlier answers, where it has any: of every response of the
    run, or of those among ``keys``."""
    base = select(R.model, R.instance_id, R.history).where(R.run_id == run_id, R.history != "[]")
    wanted = None if keys is None else set(keys)
    statements = [base]
    if wanted is not None:
        ids = sorted({i for _, i in wanted})
        statements = [
            base.where(R.instance_id.in_(ids[start : start + IDS_PER_QUERY]))
            for start in range(0, len(ids), IDS_PER_QUERY)
        ]
    out: dict[Key, tuple[str, ...]] = {}
    with store.engine.connect() as conn:
        for stmt in statements:
            for model, instance, history in conn.execute(stmt):
                key = (str(model), str(instance))
                answers = answers_of(history)
                if answers and (wanted is None or key in wanted):
                    out[key] = answers
    return out
