"""The answer cache, as the estimates see it: whether a planned call's answer was paid
for already (by this run or another), looked up with the workers' own cache keys
(``workers.context.cache_key``), so an estimate counts exactly the calls the workers will
answer from the cache, free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from flask_eval.core.settings import Settings
from flask_eval.core.types import JudgeConfig, JudgeSpec
from flask_eval.rubrics.prompt import Message
from flask_eval.storage.db import has_store
from flask_eval.storage.store import Store
from flask_eval.workers.context import cache_key, generate_config


class LedgerCache:
    """The answers kept in ``store`` (a ``producer.estimate.AnswerCache``)."""

    def __init__(self, store: Store, timeout: float) -> None:
        self.store = store
        self.timeout = timeout
        self._names: dict[str, str] = {}

    def _name(self, spec: str) -> str:
        """The judge's name in its cache keys (``Judge.name``: its canonical spec)."""
        name = self._names.get(spec)
        if name is None:
            name = self._names[spec] = JudgeSpec.parse(spec).name
        return name

    def answered(
        self, asks: Sequence[tuple[JudgeConfig, list[Message], Mapping[str, Any] | None]]
    ) -> list[bool]:
        keys = [
            cache_key(
                self._name(judge.spec), messages, generate_config(judge, self.timeout, schema)
            )
            for judge, messages, schema in asks
        ]
        found = self.store.cached_calls(keys)
        return [key in found for key in keys]


def existing_cache(settings: Settings) -> LedgerCache | None:
    """The cache of the configured database if it exists already (`--dry-run` creates
    nothing, not even an empty store); None otherwise."""
    if not has_store(settings.database_url):
        return None
    return LedgerCache(Store(settings.database_url), settings.judge_timeout)
