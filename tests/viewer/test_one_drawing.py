"""Each figure is drawn once: the SVG ``report.figures`` draws of a report is what the
HTML report embeds and writes as its file, and what the viewer's run page serves (there
each mark in a link to the judgments behind it: the drawing with those links taken out
is the same string)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from flask_eval.app.report import build_report
from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND, VERDICT_TIE
from flask_eval.report import html
from flask_eval.report.figures import JUDGE_FIGURES, Figure, all_figures
from flask_eval.report.svg import standalone
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store
from flask_eval.viewer.server import make_app
from tests.conftest import EXAMPLES
from tests.report.ledger import Outcome, Row, finish, planned_run
from tests.report.ledger import judges as ledger_judges

RESPONSES = [f"a={EXAMPLES / 'model_a.jsonl'}", f"b={EXAMPLES / 'model_b.jsonl'}"]
VERDICTS = (VERDICT_FIRST, VERDICT_SECOND, VERDICT_FIRST, VERDICT_TIE)
LINK = re.compile(r'<a href="[^"]*">|</a>')


def _scored(row: Row) -> Outcome:
    return "done", 1 + (row.id * 7 + len(row.judge) + (row.model == "a")) % 5


def _verdict(row: Row) -> Outcome:
    return "done", VERDICTS[row.id % len(VERDICTS)]


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, RunInfo, RunInfo]]:
    """A run graded by two judges and a pairwise run of the examples' two models."""
    tmp = tmp_path_factory.mktemp("drawing")
    store = Store(f"sqlite:///{tmp / 'store.db'}")
    instances = str(EXAMPLES / "instances.jsonl")
    graded = planned_run(
        store, "graded", instances=instances, responses=RESPONSES, judges=ledger_judges("j1", "j2")
    )
    finish(store, graded, _scored)
    paired = planned_run(
        store,
        "paired",
        instances=instances,
        responses=RESPONSES,
        judges=ledger_judges("p1"),
        pairwise="all",
    )
    finish(store, paired, _verdict)
    yield store, graded, paired
    store.close()


def _viewer(store: Store, paths: list[str]) -> dict[str, str]:
    """The viewer's pages at ``paths``."""
    loop = asyncio.new_event_loop()
    client = TestClient(TestServer(make_app(store)), loop=loop)

    async def fetch() -> dict[str, str]:
        await client.start_server()
        try:
            pages = {}
            for path in paths:
                resp = await client.get(path)
                assert resp.status == 200, path
                pages[path] = await resp.text()
            return pages
        finally:
            await client.close()

    try:
        return loop.run_until_complete(fetch())
    finally:
        loop.close()


def _check(figures: list[Figure], page: str, viewer: dict[str | None, str], out: Path) -> None:
    for figure in figures:
        # the HTML report: the drawing inline, once, and as its file
        assert page.count(figure.svg) == 1, figure.stem
        assert (out / figure.file_name).read_bytes() == figure.file() == standalone(figure.svg)
        # the viewer: the same drawing, its marks linked to their judgments
        served = viewer[figure.judge]
        assert LINK.sub("", served).count(figure.svg) == 1, figure.stem


def test_each_figure_is_one_drawing_in_the_html_report_and_the_viewer(
    ledger: tuple[Store, RunInfo, RunInfo], tmp_path: Path
) -> None:
    store, graded, paired = ledger
    report = build_report(store, graded, replicates=1000, progress=False)  # as the viewer
    figures = all_figures(report)  # each drawn once, here
    names = [f.name for f in figures]
    assert names == [
        *[n for n in JUDGE_FIGURES if n != "capability_heatmap"] * 2,
        "agreement_matrix",
    ]
    out = tmp_path / "graded"
    page = html.write_report(report, out).read_text(encoding="utf-8")
    pages = _viewer(store, ["/runs/graded?judge=j1", "/runs/graded?judge=j2"])
    viewer = {"j1": pages["/runs/graded?judge=j1"], "j2": pages["/runs/graded?judge=j2"]}
    viewer[None] = viewer["j1"]  # the agreement matrix: on every judge's page
    for judge in ("j1", "j2"):  # the viewer's figures link to the judgments
        assert f'<a href="/runs/graded/judgments?model=a&amp;judge={judge}' in viewer[judge]
    _check(figures, page, viewer, out)

    report = build_report(store, paired, replicates=1000, progress=False)
    figures = all_figures(report)
    assert [f.name for f in figures] == ["win_matrix", "ratings_chart", "position_chart"]
    out = tmp_path / "paired"
    page = html.write_report(report, out).read_text(encoding="utf-8")
    served = _viewer(store, ["/runs/paired?judge=p1&criterion=all"])
    viewer = {"p1": served["/runs/paired?judge=p1&criterion=all"]}
    viewer[None] = viewer["p1"]
    assert 'href="/runs/paired/judgments?model=a&amp;model_b=b' in viewer["p1"]
    _check(figures, page, viewer, out)
