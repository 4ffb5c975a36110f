"""The rating workspace over the store's own rating tables (no stand-in): ratings planned
for two raters, each signing in and rating their items; what lands in the ledger (the
scores, N/A, rationales, the flagged reason, the value's time and order), exactly once,
and nothing of another rater's. Skips where the store has no rating tables."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from sqlalchemy import select

# isort: off
from tests.viewer.rate_fake import FakeRatings  # first: storage.ratings importable
from tests.viewer import rate_setup
from tests.viewer.rate_setup import Client, Runs

# isort: on
from flask_eval.app.rater_tokens import hash_token, new_token
from flask_eval.core.people import rater_judge
from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND
from flask_eval.storage import models, ratings
from flask_eval.viewer import rate_server
from flask_eval.viewer.rate_security import RateOptions

pytestmark = pytest.mark.skipif(
    not hasattr(models, "RATING_ITEM"), reason="the store has no rating tables yet"
)


@pytest.fixture
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    found = rate_setup.make_runs(tmp_path_factory.mktemp("rate-store"), FakeRatings())
    yield found
    found.store.close()


def plan(runs: Runs, rater: str, instances: list[str], pairwise: bool = False) -> None:
    run = runs.pairwise if pairwise else runs.absolute
    shown = runs.store.instances(run.id, instances)
    items = [
        ratings.PlannedRating(
            judge=rater_judge(rater),
            model=rate_setup.MODEL_A,
            model_b=rate_setup.MODEL_B if pairwise else "",
            instance_id=i,
            criteria=tuple(shown[i].skills),
            rank=float(n + 10 * pairwise),  # the comparisons after the others
            swapped=pairwise and n % 2 == 0,
        )
        for n, i in enumerate(instances)
    ]
    assert ratings.plan_ratings(runs.store, run.id, items) == len(items)


def signed_in(runs: Runs, rater: str) -> Client:
    token = new_token()
    ratings.add_rater(runs.store, rater, hash_token(token), None, False)
    client = Client(rate_server.make_app(runs.store, RateOptions()))
    assert client.signin(token).status == 200
    return client


def rows(runs: Runs, rater: str) -> list[dict[str, object]]:
    j = models.JUDGMENT.c
    with runs.store.engine.connect() as conn:
        found = conn.execute(
            select(j.instance_id, j.criterion, j.model_b, j.status, j.score, j.rationale)
            .add_columns(j.value, j.reason, j.detail)
            .where(j.judge == rater_judge(rater))
            .order_by(j.id)
        )
        return [dict(r._mapping) for r in found]


def path(url: str) -> str:
    return urlsplit(url).path


def fill(page: str, choice: str | None = None) -> dict[str, str]:
    form = {"csrf": re.findall(r'name="csrf" value="([^"]+)"', page)[0]}
    for field, value in re.findall(r'<input type="radio" name="(c\d+)" value="([^"]+)"', page):
        form.setdefault(field, choice or value)
    return form


def test_two_raters_rate_their_own_items_into_the_ledger(runs: Runs) -> None:
    plan(runs, "alice", ["1", "2"])
    plan(runs, "alice", ["1", "2"], pairwise=True)
    plan(runs, "bob", ["3"])
    alice, bob = signed_in(runs, "alice"), signed_in(runs, "bob")
    try:
        first = alice.get("/rate/next")
        assert re.search(r"/rate/item/\d+$", first.url)
        own = first.url.rsplit("/", 1)[1]
        assert bob.get(f"/rate/item/{own}").status == 403
        form = fill(first.text) | {"r0": "clear <b>enough</b>"}
        if 'name="c1" value="na"' in first.text:
            form["c1"] = "na"
        assert alice.post(f"/rate/item/{own}/submit", form, follow=False).status == 303
        again = alice.post(f"/rate/item/{own}/submit", form)
        assert "Already saved" in again.text
        second = alice.get("/rate/next")
        csrf = fill(second.text)["csrf"]
        item = second.url.rsplit("/", 1)[1]
        flagged = alice.post(f"/rate/item/{item}/flag", {"csrf": csrf, "reason": "unreadable"})
        assert flagged.status == 200
        for _ in range(2):  # the comparisons: Response 1 each time, one of them swapped
            page = alice.get("/rate/next")
            assert "Response 2" in page.text
            stored = alice.post(path(page.url) + "/submit", fill(page.text, "1"), follow=False)
            assert stored.status == 303
        assert "nothing-left" in alice.get("/rate/next").text
        bob_page = bob.get("/rate/next")
        assert bob.post(path(bob_page.url) + "/submit", fill(bob_page.text)).status == 200
    finally:
        alice.close()
        bob.close()
    mine = rows(runs, "alice")
    done = [r for r in mine if r["status"] == "done"]
    failed = [r for r in mine if r["status"] == "failed"]
    assert failed and {r["reason"] for r in failed} == {"flagged"}
    assert {r["detail"] for r in failed} == {"unreadable"}
    absolute = [r for r in done if not r["model_b"]]
    assert any(r["rationale"] == "clear <b>enough</b>" for r in absolute)
    for r in done:
        value = json.loads(str(r["value"]))
        assert value["source"] == "workspace" and value["seconds"] >= 0
    verdicts = {json.loads(str(r["value"]))["swapped"]: r["score"] for r in done if r["model_b"]}
    assert verdicts == {False: VERDICT_FIRST, True: VERDICT_SECOND}
    assert [r["status"] for r in rows(runs, "bob")] == ["done"] * len(rows(runs, "bob"))
    progress = ratings.progress(runs.store, rater_judge("alice"))
    assert (progress.done, progress.flagged, progress.open) == (3, 1, 0)
