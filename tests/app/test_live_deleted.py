"""The live view of a run deleted while its counts were read: said deleted, never shown
finished at 0 of 0 (which made `status --watch` exit 0 instead of 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flask_eval.app import progress
from flask_eval.storage.store import Store
from tests.app.test_raters_io import make_run


def test_a_run_deleted_between_the_check_and_its_counts_is_said_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(f"sqlite:///{tmp_path / 'live.db'}")
    info = make_run(store, 3)
    assert not progress.live_view(store, [info]).finished  # its judges' rows are pending
    counts = progress.live.judge_counts

    def deleted_first(store_: Store, run_id: int, window: float) -> object:
        store_.delete_run(run_id)  # `runs delete` commits just before the counts are read
        return counts(store_, run_id, window)

    monkeypatch.setattr(progress.live, "judge_counts", deleted_first)
    view = progress.live_view(store, [info])
    assert [r.deleted for r in view.runs] == [True]
    assert view.finished
