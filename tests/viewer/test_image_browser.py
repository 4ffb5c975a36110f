"""An instance's image beside its judgment, in a real browser (Playwright + Debian's
Chromium): a run made by `flask-eval run` (in-process, judged by the simulator) of
instances naming generated images, from its judgments to a judgment of an instance
carrying two charts (a PNG and a JPEG, one named by path, one as a ``data:`` URI), whose
images the page loads from the viewer under its CSP
(``img-src 'self'``) and Chromium decodes (``naturalWidth`` > 0, at the size the page
gave), to the right of the judgment's score and rationale. The screenshot goes where the
other browser tests put theirs (``$FLASK_EVAL_ARTIFACTS``, default
``.artifacts/screenshots``): ``image-judgment.png``. Without the ``playwright`` package or
``/usr/bin/chromium`` the test skips."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from flask_eval.core.errors import Status
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage.models import JUDGMENT
from flask_eval.storage.store import Store
from flask_eval.viewer.server import make_app
from tests.app.image_inputs import pixels, write_image_inputs
from tests.helpers import cli_env, flask_eval
from tests.viewer.test_browser import ARTIFACTS, CHROMIUM, Served

#: a Chromium process: the integration tier (the collection cannot see it)
pytestmark = pytest.mark.integration

J = JUDGMENT.c


def test_a_judgments_image_is_shown_beside_it(tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    inputs = write_image_inputs(tmp_path / "inputs", 3)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with running_simulator(SimConfig(seed=4)) as sim:
        env = cli_env(url, OPENAI_BASE_URL=sim.openai_base_url)
        flask_eval(
            "run", *inputs.args(), "--judge", "gpt=openai/gpt-4o", "--run", "pictures",
            "--quiet", env=env,
        )  # fmt: skip
    images = inputs.images["0"]
    assert [m.media_type for m in images] == ["image/png", "image/jpeg"]
    store = Store(url)
    run = store.find_run("pictures")
    assert run is not None
    with store.engine.connect() as conn:
        judgment = (
            conn.execute(
                select(J.id)
                .where(J.run_id == run.id, J.instance_id == "0", J.status == Status.DONE.value)
                .order_by(J.id)
            )
            .scalars()
            .first()
        )
    assert judgment is not None
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
                page.goto(f"{viewer.url}/runs/{run.name}/judgments?instance=0")
                page.click(f"a[href='/runs/{run.name}/judgments/{judgment}']")
                page.wait_for_selector("#rationale")
                shown = page.locator("#images img")
                assert shown.count() == 2
                for k, image in enumerate(images):
                    img = shown.nth(k)
                    img.scroll_into_view_if_needed()
                    page.wait_for_function(
                        "e => e.complete && e.naturalWidth > 0", arg=img.element_handle()
                    )
                    natural = img.evaluate("e => [e.naturalWidth, e.naturalHeight]")
                    assert natural == list(pixels(image.data))
                    assert image.media_type in (img.get_attribute("alt") or "")
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
