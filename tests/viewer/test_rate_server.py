"""The rating workspace over a SQLite store's runs and its own rating tables
(``storage.ratings``): sign-in, sessions, CSRF, another rater's items, revoked tokens,
attempt limits, blind pages, escaping, exactly-once submits, each read back from the
ledger."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from flask_eval.app.rater_tokens import hash_token
from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND, VERDICT_TIE
from flask_eval.storage import ratings
from flask_eval.viewer import rate_server
from flask_eval.viewer.rate_security import RateOptions
from tests.viewer import rate_setup
from tests.viewer.rate_setup import Client, Runs, serve


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    runs = rate_setup.make_runs(tmp_path_factory.mktemp("rate"))
    yield runs
    runs.store.close()


@pytest.fixture
def runs(planned: Runs, tmp_path: Path) -> Iterator[Runs]:
    """A copy of the module's store: its runs, no raters, items or sessions."""
    fresh = rate_setup.copy_runs(planned, tmp_path)
    yield fresh
    fresh.store.close()


def client_of(runs: Runs, **options: object) -> Iterator[Client]:
    yield from serve(rate_server.make_app(runs.store, RateOptions(**options)))  # type: ignore[arg-type]


@pytest.fixture
def client(runs: Runs) -> Iterator[Client]:
    yield from client_of(runs)


def answers(page: str) -> dict[str, str]:
    """A complete answer of every criterion of a rating page: the first score offered."""
    form: dict[str, str] = {"csrf": re.findall(r'name="csrf" value="([^"]+)"', page)[0]}
    for field, value in re.findall(r'<input type="radio" name="(c\d+)" value="([^"]+)"', page):
        form.setdefault(field, value)
    return form


def test_signin_sets_a_strict_cookie_and_keeps_only_its_hash(runs: Runs, client: Client) -> None:
    token = runs.rater("alice")
    first = client.get("/rate", follow=False)
    assert first.status == 303 and first.headers["Location"] == "/rate/signin"
    answer = client.post(
        "/rate/signin", {"csrf": client.csrf("/rate/signin"), "token": token}, follow=False
    )
    assert answer.status == 303 and answer.headers["Location"] == "/rate"
    cookie = answer.headers["Set-Cookie"]
    for part in ("flask_eval_rate=", "HttpOnly", "SameSite=Strict", "Path=/rate"):
        assert part in cookie
    assert "Secure" not in cookie
    value = client.cookies()["flask_eval_rate"]
    sessions = runs.sessions()
    assert [(s["id_hash"], s["rater"]) for s in sessions] == [(hash_token(value), "alice")]
    assert token not in json.dumps(sessions, default=str)
    assert value not in json.dumps(sessions, default=str)
    held = runs.stored_bytes()
    assert token.encode() not in held and value.encode() not in held
    home = client.get("/rate")
    assert home.status == 200 and 'id="rater">alice<' in home.text


def test_behind_tls_cookies_are_secure(runs: Runs) -> None:
    for c in client_of(runs, behind_tls=True):
        pre = c.get("/rate/signin")
        assert "Secure" in pre.headers["Set-Cookie"]


def test_signin_without_the_forms_csrf_token_is_refused(runs: Runs, client: Client) -> None:
    token = runs.rater("alice")
    client.get("/rate/signin")
    assert client.post("/rate/signin", {"token": token}).status == 403
    assert client.post("/rate/signin", {"token": token, "csrf": "forged"}).status == 403
    fresh = Client(rate_server.make_app(runs.store, RateOptions()))  # a token, not its cookie
    try:
        csrf = client.csrf("/rate/signin")
        assert fresh.post("/rate/signin", {"token": token, "csrf": csrf}).status == 403
    finally:
        fresh.close()
    assert not runs.sessions()


def test_a_post_without_the_sessions_csrf_token_changes_nothing(runs: Runs, client: Client) -> None:
    client.signin(runs.rater("alice"))
    item = runs.item("alice")
    page = client.get(f"/rate/item/{item}").text
    form = answers(page)
    for csrf in (None, "forged", ""):
        forged = {k: v for k, v in form.items() if k != "csrf"}
        if csrf is not None:
            forged["csrf"] = csrf
        for action in ("submit", "flag", "skip"):
            assert client.post(f"/rate/item/{item}/{action}", forged).status == 403
        assert client.post("/rate/signout", forged).status == 403
    assert runs.untouched(item)
    assert client.post(f"/rate/item/{item}/submit", form).status == 200
    assert runs.get(item).state == "done"
    assert {r.status for r in runs.rows(item).values()} == {"done"}


