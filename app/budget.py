"""A run's judge settings that may change after it was written (budgets, concurrency,
prices) and its cost budget (``--max-cost``): what a later `run` or `resume` stores, and
the check, before anything is written, that every judge of a budgeted run has a price.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from flask_eval.app.cache import LedgerCache
from flask_eval.core.stored import StoredConfig
from flask_eval.core.types import JudgeConfig
from flask_eval.producer.estimate import CallCosts
from flask_eval.producer.prices import check_budget_prices, unpriced
from flask_eval.producer.sampling import CallSampler
from flask_eval.storage.db import has_store
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store

#: judge settings a later `run` may change: budgets, concurrency and prices (stored with
#: the run and used by the workers); names, specs and sampling settings may not
MUTABLE_JUDGE_FIELDS = ("rpm", "tpm", "max_in_flight", "price", "retry_max_tokens")

#: judgments up to which a metered run's calls are each rendered to meter them (exact, the
#: run's texts held); a larger run's costs are sampled (producer.sampling)
EXACT_METERING = 100_000


def update_judges(
    store: Store, run: RunInfo, judges: Sequence[JudgeConfig]
) -> tuple[RunInfo, list[str]]:
    """Store the budgets, concurrency and prices of ``judges`` with the run (workers read
    them with their next message); returns the run and what changed, as text."""
    changed: list[str] = []

    def change(config: StoredConfig) -> StoredConfig:
        updated, said = config.with_judge_settings(judges, MUTABLE_JUDGE_FIELDS)
        changed[:] = said
        return updated

    updated = store.update_config(run.id, change)
    return updated, changed


def set_max_cost(store: Store, run: RunInfo, max_cost: float | None) -> RunInfo:
    """The run's cost budget: a new --max-cost replaces the stored one; none keeps it."""
    if max_cost is None:
        return run
    return store.update_config(run.id, lambda config: config.with_max_cost(max_cost))


def check_budget(
    judges: Sequence[JudgeConfig], run_name: str, database_url: str, max_cost: float | None
) -> None:
    """Before anything is written: ConfigError when ``max_cost`` is set and a judge has
    no price, neither given nor stored with the run ``run_name`` (read from the database
    only if it exists)."""
    if max_cost is None or not unpriced(judges):
        return
    existing = None
    if has_store(database_url):
        store = Store(database_url)
        try:
            existing = store.find_run(run_name)
        finally:
            store.close()
    check_budget_prices(prices_after(judges, existing), max_cost)


def prices_after(judges: Sequence[JudgeConfig], run: RunInfo | None) -> list[JudgeConfig]:
    """``judges`` with the prices ``run`` holds once they are given to it
    (``update_judges``): a judge's own price, else the one stored with the run."""
    stored = {j.name: j.price for j in run.config.judges} if run else {}
    return [j if j.price is not None else replace(j, price=stored.get(j.name)) for j in judges]


def meter(
    judgments: int,
    exact: Callable[[], CallCosts],
    sample: Callable[[], CallSampler],
    cache: LedgerCache,
) -> CallCosts:
    """What meters a run's calls: up to :data:`EXACT_METERING` judgments each call
    rendered (its texts held); past it every call counted and a sample rendered, the
    budget kept at the groups' means (docs/design/estimates.md)."""
    if judgments <= EXACT_METERING:
        return exact()
    sampler = sample()
    sampler.summarize(cache)
    return sampler
