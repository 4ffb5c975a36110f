"""A rater of a conversation's turn sees the turns before it, with the rated model's own
earlier answers (app/rating.py), as a judge does."""

from __future__ import annotations

from pathlib import Path

from flask_eval.app.rating import EarlierTurn, build_page
from flask_eval.storage.ratings import RatingItem
from flask_eval.storage.store import Store
from tests.app.test_prompt_keys import conversation_run
from tests.storage.test_store import SKILLS


def item(run_id: int, instance: str) -> RatingItem:
    criteria = (SKILLS.names[0],)
    return RatingItem(
        1, run_id, "memory/j1", "beta", "", instance, criteria, False, "open", None, None, None, 0
    )


def test_a_turn_twos_page_shows_the_turn_before_it(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        run = conversation_run(store)
        second = build_page(store, item(run.id, "81:t2"))
        first = build_page(store, item(run.id, "81:t1"))
    finally:
        store.close()
    assert second.instruction == "Rewrite it starting with A."
    assert second.responses == ("beta turn two",)
    assert second.earlier == (
        EarlierTurn("Plan a trip to Hawaii.", "Maui.", ("beta turn one answer",)),
    )
    assert first.earlier == ()
