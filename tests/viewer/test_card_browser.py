"""The judge card in a real browser (Playwright + Debian's Chromium): from the page of a
probe run (every probe, judged by the simulator's judge with a length preference and a
taste for injections) to its card, from an effect to the pairs behind it, from a pair to the
twin's judgment. Screenshots go where the other browser tests put theirs
(``$FLASK_EVAL_ARTIFACTS``, default ``.artifacts/screenshots``): ``judge-card.png`` and
``judge-card-pairs.png``.

The card is read from the run's ledger by the card's reader (``app.probe_card``), as
`flask-eval view` reads it. Without the ``playwright`` package or ``/usr/bin/chromium``
the test skips."""

from __future__ import annotations

from pathlib import Path

import pytest

from flask_eval import api
from flask_eval.simulator.config import JudgeTraits, SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage.store import Store
from flask_eval.viewer.server import make_app
from tests.conftest import EXAMPLES
from tests.viewer.test_browser import ARTIFACTS, CHROMIUM, Served

#: a Chromium process: the integration tier (the collection cannot see it)
pytestmark = pytest.mark.integration


def test_from_a_run_to_its_card_an_effects_pairs_and_a_twins_judgment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    db = f"sqlite:///{tmp_path / 'store.db'}"
    judge = JudgeTraits(length_preference=0.5, injection=0.4)
    with running_simulator(SimConfig(judges={"judge": judge})) as sim:
        monkeypatch.setenv("OPENAI_BASE_URL", sim.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
        api.judge(
            str(EXAMPLES / "instances.jsonl"),
            {"a": str(EXAMPLES / "model_a.jsonl"), "b": str(EXAMPLES / "model_b.jsonl")},
            judges=["judge=openai/judge"],
            probes=("all",),
            run_name="probed",
            database_url=db,
        )
    store = Store(db)
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
                page.goto(f"{viewer.url}/runs/probed")
                page.click("#card-link")
                page.wait_for_selector("#card section.judge-card")
                effects = page.locator("#card table.card-effects a.pairs")
                assert effects.count() >= 1
                marks = page.locator("#card figure[data-figure='forest'] svg circle.cell")
                assert marks.count() == effects.count()
                assert page.locator("#card line.zero").count() >= 1
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / "judge-card.png"), full_page=True)
                effects.nth(0).click()
                page.wait_for_selector("#pairs table")
                assert "/runs/probed/card/pairs?" in page.url
                twins = page.locator("#pairs a.item.twin")
                assert twins.count() >= 1
                page.screenshot(path=str(ARTIFACTS / "judge-card-pairs.png"), full_page=True)
                twins.nth(0).click()
                page.wait_for_selector("#judgments")
                listed = page.locator("#judgments tbody tr")
                assert listed.count() == 1
                page.click("#judgments tbody tr:first-child td:first-child a")
                page.wait_for_selector("#status")
                assert "~length+25" in page.content()  # the first effect's twin
            finally:
                chromium.close()
    finally:
        viewer.close()
        store.close()
    assert not problems
