"""The rating workspace end to end: runs made by `flask-eval run` with a judges file of
people (``spec: human/alice``), raters added by `flask-eval raters add`, each signing in
and rating their own items; what lands in the ledger (the scores, N/A, rationales, the
flagged reason, the value's time and order), exactly once, and nothing of another
rater's."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from sqlalchemy import select

from flask_eval.core.people import rater_judge
from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND
from flask_eval.storage import models, ratings
from flask_eval.storage.store import Store
from flask_eval.viewer import rate_server
from flask_eval.viewer.rate_security import RateOptions
from tests.helpers import cli_env, flask_eval
from tests.viewer import rate_setup
from tests.viewer.rate_setup import Client

#: the people of each run: alice rates the first two items of both, bob one of the first
PEOPLE = {
    rate_setup.RUN: "- spec: human/alice\n  limit: 2\n- spec: human/bob\n  limit: 1\n",
    rate_setup.PAIR_RUN: "- spec: human/alice\n  limit: 2\n",
}


@dataclass
class Rated:
    """A store whose runs `flask-eval run` planned for people, and the raters' tokens."""

    store: Store
    tokens: dict[str, str]


@pytest.fixture
def rated(tmp_path: Path) -> Iterator[Rated]:
    inputs = rate_setup.write_inputs(tmp_path)
    env = cli_env(f"sqlite:///{tmp_path / 'store.db'}")
    responses = [x for r in inputs.responses for x in ("--responses", r)]
    for run, people in PEOPLE.items():
        judges = tmp_path / f"{run}.yaml"
        judges.write_text(people)
        pairwise = ["--pairwise", "all"] if run == rate_setup.PAIR_RUN else []
        out = flask_eval(
            "run",
            *("--instances", inputs.instances, *responses, "--judges", str(judges)),
            *("--run", run, "--limit", "3", *pairwise),
            env=env,
        )
        assert "items planned for people" in out.stderr
    tokens = {r: token_of(flask_eval("raters", "add", r, env=env).stdout) for r in ("alice", "bob")}
    store = Store(env["FLASK_EVAL_DATABASE_URL"])
    yield Rated(store, tokens)
    store.close()


def token_of(out: str) -> str:
    return next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("token"))


def signed_in(rated: Rated, rater: str) -> Client:
    client = Client(rate_server.make_app(rated.store, RateOptions()))
    assert client.signin(rated.tokens[rater]).status == 200
    return client


def rows(store: Store, rater: str) -> list[dict[str, object]]:
    """The rater's ledger rows, with their item's ``swapped``."""
    j, ri = models.JUDGMENT.c, models.RATING_ITEM.c
    stmt = (
        select(j.instance_id, j.criterion, j.model_b, j.status, j.score, j.rationale)
        .add_columns(j.value, j.reason, j.detail, j.call_uid, ri.swapped)
        .join(
            models.RATING_ITEM,
            (ri.run_id == j.run_id)
            & (ri.judge == j.judge)
            & (ri.model == j.model)
            & (ri.model_b == j.model_b)
            & (ri.instance_id == j.instance_id),
        )
        .where(j.judge == rater_judge(rater))
        .order_by(j.id)
    )
    with store.engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(stmt)]


def path(url: str) -> str:
    return urlsplit(url).path


def fill(page: str, choice: str | None = None) -> dict[str, str]:
    form = {"csrf": re.findall(r'name="csrf" value="([^"]+)"', page)[0]}
    for field, value in re.findall(r'<input type="radio" name="(c\d+)" value="([^"]+)"', page):
        form.setdefault(field, choice or value)
    return form


def test_two_raters_rate_their_own_items_into_the_ledger(rated: Rated) -> None:
    store = rated.store
    assert ratings.progress(store, rater_judge("alice")) == ratings.Progress(0, 0, 4)
    assert ratings.progress(store, rater_judge("bob")) == ratings.Progress(0, 0, 1)
    assert {r["status"] for r in rows(store, "alice")} == {"waiting"}
    alice, bob = signed_in(rated, "alice"), signed_in(rated, "bob")
    na_given = False
    try:
        absolute = 0
        while "nothing-left" not in (page := alice.get("/rate/next")).text:
            own = path(page.url)
            assert re.fullmatch(r"/rate/item/\d+", own), page.url
            assert bob.get(own).status == 403
            if "Response 2" in page.text:  # a comparison: the response shown first
                stored = alice.post(own + "/submit", fill(page.text, "1"), follow=False)
                assert stored.status == 303
            elif absolute == 0:  # rated, N/A where it may be, a rationale
                absolute += 1
                form = fill(page.text) | {"r0": "clear <b>enough</b>"}
                if 'name="c1" value="na"' in page.text:
                    form["c1"], na_given = "na", True
                assert alice.post(own + "/submit", form, follow=False).status == 303
                again = alice.post(own + "/submit", form | {"r0": "changed"})
                assert "Already saved" in again.text
            else:  # cannot be judged
                absolute += 1
                csrf = fill(page.text)["csrf"]
                flagged = alice.post(own + "/flag", {"csrf": csrf, "reason": "unreadable"})
                assert flagged.status == 200
        assert absolute == 2
        bob_page = bob.get("/rate/next")
        assert bob.post(path(bob_page.url) + "/submit", fill(bob_page.text)).status == 200
        assert "nothing-left" in bob.get("/rate/next").text
    finally:
        alice.close()
        bob.close()
    mine = rows(store, "alice")
    done = [r for r in mine if r["status"] == "done"]
    failed = [r for r in mine if r["status"] == "failed"]
    assert len(done) + len(failed) == len(mine)  # nothing waits
    assert all(r["call_uid"] is None for r in mine)  # no provider call
    assert failed and {(r["reason"], r["detail"]) for r in failed} == {("flagged", "unreadable")}
    assert len({r["instance_id"] for r in failed}) == 1 and not failed[0]["model_b"]
    rated_first = [r for r in done if not r["model_b"]]
    assert [r["rationale"] for r in rated_first] == ["clear <b>enough</b>"] + [None] * (
        len(rated_first) - 1
    )  # the first criterion's, once: not the second post's
    assert (rated_first[1]["score"] is None) is na_given
    for r in done:
        value = json.loads(str(r["value"]))
        assert value["source"] == "workspace" and value["seconds"] >= 0
    verdicts = {json.loads(str(r["value"]))["swapped"]: r["score"] for r in done if r["model_b"]}
    assert verdicts == {False: VERDICT_FIRST, True: VERDICT_SECOND}
    assert all(json.loads(str(r["value"]))["swapped"] is r["swapped"] for r in done if r["model_b"])
    assert {r["status"] for r in rows(store, "bob")} == {"done"}
    assert ratings.progress(store, rater_judge("alice")) == ratings.Progress(3, 1, 0)
    assert ratings.progress(store, rater_judge("bob")) == ratings.Progress(1, 0, 0)