def test_another_raters_item_is_forbidden_even_guessed(runs: Runs, client: Client) -> None:
    client.signin(runs.rater("alice"))
    runs.rater("bob")
    theirs = runs.item("bob")
    csrf = client.csrf("/rate")
    assert client.get(f"/rate/item/{theirs}").status == 403
    for action in ("submit", "flag", "skip"):
        data = {"csrf": csrf, "reason": "x"} if action == "flag" else {"csrf": csrf}
        assert client.post(f"/rate/item/{theirs}/{action}", data).status == 403
    assert runs.untouched(theirs) and runs.get(theirs).holder is None
    assert client.get("/rate/item/999").status == 404
    assert client.get("/rate/item/1%2F..").status == 404
    assert client.get("/rate/next", follow=False).status == 200  # nothing of alice's: done


def test_a_token_for_one_run_serves_only_that_runs_items(runs: Runs, client: Client) -> None:
    client.signin(runs.rater("alice", run_id=runs.absolute.id))
    other = runs.item("alice", pairwise=True)
    assert client.get(f"/rate/item/{other}").status == 403


def test_a_revoked_token_signs_no_one_in_and_ends_sessions(runs: Runs, client: Client) -> None:
    token = runs.rater("alice")
    assert client.signin(token).status == 200
    assert client.get("/rate", follow=False).status == 200
    assert ratings.revoke_rater(runs.store, "alice")
    assert client.get("/rate", follow=False).status == 303  # back to the sign-in page
    refused = client.signin(token)
    assert refused.status == 403 and "signs no one in" in refused.text
    assert not runs.sessions()


def test_failed_signins_are_limited_per_client_address(runs: Runs, client: Client) -> None:
    token = runs.rater("alice")
    for _ in range(10):
        assert client.signin("wrong-token").status == 403
    assert client.signin(token).status == 429  # the right token too, for a while
    assert not runs.sessions()


def test_behind_a_proxy_the_limit_is_per_forwarded_address(runs: Runs) -> None:
    for c in client_of(runs, behind_tls=True, signin_limit=3):

        def attempt(address: str, c: Client = c) -> int:
            forwarded = {"X-Forwarded-For": f"10.9.9.9, {address}"}
            return c.request("POST", "/rate/signin", {"token": "x"}, headers=forwarded).status

        assert [attempt("203.0.113.5") for _ in range(4)] == [403, 403, 403, 429]
        assert attempt("203.0.113.6") == 403  # another client behind the same proxy


def test_the_access_log_holds_no_token_and_no_cookie(
    runs: Runs, caplog: pytest.LogCaptureFixture
) -> None:
    token = runs.rater("alice")
    item = runs.item("alice")
    logger = logging.getLogger("tests.rate.access")
    with caplog.at_level(logging.INFO, logger=logger.name):
        c = Client(rate_server.make_app(runs.store, RateOptions()), access_log=logger)
        try:
            c.get(f"/rate/signin#token={token}")
            c.signin(token)
            page = c.get("/rate/next").text
            c.post(f"/rate/item/{item}/submit", answers(page))
            secrets = [token, *c.cookies().values()]
        finally:
            c.close()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert f"/rate/item/{item}" in logged  # the log is on
    for secret in secrets:
        assert secret not in logged


def test_posts_are_limited_per_session(runs: Runs) -> None:
    token = runs.rater("alice")
    for c in client_of(runs, post_limit=3):
        c.signin(token)
        item = runs.item("alice")
        csrf = c.csrf("/rate")
        statuses = [c.post(f"/rate/item/{item}/skip", {"csrf": csrf}).status for _ in range(4)]
        assert statuses[-1] == 429 and 429 not in statuses[:3]


def test_pages_are_blind_and_escape_untrusted_text(runs: Runs, client: Client) -> None:
    client.signin(runs.rater("alice"))
    hostile = runs.item("alice", "1")
    pair = runs.item("alice", "2", pairwise=True, swapped=True)
    start = client.get("/rate")
    assert 'id="start"' in start.text
    first = client.get("/rate/next")
    assert first.url.endswith(f"/rate/item/{hostile}")
    page = first.text
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in page
    assert "<script>window" not in page and "<img src=x" not in page
    assert "Rubric &lt;i&gt;level&lt;/i&gt; five of the instance" in page  # its own rubric
    assert "You are a &lt;b&gt;terse&lt;/b&gt; assistant." in page
    assert 'id="reference"' in page  # the run's protocol shows references
    assert not re.search(r"<script(?![^>]*\bsrc=)", page)  # no inline script at all
    client.post(f"/rate/item/{hostile}/submit", answers(page))
    second = client.get(f"/rate/item/{pair}")
    assert "Response 1" in second.text and "Response 2" in second.text
    client.post(f"/rate/item/{pair}/skip", {"csrf": answers(second.text)["csrf"]})
    client.get(f"/rate/item/{hostile}")  # already saved
    everything: list[object] = [client.cookies()]
    for answer in client.seen:
        everything += [answer.text, answer.headers, answer.url, answer.history]
    seen = json.dumps(everything, default=str)
    for secret in rate_setup.SECRETS:
        assert secret not in seen, secret
    for answer in client.seen:
        if "text/html" in answer.headers.get("Content-Type", ""):
            assert answer.headers["X-Frame-Options"] == "DENY"
            assert answer.headers["Referrer-Policy"] == "no-referrer"
            assert answer.headers["Cache-Control"] == "no-store"
            csp = answer.headers["Content-Security-Policy"]
            assert "script-src 'self'" in csp and "unsafe-inline" not in csp


