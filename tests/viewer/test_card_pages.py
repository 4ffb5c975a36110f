"""The viewer's judge card pages over a run with a twin (planted in a SQLite ledger), the
card's reader (``PROBE_CARD``) stood in for by a card built by hand: the card and
its pairs served under the viewer's CSP, each effect linking to its pairs and each pair to
its judgments; the run page links to the card only when the run has twins; an unknown
run, judge or key is a 404."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from urllib.parse import urlencode

import pytest
from aiohttp.test_utils import TestClient, TestServer

from flask_eval.storage.store import Store
from flask_eval.viewer.server import CSP, PROBE_CARD, make_app
from tests.conftest import EXAMPLES
from tests.report.ledger import finish, planned_run
from tests.report.ledger import judges as ledger_judges
from tests.report.probe_cards import HOSTILE, TWIN, fake_reader, inputs_of, probed_run
from tests.viewer.test_pages import Get, serving

SECRET = "sk-test-SECRET-0123456789abcdef"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    tmp: Path = tmp_path_factory.mktemp("card")
    store = Store(f"sqlite:///{tmp / 'store.db'}")
    probed_run(store, "probed")
    plain = planned_run(
        store,
        "plain",
        instances=str(EXAMPLES / "instances.jsonl"),
        responses=[f"a={EXAMPLES / 'model_a.jsonl'}"],
        judges=ledger_judges("good"),
        limit=2,
    )
    finish(store, plain, lambda r: ("done", 3))
    yield store
    store.close()


@pytest.fixture
def get(store: Store, monkeypatch: pytest.MonkeyPatch) -> Iterator[Get]:
    monkeypatch.setitem(sys.modules, PROBE_CARD, fake_reader())
    with serving(store) as fetch:
        yield fetch


def _hrefs(page: str, cls: str) -> list[str]:
    return [unescape(h) for h in re.findall(rf"<a class='{cls}' href='([^']+)'", page)]


def test_the_card_page_shows_each_judge_escaped_with_links_to_the_pairs(get: Get) -> None:
    status, page = get("/runs/probed/card")
    assert status == 200
    assert "Judge card of probed" in page
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<section class='judge-card'") == 2
    assert page.count('<circle class="cell"') == 6  # three effects per judge
    links = _hrefs(page, "pairs")
    assert len(links) == 6
    assert links[0] == "/runs/probed/card/pairs?" + urlencode({"judge": "good", "key": "length+50"})
    assert "/runs/probed/card/pairs?" + urlencode({"judge": HOSTILE, "key": "swap"}) in links
    assert "0.875" in page and "fails (gate 0.500)" in page


def test_the_pairs_page_links_each_pair_to_its_judgments(get: Get) -> None:
    status, page = get("/runs/probed/card/pairs?" + urlencode({"judge": "good", "key": "style"}))
    assert status == 200
    assert "4 items scored as the original and as its twin" in page
    original = _hrefs(page, "item original")
    twin = _hrefs(page, "item twin")
    assert len(original) == len(twin) == 4
    assert all(h.startswith("/runs/probed/judgments?") and "judge=good" in h for h in original)
    # no difference anywhere: by model (m2 before m<b>1), then instance
    assert twin[0] == "/runs/probed/judgments?" + urlencode(
        {"model": "m2~style", "instance": "1", "criterion": "clarity", "judge": "good"}
    )
    assert '<a id="back-to-card" href="/runs/probed/card">' in page


def test_a_hostile_judges_swap_pairs_are_served_escaped(get: Get) -> None:
    status, page = get("/runs/probed/card/pairs?" + urlencode({"judge": HOSTILE, "key": "swap"}))
    assert status == 200
    assert "<script>alert" not in page
    assert "A won" in page and "pair=either" in page


@pytest.mark.parametrize(
    "path",
    [
        "/runs/nothing/card",
        "/runs/nothing/card/pairs?judge=good&key=style",
        "/runs/probed/card/pairs?judge=nobody&key=style",
        "/runs/probed/card/pairs?judge=good&key=nothing",
        "/runs/probed/card/pairs",
    ],
)
def test_an_unknown_run_judge_or_key_is_not_found(get: Get, path: str) -> None:
    status, page = get(path)
    assert status == 404, page
    assert "Not found" in page


def test_card_pages_keep_the_viewers_csp_and_show_no_secret(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setitem(sys.modules, PROBE_CARD, fake_reader())

    async def go() -> None:
        client = TestClient(TestServer(make_app(store)))
        await client.start_server()
        try:
            query = urlencode({"judge": "good", "key": "length+50"})
            for path in ("/runs/probed/card", f"/runs/probed/card/pairs?{query}"):
                resp = await client.get(path)
                assert resp.status == 200
                assert resp.headers["Content-Security-Policy"] == CSP
                text = await resp.text()
                assert SECRET not in text and "<script>alert" not in text
                assert re.findall(r"<script[^>]*>", text) == [
                    '<script src="/static/viewer.js" defer>'
                ]
        finally:
            await client.close()

    asyncio.run(go())


def test_the_run_page_links_to_the_card_only_with_twins(get: Get) -> None:
    status, page = get("/runs/probed")
    assert status == 200
    assert '<a id="card-link" href="/runs/probed/card">' in page
    status, page = get("/runs/plain")
    assert status == 200 and 'id="card-link"' not in page


def test_the_pairs_of_a_run_read_from_its_ledger_open_its_twins_judgments(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pair's twin link lists exactly that twin's judgment of the item."""
    run, rows = probed_run(store, "probed-again")
    monkeypatch.setitem(sys.modules, PROBE_CARD, fake_reader(("good",), inputs_of(run.name, rows)))
    with serving(store) as fetch:
        query = urlencode({"judge": "good", "key": "length+50"})
        status, page = fetch(f"/runs/probed-again/card/pairs?{query}")
        assert status == 200
        twin = _hrefs(page, "item twin")
        assert twin
        status, listed = fetch(twin[0])
        assert status == 200
        ids = re.findall(r'<a href="/runs/probed-again/judgments/(\d+)">', listed)
        assert len(ids) == 1
        status, detail = fetch(f"/runs/probed-again/judgments/{ids[0]}")
        assert status == 200 and TWIN in detail
