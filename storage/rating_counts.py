"""People's rating items of a run counted per rater: how many they skipped at least once
(what calibration warns about: skipped items are not a random part of a queue)."""

from __future__ import annotations

from sqlalchemy import func, select

from flask_eval.storage.models import RATING_ITEM
from flask_eval.storage.retry import transient_retry
from flask_eval.storage.store import Store

RI = RATING_ITEM.c


@transient_retry
def skipped_items(store: Store, run_id: int) -> dict[str, int]:
    """Ledger name of each rater of run ``run_id`` -> the items they skipped at least once."""
    stmt = (
        select(RI.judge, func.count()).where(RI.run_id == run_id, RI.skips > 0).group_by(RI.judge)
    )
    with store.engine.connect() as conn:
        return {str(judge): int(n) for judge, n in conn.execute(stmt)}
