"""An instance's image beside its judgment, in a real browser (Playwright + Debian's
Chromium): from a run's judgments to a judged row of an instance carrying two charts (a PNG
and a JPEG), whose images the page loads from the viewer under its CSP
(``img-src 'self'``) and Chromium decodes (``naturalWidth`` > 0, at the size the page
gave), to the right of the judgment's score and rationale. The screenshot goes where the
other browser tests put theirs (``$FLASK_EVAL_ARTIFACTS``, default
``.artifacts/screenshots``): ``image-judgment.png``. Without the ``playwright`` package or
``/usr/bin/chromium`` the test skips."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select, update

from flask_eval.storage.models import JUDGMENT
from flask_eval.storage.store import Store
from flask_eval.viewer.server import make_app
from tests.app.image_runs import create_image_run
from tests.viewer.test_browser import ARTIFACTS, CHROMIUM, Served

#: a Chromium process: the integration tier (the collection cannot see it)
pytestmark = pytest.mark.integration

J = JUDGMENT.c


def test_a_judgments_image_is_shown_beside_it(tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    run, images = create_image_run(store)
    with store.engine.begin() as conn:
        judgment = (
            conn.execute(
                select(J.id).where(J.run_id == run.id, J.instance_id == "q0").order_by(J.id)
            )
            .scalars()
            .first()
        )
        assert judgment is not None
        conn.execute(
            update(JUDGMENT)
            .where(J.id == judgment)
            .values(
                status="done",
                score=4,
                rationale="The chart has three bars; the response reads the tallest right.",
            )
        )
    viewer = Served(make_app(store))
    problems: list[str] = []
    try:
        with sync_api.sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
            try:
                page = chromium.new_page(viewport={"width": 1400, "height": 900})
                page.on(
                    "console",
                    lambda m: (
                        problems.append(f"{m.type}: {m.text}")
                        if m.type in ("error", "warning")
                        else None
                    ),
                )
                page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
                page.set_default_timeout(15_000)
                page.goto(f"{viewer.url}/runs/{run.name}/judgments?instance=q0")
                page.click(f"a[href='/runs/{run.name}/judgments/{judgment}']")
                page.wait_for_selector("#rationale")
                shown = page.locator("#images img")
                assert shown.count() == 2
                for k, image in enumerate(images[:2]):
                    img = shown.nth(k)
                    img.scroll_into_view_if_needed()
                    page.wait_for_function(
                        "e => e.complete && e.naturalWidth > 0", arg=img.element_handle()
                    )
                    natural = img.evaluate("e => [e.naturalWidth, e.naturalHeight]")
                    assert natural == [image.ref.width, image.ref.height]
                    assert image.ref.media_type in (img.get_attribute("alt") or "")
                judged = page.locator("#rationale").bounding_box()
                aside = page.locator("#images").bounding_box()
                assert judged is not None and aside is not None
                assert aside["x"] >= judged["x"] + judged["width"]  # beside, to the right
                assert aside["y"] < judged["y"] + judged["height"]  # at the same height
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / "image-judgment.png"), full_page=True)
            finally:
                chromium.close()
    finally:
        viewer.close()
        store.close()
    assert not problems
