"""The viewer's parameters are untrusted input: a number beyond the ledger's integers
(PostgreSQL's ``integer``; above 2^63 nothing holds it) or a NUL (which PostgreSQL
cannot hold) in any filter, the search, a run path or an instance is a 400 (or a 404 for
an id no judgment can have) on every route, on both stores, never a 500 with a
traceback in the log."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from flask_eval.core.limits import MAX_INTEGER
from flask_eval.storage.store import Store
from flask_eval.viewer.server import make_app
from tests.conftest import EXAMPLES
from tests.report.ledger import finish, planned_run
from tests.report.ledger import judges as ledger_judges

HUGE = str(1 << 64)  # above 2^63: no store's integer holds it
BIGGEST = str(MAX_INTEGER)  # the largest id the ledger holds: a valid, empty place
FILTERS = (
    "model",
    "model_b",
    "judge",
    "criterion",
    "domain",
    "difficulty",
    "capability",
    "task",
    "instance",
    "status",
    "reason",
    "q",
    "ability",
    "pair",
    "after",
)
RUN_PAGES = (
    "/runs/{run}",
    "/runs/{run}/judgments",
    "/runs/{run}/compare",
    "/runs/{run}/judgments/1",
)
BAD_TEXTS = ("%00", "a%00b")  # NUL, which PostgreSQL cannot hold, alone and inside


@pytest.fixture
def fetch(database_url: str, tmp_path: Path) -> Iterator[Callable[[str], int]]:
    """GET on the viewer over a small judged run ``demo`` on ``database_url``."""
    store = Store(database_url)
    run = planned_run(
        store,
        "demo",
        instances=str(EXAMPLES / "instances.jsonl"),
        responses=[f"a={EXAMPLES / 'model_a.jsonl'}", f"b={EXAMPLES / 'model_b.jsonl'}"],
        judges=ledger_judges("j1"),
        limit=3,
    )
    finish(store, run, lambda row: ("done", 3))
    loop = asyncio.new_event_loop()
    client = TestClient(TestServer(make_app(store)), loop=loop)
    loop.run_until_complete(client.start_server())

    def fetch(path: str) -> int:
        async def go() -> int:
            resp = await client.get(path)
            await resp.read()
            return resp.status

        return loop.run_until_complete(go())

    yield fetch
    loop.run_until_complete(client.close())
    loop.close()
    store.close()


def _no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]


def test_numbers_beyond_the_stores_integers_are_400_or_404(
    fetch: Callable[[str], int], caplog: pytest.LogCaptureFixture
) -> None:
    assert fetch(f"/runs/demo/judgments/{HUGE}") == 404
    assert fetch(f"/runs/demo/judgments/{BIGGEST}") == 404
    assert fetch("/runs/demo/judgments/%C2%B2") == 404  # a digit int() does not take
    assert fetch(f"/runs/demo/judgments?after={HUGE}") == 400
    assert fetch("/runs/demo/judgments?after=%C2%B2") == 400
    assert fetch(f"/runs/demo/judgments?after={BIGGEST}") == 200  # past the last one
    assert fetch(f"/runs/demo/judgments?after={MAX_INTEGER + 1}") == 400
    assert fetch(f"/runs/demo/judgments?difficulty={HUGE}") == 400
    assert fetch(f"/runs/demo/judgments?difficulty=-{HUGE}") == 400
    assert fetch("/runs/demo/judgments?difficulty=-3") == 200
    # the huge number in every other parameter and path of every route: never a 500
    paths = [f"/runs/demo/judgments?{name}={HUGE}" for name in FILTERS]
    paths += [page.format(run=HUGE) for page in RUN_PAGES]
    paths += [f"/runs/demo/compare?{name}={HUGE}" for name in ("instance", "a", "b")]
    paths += [f"/runs/demo?{name}={HUGE}" for name in ("judge", "criterion")]
    statuses = {path: fetch(path) for path in paths}
    assert {p: s for p, s in statuses.items() if s not in (200, 400, 404)} == {}
    _no_traceback(caplog)


@pytest.mark.parametrize("bad", BAD_TEXTS, ids=["nul", "nul-inside"])
def test_unstorable_text_in_any_parameter_of_any_route_is_400(
    fetch: Callable[[str], int], bad: str, caplog: pytest.LogCaptureFixture
) -> None:
    statuses = {}
    for name in FILTERS:  # every filter of the judgments page, the search included
        statuses[f"judgments?{name}"] = fetch(f"/runs/demo/judgments?{name}={bad}")
    for page in RUN_PAGES:  # the run's name in every run path
        statuses[page] = fetch(page.format(run=bad))
    for name in ("instance", "a", "b"):
        statuses[f"compare?{name}"] = fetch(f"/runs/demo/compare?{name}={bad}")
    for name in ("judge", "criterion"):
        statuses[f"run?{name}"] = fetch(f"/runs/demo?{name}={bad}")
    statuses["runs?any"] = fetch(f"/?any={bad}")
    statuses["judgment id"] = fetch(f"/runs/demo/judgments/{bad}")
    assert {k: v for k, v in statuses.items() if v != 400} == {}
    _no_traceback(caplog)
    assert fetch("/runs/demo/judgments?q=plain") == 200  # the pages themselves work
    assert fetch("/runs/demo/compare?instance=1") == 200
