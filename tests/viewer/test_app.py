"""The viewer's web application and its read side, over a run written straight into a
ledger (no judge): pages, escaping, filters, paging, not-found pages, read-only, the
run page's snapshot, and `flask-eval view`'s bad input."""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy import update

from flask_eval.app import browse
from flask_eval.core.errors import InputError
from flask_eval.storage import judgment_pages, snapshots
from flask_eval.storage.models import CALL, JUDGMENT, REPORT_SNAPSHOT
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store
from flask_eval.viewer import body as body_mod
from flask_eval.viewer.server import make_app
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval
from tests.report.ledger import Outcome, Row, finish, planned_run
from tests.report.ledger import judges as ledger_judges

SCRIPT = "<script>window.__pwned = 1</script>"
RAW = "I cannot score this <b>properly</b>"

Get = Callable[[str], Awaitable[tuple[int, str]]]


def inputs(tmp_path: Path) -> list[str]:
    """The examples' two models, model_a's first response carrying a script."""
    a = [json.loads(x) for x in (EXAMPLES / "model_a.jsonl").read_text().splitlines()]
    a[0]["text"] = f"{SCRIPT} 12"
    path = tmp_path / "model_a.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in a))
    return [f"a={path}", f"b={EXAMPLES / 'model_b.jsonl'}"]


def outcome(row: Row) -> Outcome:
    if row.judge == "j2" and row.id % 7 == 0:
        return "failed", None, "call-failed"
    return "done", 1 + row.id % 5


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, RunInfo, str]]:
    tmp = tmp_path_factory.mktemp("viewer")
    url = f"sqlite:///{tmp / 'store.db'}"
    store = Store(url)
    run = planned_run(
        store,
        "demo",
        instances=str(EXAMPLES / "instances.jsonl"),
        responses=inputs(tmp),
        judges=ledger_judges("j1", "j2"),
        limit=10,
    )
    rows = finish(store, run, outcome)
    with store.engine.begin() as conn:
        conn.execute(
            CALL.insert().values(
                uid="call-failed", cache_key="k", run_id=run.id, judge="j2", raw=RAW, parsed=False
            )
        )
        for r in rows:
            if r.judge == "j1" and r.instance_id == "1":
                conn.execute(
                    update(JUDGMENT)
                    .where(JUDGMENT.c.id == r.id)
                    .values(rationale=f"quoting: {SCRIPT}")
                )
            elif r.judge == "j2" and r.id % 7 == 0:
                conn.execute(
                    update(JUDGMENT)
                    .where(JUDGMENT.c.id == r.id)
                    .values(reason="parse", detail="no [SCORES] line")
                )
    yield store, run, url
    store.close()


@pytest.fixture
def get(ledger: tuple[Store, RunInfo, str]) -> Iterator[Callable[..., Any]]:
    """GET (or another method) on the viewer, in this thread's event loop."""
    loop = asyncio.new_event_loop()
    client = TestClient(TestServer(make_app(ledger[0])), loop=loop)
    loop.run_until_complete(client.start_server())

    def fetch(path: str, method: str = "GET") -> tuple[int, str]:
        async def go() -> tuple[int, str]:
            resp = await client.request(method, path)
            return resp.status, await resp.text()

        return loop.run_until_complete(go())

    yield fetch
    loop.run_until_complete(client.close())
    loop.close()


def ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'/judgments/(\d+)"', html)]


def test_runs_list_and_run_page_with_leaderboard_and_a_cached_second_view(get: Any) -> None:
    status, html = get("/")
    assert status == 200 and 'href="/runs/demo"' in html
    status, html = get("/runs/demo?judge=j1")
    assert status == 200 and 'id="leaderboard"' in html
    for model in ("a", "b"):
        assert f"/runs/demo/judgments?model={model}&amp;judge=j1" in html
    assert re.search(r"\[\d\.\d\d, \d\.\d\d\]", html)  # an interval
    assert "<svg" in html  # report.svg's figures
    status, html = get("/runs/demo?judge=j2")
    assert status == 200 and "cached" in html and "status=failed" in html