def test_a_double_submit_is_stored_once(runs: Runs, client: Client) -> None:
    client.signin(runs.rater("alice"))
    item = runs.item("alice")
    runs.item("alice", "2")
    page = client.get("/rate/next").text  # served: the time spent runs from here
    form = answers(page)
    other_tab = client.get(f"/rate/item/{item}").text
    assert client.post(f"/rate/item/{item}/submit", form, follow=False).status == 303
    stored = runs.rows(item)
    again = client.post(f"/rate/item/{item}/submit", answers(other_tab) | {"r0": "again"})
    assert again.status == 200 and "Already saved" in again.text
    assert 'href="/rate/next"' in again.text
    assert runs.rows(item) == stored  # the second changed nothing
    assert set(stored) == set(runs.get(item).criteria)
    for row in stored.values():
        assert row.status == "done" and row.rationale is None
        value = json.loads(str(row.value))
        assert value["source"] == "workspace" and 0 <= value["seconds"] < 60
        assert "swapped" not in value
    assert runs.get(item).state == "done"
    assert ratings.progress(runs.store, "human/alice") == ratings.Progress(1, 0, 1)


def test_a_form_is_checked_strictly(runs: Runs, client: Client) -> None:
    client.signin(runs.rater("alice"))
    item = runs.item("alice")
    page = client.get(f"/rate/item/{item}").text
    good = answers(page)
    bad = [
        {k: v for k, v in good.items() if k != "c0"},  # a criterion unanswered
        {**good, "c0": "6"},
        {**good, "c0": "0"},
        {**good, "c0": " 3"},
        {**good, "c0": "3.0"},
        {**good, "r0": "x" * 4001},
        {**good, "c9": "3"},  # a field the page has not
        {**good, "r1": "nul \x00"},
    ]
    if 'value="na"' not in page.split('id="criterion-0"')[1].split("</fieldset>")[0]:
        bad.append({**good, "c0": "na"})  # N/A where it is not allowed
    for form in bad:
        answer = client.post(f"/rate/item/{item}/submit", form)
        assert answer.status == 400, form
        assert 'class="problem"' in answer.text
    assert runs.untouched(item)
    kept = client.post(f"/rate/item/{item}/submit", {**good, "c0": "9", "r0": "kept <b>"})
    assert "kept &lt;b&gt;</textarea>" in kept.text  # what was typed stays
    assert client.post(f"/rate/item/{item}/submit", {**good, "r0": "y" * 4000}).status == 200
    stored = runs.rows(item)
    first = runs.get(item).criteria[0]
    assert stored[first].rationale == "y" * 4000
    assert all(r.rationale is None for c, r in stored.items() if c != first)


@pytest.mark.parametrize(
    ("swapped", "choice", "verdict"),
    [
        (False, "1", VERDICT_FIRST),
        (False, "2", VERDICT_SECOND),
        (True, "1", VERDICT_SECOND),
        (True, "2", VERDICT_FIRST),
        (True, "tie", VERDICT_TIE),
    ],
)
def test_a_pairwise_choice_is_the_ledgers_verdict(
    runs: Runs, client: Client, swapped: bool, choice: str, verdict: int
) -> None:
    client.signin(runs.rater("alice"))
    item = runs.item("alice", "2", pairwise=True, swapped=swapped)
    page = client.get(f"/rate/item/{item}").text
    form = {k: (choice if re.fullmatch(r"c\d+", k) else v) for k, v in answers(page).items()}
    assert client.post(f"/rate/item/{item}/submit", form, follow=False).status == 303
    stored = runs.rows(item)
    assert set(stored) == set(runs.get(item).criteria)  # the run's one overall preference
    assert {r.score for r in stored.values()} == {verdict}
    assert {json.loads(str(r.value))["swapped"] for r in stored.values()} == {swapped}
    assert client.post(f"/rate/item/{item}/submit", {**form, "c0": "na"}).status == 200
    assert runs.rows(item) == stored


