"""A report of a run in progress says so, with its pending count, in every form: text,
JSON, CSV (on stdout and in --out), HTML, the viewer's run page, the summary `run` and
`wait` end with; `report` then exits 1. A finished run's report says nothing of it."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from flask_eval.app.report import build_report
from flask_eval.report import html
from flask_eval.report.render import report_csv, run_summary, to_json, to_table
from flask_eval.storage.records import OpenRow as Row
from flask_eval.storage.store import Store
from flask_eval.viewer.server import make_app
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval
from tests.report.ledger import Outcome, finish, judges, planned_run

#: a judgment left pending (not judged yet) for every this many
EVERY = 5


def judged_so_far(row: Row) -> Outcome:
    return None if row.id % EVERY == 0 else ("done", 1 + row.id % 5)


@pytest.fixture
def partial(tmp_path: Path) -> Iterator[tuple[str, int, int]]:
    """A run (2 models, 2 judges) with one judgment in EVERY still pending: (database
    URL, pending, total)."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = Store(url)
    run = planned_run(
        store,
        "partial",
        instances=str(EXAMPLES / "instances.jsonl"),
        responses=[f"a={EXAMPLES / 'model_a.jsonl'}", f"b={EXAMPLES / 'model_b.jsonl'}"],
        judges=judges("j1", "j2"),
        limit=10,
    )
    rows = finish(store, run, judged_so_far)
    store.close()
    pending = sum(judged_so_far(r) is None for r in rows)
    assert 0 < pending < len(rows)
    yield url, pending, len(rows)


def said(text: str, pending: int, total: int) -> bool:
    """``text`` says the run is in progress with its pending count."""
    return f"IN PROGRESS: {pending:,} of {total:,} judgments pending" in " ".join(text.split())


def test_every_report_form_of_a_run_in_progress_says_so_and_exits_1(
    partial: tuple[str, int, int], tmp_path: Path
) -> None:
    url, pending, total = partial
    env = cli_env(url)
    report = ("report", "partial", "--bootstrap", "20", "--quiet")
    text = flask_eval(*report, env=env, check=False)
    assert text.returncode == 1
    assert said("\n".join(text.stdout.splitlines()[:4]), pending, total), text.stdout[:600]
    assert f"run partial is in progress: {pending:,} of {total:,} judgments pending" in (
        text.stderr
    )
    assert "Leaderboard" in text.stdout or "overall" in text.stdout  # the partial figures

    out = flask_eval(*report, "--format", "json", env=env, check=False)
    assert out.returncode == 1
    doc = json.loads(out.stdout)
    assert doc["in_progress"] is True and doc["pending"] == pending
    assert doc["judgments"] == {
        "total": total,
        "done": total - pending,
        "failed": 0,
        "pending": pending,
    }

    out = flask_eval(*report, "--format", "csv", env=env, check=False)
    assert out.returncode == 1
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    progress = {r["key"]: int(r["n"]) for r in rows if r["dimension"] == "progress"}
    assert progress == {"total": total, "done": total - pending, "failed": 0, "pending": pending}
    assert rows[0]["dimension"] == "progress"  # read first

    flask_eval(*report, "--format", "csv", "--out", str(tmp_path / "csv"), env=env, check=False)
    rows = list(csv.DictReader((tmp_path / "csv" / "rows.csv").open()))
    assert {r["key"]: int(r["n"]) for r in rows if r["dimension"] == "progress"}["pending"] == (
        pending
    )


def test_the_viewer_run_page_says_a_run_is_in_progress(partial: tuple[str, int, int]) -> None:
    url, pending, total = partial
    store = Store(url)
    loop = asyncio.new_event_loop()
    client = TestClient(TestServer(make_app(store)), loop=loop)
    try:
        loop.run_until_complete(client.start_server())

        async def page() -> str:
            resp = await client.get("/runs/partial")
            assert resp.status == 200
            return await resp.text()

        html = loop.run_until_complete(page())
    finally:
        loop.run_until_complete(client.close())
        loop.close()
        store.close()
    banner = re.search(r'<p class="in-progress" id="in-progress">(.*?)</p>', html)
    assert banner and said(banner[1], pending, total)


def test_the_html_page_and_the_end_of_run_summary_say_the_run_is_in_progress(
    partial: tuple[str, int, int],
) -> None:
    url, pending, total = partial
    store = Store(url)
    try:
        info = store.find_run("partial")
        assert info is not None
        report = build_report(store, info, replicates=0, progress=False)
    finally:
        store.close()
    assert said(run_summary(report, {}), pending, total)
    page = html.render(report, [])
    banner = re.search(r"<p class='in-progress' id='in-progress'>(.*?)</p>", page)
    assert banner and said(banner[1], pending, total)


def test_a_finished_runs_report_says_nothing_of_progress(
    partial: tuple[str, int, int],
) -> None:
    url, _, total = partial
    store = Store(url)
    try:
        info = store.find_run("partial")
        assert info is not None
        finish(store, info, lambda r: ("done", 1 + r.id % 5))
        report = build_report(store, info, replicates=0, progress=False)
    finally:
        store.close()
    doc = json.loads(to_json(report))
    assert doc["in_progress"] is False and doc["pending"] == 0
    assert doc["judgments"]["done"] == total
    for text in (to_table(report), run_summary(report, {}), html.render(report, [])):
        assert "IN PROGRESS" not in text
    rows = csv.DictReader(io.StringIO(report_csv(report)))
    assert not [r for r in rows if r["dimension"] == "progress"]
    assert flask_eval("report", "partial", "--bootstrap", "0", env=cli_env(url)).returncode == 0