def test_the_snapshot_is_recomputed_when_the_ledger_changes(
    ledger: tuple[Store, RunInfo, str],
) -> None:
    store, run, _ = ledger
    first = browse.run_page(store, run, body_mod.render, body_mod.VERSION)
    again = browse.run_page(store, run, body_mod.render, body_mod.VERSION)
    assert again.cached and again.body == first.body
    assert not browse.run_page(store, run, body_mod.render, "another version").cached
    with store.engine.begin() as conn:  # a judgment judged again: the counts change
        row = conn.execute(JUDGMENT.select().where(JUDGMENT.c.status == "failed")).first()
        assert row is not None
        conn.execute(update(JUDGMENT).where(JUDGMENT.c.id == row.id).values(status="pending"))
    try:
        assert not browse.run_page(store, run, body_mod.render, body_mod.VERSION).cached
    finally:
        with store.engine.begin() as conn:
            conn.execute(update(JUDGMENT).where(JUDGMENT.c.id == row.id).values(status="failed"))


def test_untrusted_text_is_escaped_everywhere(get: Any, ledger: tuple[Store, RunInfo, str]) -> None:
    store, run, _ = ledger
    escaped = "&lt;script&gt;window.__pwned = 1&lt;/script&gt;"
    _, listing = get("/runs/demo/judgments?judge=j1&instance=1")
    assert escaped in listing and SCRIPT not in listing
    status, detail = get(f"/runs/demo/judgments/{ids(listing)[0]}")
    assert status == 200 and escaped in detail and SCRIPT not in detail
    _, compare = get("/runs/demo/compare?instance=1&a=a&b=b")
    assert escaped in compare and SCRIPT not in compare
    failed = browse.judgments(store, run, browse.JudgmentQuery(status="failed")).lines[0]
    _, page = get(f"/runs/demo/judgments/{failed.id}")
    assert "I cannot score this &lt;b&gt;properly&lt;/b&gt;" in page and "parse" in page


def test_filters_are_sql_and_links_are_shareable(
    get: Any, ledger: tuple[Store, RunInfo, str]
) -> None:
    store, run, _ = ledger
    page = browse.judgments(store, run, browse.JudgmentQuery(status="failed"))
    failed = page.lines
    assert (
        failed
        and page.next_after is None
        and all(j.status == "failed" and j.judge == "j2" for j in failed)
    )
    _, html = get("/runs/demo/judgments?status=failed")
    assert sorted(ids(html)) == [j.id for j in failed]
    crit = browse.judgments(
        store, run, browse.JudgmentQuery(model="b", judge="j1", criterion="Logical Correctness")
    ).lines
    assert crit and {(j.model, j.judge, j.criterion) for j in crit} == {
        ("b", "j1", "Logical Correctness")
    }
    found = browse.judgments(store, run, browse.JudgmentQuery(search="WINDOW.__pwned")).lines
    assert found and {j.instance_id for j in found} == {"1"}  # response or rationale, any case
    math = browse.judgments(store, run, browse.JudgmentQuery(domain="Math", model="a")).lines
    assert math and len(math) < len(
        browse.judgments(store, run, browse.JudgmentQuery(model="a")).lines
    )
    ability = browse.query_of({"ability": "Logical Thinking"}, run)
    assert set(ability.criteria) >= {"Logical Correctness", "Logical Robustness"}
    with pytest.raises(InputError):
        browse.query_of({"difficulty": "hard"})
    status, _ = get("/runs/demo/judgments?difficulty=hard")
    assert status == 400


def test_keyset_paging_walks_every_row_once(get: Any, ledger: tuple[Store, RunInfo, str]) -> None:
    store, run, _ = ledger
    total = sum(browse.overview(store, run).counts.values())
    assert total > browse.PAGE
    seen: list[int] = []
    path: str | None = "/runs/demo/judgments"
    while path is not None:
        status, html = get(path)
        assert status == 200
        page = ids(html)
        assert len(page) <= browse.PAGE and page == sorted(page)
        seen += page
        found = re.search(r'id="next" href="([^"]+)"', html)
        path = found.group(1).replace("&amp;", "&") if found else None
    assert len(seen) == len(set(seen)) == total