def test_flag_and_skip(runs: Runs, client: Client) -> None:
    client.signin(runs.rater("alice"))
    first, second = runs.item("alice", "1"), runs.item("alice", "2")
    assert client.get("/rate/next").url.endswith(f"/item/{first}")
    csrf = client.csrf(f"/rate/item/{first}")
    skipped = client.post(f"/rate/item/{first}/skip", {"csrf": csrf})
    assert skipped.url.endswith(f"/item/{second}")
    given_back = runs.get(first)  # released once, behind the other: no longer held
    assert (given_back.state, given_back.skips, given_back.holder) == ("open", 1, None)
    assert runs.get(second).skips == 0
    for reason in ("", "   ", "r" * 501):
        assert (
            client.post(f"/rate/item/{second}/flag", {"csrf": csrf, "reason": reason}).status == 400
        )
    flagged = client.post(f"/rate/item/{second}/flag", {"csrf": csrf, "reason": "not English"})
    assert flagged.url.endswith(f"/item/{first}")
    assert runs.get(second).state == "flagged"
    rows = runs.rows(second).values()
    assert {(r.status, r.reason, r.detail, r.score) for r in rows} == {
        ("failed", "flagged", "not English", None)
    }
    assert {json.loads(str(r.value))["source"] for r in rows} == {"workspace"}
    assert {r.status for r in runs.rows(first).values()} == {"waiting"}
    home = client.get("/rate").text
    assert re.search(r'id="flagged">1<', home) and re.search(r'id="open">1<', home)


def test_signout_ends_the_session(runs: Runs, client: Client) -> None:
    client.signin(runs.rater("alice"))
    answer = client.post("/rate/signout", {"csrf": client.csrf("/rate")}, follow=False)
    assert answer.status == 303 and not runs.sessions()
    assert client.get("/rate", follow=False).status == 303


def test_the_viewer_with_the_workspace_refuses_its_pages_unless_allowed(runs: Runs) -> None:
    from flask_eval.viewer.server import make_app

    viewer_page = f"/runs/{rate_setup.RUN}"
    for c in serve(make_app(runs.store, rate=RateOptions())):
        c.signin(runs.rater("lead", may_view=True))
        assert c.get("/", follow=False).headers["Location"] == "/rate"
        assert c.get(viewer_page).status == 403
        assert c.get("/rate").status == 200
    for c in serve(make_app(runs.store, rate=RateOptions(with_results=True))):
        assert c.get(viewer_page).status == 403  # not signed in
        c.signin(runs.rater("alice"))
        assert c.get(viewer_page).status == 403  # may not view
    for c in serve(make_app(runs.store, rate=RateOptions(with_results=True))):
        signed = c.post(
            "/rate/signin",
            {"csrf": c.csrf("/rate/signin"), "token": runs.tokens["lead"]},
            follow=False,
        )
        assert "Path=/;" in signed.headers["Set-Cookie"] or signed.headers["Set-Cookie"].endswith(
            "Path=/"
        )
        assert c.get(viewer_page).status == 200


def test_an_unknown_workspace_path_is_the_workspaces_own_404(runs: Runs, client: Client) -> None:
    answer = client.get("/rate/nosuch")
    assert answer.status == 404 and "/rate/static/rate.css" in answer.text
    assert answer.headers["X-Frame-Options"] == "DENY"
    assert client.get("/elsewhere").status == 403
    assert client.request("HEAD", "/rate/next").status == 404  # a HEAD claims nothing


def test_a_failure_is_a_page_and_logs_no_secret(
    runs: Runs, client: Client, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    token = runs.rater("alice")
    client.signin(token)
    item = runs.item("alice")
    page = client.get(f"/rate/item/{item}").text
    csrf = answers(page)["csrf"]

    def broken(*args: object) -> bool:
        raise RuntimeError(f"database said no to {args}")

    monkeypatch.setattr(ratings, "submit", broken)
    with caplog.at_level(logging.ERROR):
        answer = client.post(f"/rate/item/{item}/submit", answers(page))
    assert answer.status == 500 and "nothing was saved" in answer.text
    assert answer.headers["X-Frame-Options"] == "DENY"
    logged = "\n".join(r.getMessage() + str(r.exc_info) for r in caplog.records)
    assert "RuntimeError" in logged
    for secret in (token, csrf, *client.cookies().values()):
        assert secret not in logged
    assert runs.untouched(item)
