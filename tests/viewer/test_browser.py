"""The viewer in a real browser (Playwright + Debian's Chromium) over real runs judged
in-process by the judge simulator, and the prompt it shows checked against what the
simulator received.

One module, one pair of runs and one browser for every test (module-scoped fixtures).
Without the ``playwright`` package or ``/usr/bin/chromium`` the browser tests skip; the
prompt test runs anyway. Screenshots go to ``$FLASK_EVAL_ARTIFACTS`` (default
``.artifacts/screenshots``)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from flask_eval.app import browse
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.server import Simulator
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage.store import Store
from flask_eval.viewer.server import make_app
from tests.conftest import EXAMPLES, REPO
from tests.helpers import cli_env, flask_eval

#: a Chromium process per module: the integration tier (the collection cannot see it)
pytestmark = pytest.mark.integration

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("FLASK_EVAL_ARTIFACTS") or REPO / ".artifacts" / "screenshots")
SCRIPT = "<script>window.__pwned = 1</script>"


@dataclass
class Runs:
    url: str
    tmp: Path
    #: the messages of every request the simulators received (plain role/text pairs)
    received: list[list[dict[str, str]]] = field(default_factory=list)


def _plain(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    out = []
    for m in messages:
        content = m["content"]
        if not isinstance(content, str):
            content = "".join(p.get("text", "") for p in content)
        out.append({"role": m["role"], "content": content})
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    """An absolute run (judges `good` and `flaky`, the latter answering garbage at times)
    and a pairwise run, on 6 instances of the examples; model a's first response carries
    a script that would set ``window.__pwned``."""
    tmp = tmp_path_factory.mktemp("browser")
    result = Runs(f"sqlite:///{tmp / 'store.db'}", tmp)
    a = [json.loads(x) for x in (EXAMPLES / "model_a.jsonl").read_text().splitlines()]
    a[0]["text"] = f"{SCRIPT} 0.15 x 80 = 12"
    (tmp / "a.jsonl").write_text("".join(json.dumps(x) + "\n" for x in a))
    original = Simulator._complete_inner

    async def recording(self: Simulator, request: web.Request, dialect: Any) -> web.Response:
        result.received.append(_plain(json.loads(await request.read())["messages"]))
        return await original(self, request, dialect)

    with ExitStack() as stack:
        patch = stack.enter_context(pytest.MonkeyPatch.context())
        patch.setattr(Simulator, "_complete_inner", recording)
        good = stack.enter_context(running_simulator(SimConfig(seed=1)))
        flaky = stack.enter_context(running_simulator(SimConfig(seed=2, garbage_rate=0.7)))
        judges = tmp / "judges.yaml"
        judges.write_text(
            f"- spec: openai/sim-gpt@{good.openai_base_url}\n  name: good\n"
            f"- spec: openai/sim-gpt@{flaky.openai_base_url}\n  name: flaky\n"
        )
        env = cli_env(result.url, FLASK_EVAL_HALT_AFTER="1000")
        responses = [
            "--responses",
            f"a={tmp / 'a.jsonl'}",
            "--responses",
            f"b={EXAMPLES / 'model_b.jsonl'}",
        ]
        common = [
            "--instances",
            str(EXAMPLES / "instances.jsonl"),
            *responses,
            "--limit",
            "6",
            "--quiet",
        ]
        flask_eval("run", *common, "--judges", str(judges), "--run", "abs", env=env, check=False)
        flask_eval(
            "run",
            *common,
            "--judge",
            f"good=openai/sim-gpt@{good.openai_base_url}",
            "--pairwise",
            "all",
            "--run",
            "pw",
            env=env,
        )
        bare = tmp / "bare.jsonl"  # without FLASK's metadata: eval annotates them
        lines = (EXAMPLES / "instances.jsonl").read_text().splitlines()[:3]
        bare.write_text(
            "".join(
                json.dumps({k: json.loads(x)[k] for k in ("idx", "instruction", "answer")}) + "\n"
                for x in lines
            )
        )
        play = stack.enter_context(running_simulator(SimConfig(seed=3, generators={"m1": 2.0})))
        flask_eval(
            "eval",
            "--instances",
            str(bare),
            "--judge",
            "judge=openai/judge",
            "--model",
            "m1=openai/m1",
            "--name",
            "ev",
            "--out",
            str(tmp / "out"),
            "--quiet",
            env={**env, "OPENAI_BASE_URL": play.openai_base_url},
        )
    yield result


def test_the_prompt_shown_is_the_prompt_the_judge_received(runs: Runs) -> None:
    """Every judgment's prompt, rendered by the viewer from the stored inputs, is one the
    simulator received, and every first request of the absolute run is one of them."""
    store = Store(runs.url)
    try:
        for name in ("abs", "pw"):
            run = browse.find_run(store, name)
            page = browse.judgments(store, run, browse.JudgmentQuery(), limit=1000)
            lines = page.lines
            assert lines and page.next_after is None
            rendered = []
            for line in lines:
                prompt = browse.judgment_detail(store, run, line.id).prompt
                assert prompt is not None and prompt.messages, line
                assert prompt.messages in runs.received, (name, line)
                assert line.criterion in prompt.criteria
                assert prompt.verified or line.status == "failed", line
                rendered.append(prompt.messages)
        failed = browse.judgments(
            store, browse.find_run(store, "abs"), browse.JudgmentQuery(status="failed")
        ).lines
        assert failed, "the flaky judge failed nothing: the browser test needs a failure"
    finally:
        store.close()


class Served:
    """An aiohttp application (the viewer's, the rating workspace's) served on 127.0.0.1
    from a thread of its own."""

    def __init__(self, app: web.Application) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.loop = asyncio.new_event_loop()
        self.runner = web.AppRunner(app, access_log=None)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.ready = threading.Event()
        self.thread.start()
        assert self.ready.wait(10), "the application did not start"

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.runner.setup())
        self.loop.run_until_complete(web.SockSite(self.runner, self.sock).start())
        self.ready.set()
        self.loop.run_forever()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@dataclass
class Browser:
    page: Any
    base: str
    problems: list[str]

    def shot(self, name: str) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


@pytest.fixture(scope="module")
def browser(runs: Runs) -> Iterator[Browser]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    store = Store(runs.url)
    viewer = Served(make_app(store))
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        page = chromium.new_page(viewport={"width": 1400, "height": 900})
        problems: list[str] = []
        page.on(
            "console",
            lambda m: (
                problems.append(f"console {m.type}: {m.text}")
                if m.type in ("error", "warning")
                else None
            ),
        )
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.set_default_timeout(15_000)
        try:
            yield Browser(page, viewer.url, problems)
        finally:
            chromium.close()
            viewer.close()
            store.close()


def test_from_the_leaderboard_to_a_failure_and_its_raw_output(browser: Browser) -> None:
    page = browser.page
    page.goto(browser.base + "/")
    evaluation = page.locator("#runs tbody.eval[data-eval='ev'] tr[data-run]")
    assert evaluation.count() == 3  # generate, annotate, judge under one heading
    assert "m1" in evaluation.nth(0).locator("td.models").inner_text()
    assert page.locator("#runs tr[data-run='abs'] td.judges").inner_text() == "good, flaky"
    assert page.locator("#runs tr[data-run='abs'] td.duration").inner_text() != "–"
    browser.shot("runs")
    page.click("#runs a:text-is('abs')")
    page.wait_for_selector("#leaderboard")
    assert page.locator("#leaderboard tbody tr").count() == 2
    assert page.locator("figure.svg svg").count() >= 1
    browser.shot("leaderboard")
    page.select_option("select.autosubmit", "flaky")  # the judge picker (viewer.js)
    page.wait_for_url("**judge=flaky")
    page.click("#leaderboard a.failed >> nth=0")
    page.wait_for_selector("#judgments")
    assert "status=failed" in page.url
    page.click("#judgments tbody tr:first-child td:first-child a")
    page.wait_for_selector("#raw")
    assert page.locator("#status").inner_text().startswith("failed")
    assert page.locator("#reason").inner_text()
    assert page.locator("#raw").inner_text()
    assert page.locator("pre.prompt").count() >= 1
    browser.shot("failure-drill-down")
    assert not browser.problems


def test_a_figure_cell_links_to_its_judgments(browser: Browser) -> None:
    page = browser.page
    page.goto(browser.base + "/runs/abs?judge=good")
    page.click("figure.svg svg a >> nth=0")
    page.wait_for_selector("#judgments")
    assert "judge=good" in page.url and page.locator("#judgments tbody tr").count() >= 1
    assert not browser.problems


def test_two_models_side_by_side_and_the_script_stays_text(browser: Browser) -> None:
    page = browser.page
    page.goto(browser.base + "/runs/abs")
    page.click("#compare-link")
    page.wait_for_selector("section.side")
    assert page.locator("section.side").count() == 2
    assert SCRIPT in page.locator("section.side[data-model='a'] pre.response").inner_text()
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#disagreements tbody tr").count() >= 1  # two judges scored them
    browser.shot("comparison")
    first = page.locator("h1").inner_text()
    page.click("#next")
    page.wait_for_selector("#previous")
    assert page.locator("h1").inner_text() != first
    page.click("#disagreements tbody tr:first-child a")
    page.wait_for_selector("section.side")
    page.goto(browser.base + "/runs/abs/judgments?q=__pwned")
    assert (
        SCRIPT in page.locator("#judgments").inner_text()
        or page.locator("#judgments tbody tr").count() >= 1
    )
    page.click("#judgments tbody tr:first-child td:first-child a")
    page.wait_for_selector("pre.response")
    assert SCRIPT in page.locator("pre.response").first.inner_text()
    assert page.evaluate("window.__pwned") is None
    assert not browser.problems


def test_a_pairwise_runs_win_matrix(browser: Browser) -> None:
    page = browser.page
    page.goto(browser.base + "/")
    page.click("#runs a:text-is('pw')")
    page.wait_for_selector("#win-matrix")
    cells = page.locator("#win-matrix td.heat a")
    assert cells.count() >= 1
    assert page.locator("figure[data-figure=win_matrix] svg").count() == 1
    ratings = [
        float(t) for t in page.locator("#ratings tbody tr td:nth-child(2)").all_inner_texts()
    ]
    assert len(ratings) == 2 and ratings == sorted(ratings, reverse=True)  # best first
    assert page.locator("#controlled tbody tr").count() == 2
    assert page.locator("#controlled td.style").first.inner_text() != "–"
    assert page.locator("#position td.consistency").first.inner_text() != "–"
    browser.shot("pairwise-matrix")
    cells.first.click()
    page.wait_for_selector("#judgments")
    assert page.locator("#judgments tbody tr").count() >= 1
    assert not browser.problems
