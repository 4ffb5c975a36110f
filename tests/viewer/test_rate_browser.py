"""The rating workspace in a real browser (Playwright + Debian's Chromium): sign-in by a
link's fragment and by the plain form without JavaScript, a hostile response that stays
text and runs nothing, the keyboard shortcuts, and no CSP violation on any page.

Without the ``playwright`` package or ``/usr/bin/chromium`` the tests skip."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from flask_eval.core.types import VERDICT_SECOND
from flask_eval.viewer import rate_server
from flask_eval.viewer.rate_security import RateOptions
from tests.viewer import rate_setup
from tests.viewer.rate_setup import Runs
from tests.viewer.test_browser import ARTIFACTS, CHROMIUM, Served

#: a Chromium process per module: the integration tier (the collection cannot see it)
pytestmark = pytest.mark.integration


@dataclass
class Browser:
    chromium: Any
    base: str
    runs: Runs
    problems: list[str]

    def page(self, javascript: bool = True) -> Any:
        context = self.chromium.new_context(
            java_script_enabled=javascript, viewport={"width": 1300, "height": 900}
        )
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.on(
            "console",
            lambda m: (
                self.problems.append(f"console {m.type}: {m.text}")
                if m.type in ("error", "warning")
                else None
            ),
        )
        page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        return page


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    runs = rate_setup.make_runs(tmp_path_factory.mktemp("rate-browser"))
    served = Served(rate_server.make_app(runs.store, RateOptions()))
    try:
        with sync_api.sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
            try:
                yield Browser(chromium, served.url, runs, [])
            finally:
                chromium.close()
    finally:
        served.close()
        runs.store.close()


def test_a_hostile_response_stays_text_and_the_keyboard_rates(browser: Browser) -> None:
    runs = browser.runs
    token = runs.rater("alice")
    hostile = runs.item("alice", "1")
    pair = runs.item("alice", "1", pairwise=True, swapped=True)
    page = browser.page()
    page.goto(f"{browser.base}/rate/signin#token={token}")
    page.wait_for_selector("#progress")
    assert "token" not in page.url and page.url.endswith("/rate")
    page.click("#start")
    page.wait_for_selector("#rating")
    assert page.url.endswith(f"/rate/item/{hostile}")
    shown = page.locator("#response-1 pre").inner_text()
    assert "<script>window.pwned=1</script>" in shown and "onerror=" in shown
    assert page.evaluate("window.pwned") is None
    assert page.evaluate("document.images.length") == 0
    assert page.locator("#legend").is_visible()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "rate-item.png"), full_page=True)
    criteria = runs.get(hostile).criteria
    for key in ("3", "j", "4", "j", "5", "k", "2"):  # the second criterion: 4, then 2
        page.keyboard.press(key)
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/rate/item/{pair}")
    stored = runs.rows(hostile)
    assert {c: r.score for c, r in stored.items()} == dict(zip(criteria, (3, 2, 5), strict=True))
    assert {r.status for r in stored.values()} == {"done"}
    assert page.locator("#response-2 pre").inner_text() == rate_setup.HOSTILE  # swapped
    assert page.evaluate("window.pwned") is None
    assert page.locator("fieldset.criterion").count() == 1  # the pairwise run's "overall"
    page.keyboard.press("t")
    assert page.locator("input[value=tie]").is_checked()
    page.keyboard.press("1")  # the response shown first: the ledger's second (swapped)
    page.keyboard.press("Enter")
    page.wait_for_selector("#nothing-left")
    assert [r.score for r in runs.rows(pair).values()] == [VERDICT_SECOND]
    assert [json.loads(str(r.value))["swapped"] for r in runs.rows(pair).values()] == [True]
    assert not browser.problems


def test_the_plain_form_signs_in_without_javascript(browser: Browser) -> None:
    runs = browser.runs
    token = runs.rater("bob")
    item = runs.item("bob", "1")
    page = browser.page(javascript=False)
    page.goto(f"{browser.base}/rate/signin")
    page.fill("#token", token)
    page.click("#signin button")
    page.wait_for_selector("#progress")
    page.click("#start")
    page.wait_for_selector("#rating")
    assert page.url.endswith(f"/rate/item/{item}")
    assert "<script>window.pwned=1</script>" in page.locator("#response-1 pre").inner_text()
    page.fill("#reason", "I cannot read this")
    page.click("#flag button")
    page.wait_for_selector("#nothing-left")
    assert {(r.status, r.reason, r.detail) for r in runs.rows(item).values()} == {
        ("failed", "flagged", "I cannot read this")
    }
    assert runs.get(item).state == "flagged"
    assert not browser.problems