def test_a_search_outside_a_cell_reads_a_window_per_page(
    ledger: tuple[Store, RunInfo, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rare term is searched a window of judgments at a time, each page pointing at the
    next window; walked to the end, the pages hold every match once."""
    store, run, _ = ledger
    query = browse.JudgmentQuery(search="__pwned")
    everything = browse.judgments(store, run, query, limit=10_000).lines
    monkeypatch.setattr(judgment_pages, "SCAN_WINDOW", 7)
    seen: list[int] = []
    after: int | None = 0
    pages = 0
    while after is not None:
        page = browse.judgments(store, run, query, after)
        seen += [j.id for j in page.lines]
        after, pages = page.next_after, pages + 1
    assert seen == [j.id for j in everything] and pages > 3


@pytest.mark.parametrize(
    "path",
    [
        "/runs/nope",
        "/runs/nope/judgments",
        "/runs/demo/judgments/999999",
        "/runs/demo/judgments/abc",
        "/no/such/page",
    ],
)
def test_unknown_things_are_404(get: Any, path: str) -> None:
    status, html = get(path)
    assert status == 404 and "Not found" in html


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_read_only(get: Any, method: str) -> None:
    assert get("/runs/demo", method)[0] == 405
    assert get("/", method)[0] == 405


def test_pages_load_nothing_from_elsewhere(get: Any) -> None:
    for path in ("/", "/runs/demo", "/runs/demo/judgments", "/runs/demo/compare"):
        _, html = get(path)
        assert not re.search(r'(src|href)="(https?:)?//', html), path


def test_view_bad_input_is_one_line(tmp_path: Path, ledger: tuple[Store, RunInfo, str]) -> None:
    missing = tmp_path / "missing.db"
    out = flask_eval("view", env=cli_env(f"sqlite:///{missing}"), check=False)
    assert out.returncode == 2 and out.stderr.startswith("error: no flask-eval store")
    assert len(out.stderr.splitlines()) == 1 and not missing.exists()
    env = cli_env(ledger[2])
    out = flask_eval("view", "nope", "--no-warm", env=env, check=False)
    assert out.returncode == 2 and out.stderr == "error: no run named 'nope' in this store\n"
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        out = flask_eval("view", "--port", str(port), "--no-warm", env=env, check=False)
    assert out.returncode == 2 and "in use" in out.stderr and len(out.stderr.splitlines()) == 1


def test_a_large_run_is_never_computed_while_its_page_waits(
    ledger: tuple[Store, RunInfo, str], get: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above the inline limit, a page serves the last snapshot (marked as of when) or says
    the report is being computed and reloads; the refresher computes it beside the page."""
    import time

    store, run, _ = ledger
    version = "large-run-test"
    with store.engine.begin() as conn:  # no snapshot yet
        conn.execute(REPORT_SNAPSHOT.delete())
    first = browse.run_page(store, run, body_mod.render, version, inline_limit=0)
    assert first.body is None and first.stale and not first.cached
    assert browse.refresh(store, run, body_mod.render, version)
    assert not browse.refresh(store, run, body_mod.render, version)  # already current
    fresh = browse.run_page(store, run, body_mod.render, version, inline_limit=0)
    assert fresh.cached and not fresh.stale and fresh.body is not None
    with store.engine.begin() as conn:  # the ledger moves on
        row = conn.execute(JUDGMENT.select().where(JUDGMENT.c.status == "failed")).first()
        assert row is not None
        conn.execute(update(JUDGMENT).where(JUDGMENT.c.id == row.id).values(status="pending"))
    try:
        old = browse.run_page(store, run, body_mod.render, version, inline_limit=0)
        assert old.stale and old.body == fresh.body and old.made_at
    finally:
        with store.engine.begin() as conn:
            conn.execute(update(JUDGMENT).where(JUDGMENT.c.id == row.id).values(status="failed"))

    # through the web page, with a version never computed: "being computed", then the board
    monkeypatch.setattr(browse, "INLINE_LIMIT", 0)
    monkeypatch.setattr(body_mod, "VERSION", "large-run-page-test")
    with store.engine.begin() as conn:  # no snapshot at all
        conn.execute(REPORT_SNAPSHOT.delete())
    status, html = get("/runs/demo")
    assert status == 200 and 'id="computing"' in html and 'http-equiv="refresh"' in html
    deadline = time.monotonic() + 30
    while 'id="leaderboard"' not in html:
        assert time.monotonic() < deadline, "the refresher never computed the page"
        time.sleep(0.05)
        status, html = get("/runs/demo")
    assert 'http-equiv="refresh"' not in html and "cached" in html


def test_deleting_a_run_deletes_its_page_snapshots(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        run = planned_run(
            store,
            "gone",
            instances=str(EXAMPLES / "instances.jsonl"),
            responses=inputs(tmp_path),
            judges=ledger_judges("j1"),
            limit=3,
        )
        finish(store, run, outcome)
        browse.run_page(store, run, body_mod.render, body_mod.VERSION)
        assert snapshots.snapshot(store, run.id, browse.SNAPSHOT) is not None
        store.delete_run(run.id)
        with store.engine.connect() as conn:
            assert conn.execute(REPORT_SNAPSHOT.select()).first() is None
    finally:
        store.close()
