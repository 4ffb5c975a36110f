"""The stored responses of a run by (model, instance): their lengths, or their texts, for
the calls asked about only (a large run's estimate reads its open calls a chunk at a
time: holding every text, as ``Store.run_texts`` does, would take gigabytes at 10M)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import ColumnElement, func, select

from flask_eval.storage.models import RESPONSE
from flask_eval.storage.store import Store

__all__ = ["response_lengths", "response_texts"]

R = RESPONSE.c
#: instance ids per statement (SQLite's bound parameters are limited)
IDS_PER_QUERY = 900

Key = tuple[str, str]  # (model, instance id)


def response_lengths(store: Store, run_id: int, keys: Collection[Key]) -> dict[Key, int]:
    """The length in characters of each stored response among ``keys``."""
    return {k: int(v) for k, v in _read(store, run_id, keys, func.length(R.text)).items()}


def response_texts(store: Store, run_id: int, keys: Collection[Key]) -> dict[Key, str]:
    """The text of each stored response among ``keys``."""
    return {k: str(v) for k, v in _read(store, run_id, keys, R.text).items()}


def _read(
    store: Store, run_id: int, keys: Collection[Key], column: ColumnElement[Any]
) -> dict[Key, Any]:
    wanted = set(keys)
    ids = sorted({i for _, i in wanted})
    models = sorted({m for m, _ in wanted})
    out: dict[Key, Any] = {}
    with store.engine.connect() as conn:
        for start in range(0, len(ids), IDS_PER_QUERY):
            stmt = select(R.model, R.instance_id, column).where(
                R.run_id == run_id,
                R.instance_id.in_(ids[start : start + IDS_PER_QUERY]),
                R.model.in_(models),
            )
            for model, instance, value in conn.execute(stmt):
                key = (str(model), str(instance))
                if key in wanted:
                    out[key] = value
    return out
