"""Unpriced is unknown everywhere: a judge without a price (here a well-known model
behind another server, unpriced by design) has its cost printed as "unknown" with the
reason by the report (text and JSON), `status`, `runs`, the viewer and `eval`'s report,
never as $0."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage.store import Store
from flask_eval.viewer.server import make_app
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval

INPUTS = [
    "--instances",
    str(EXAMPLES / "instances.jsonl"),
    "--responses",
    f"model_a={EXAMPLES / 'model_a.jsonl'}",
]
WHY = "openai/gpt-4o behind"
ZERO = re.compile(r"\$0\.0+\b")


def viewer_pages(database_url: str, paths: list[str]) -> list[str]:
    store = Store(database_url)
    loop = asyncio.new_event_loop()
    client = TestClient(TestServer(make_app(store)), loop=loop)
    loop.run_until_complete(client.start_server())

    async def get(path: str) -> str:
        resp = await client.get(path)
        assert resp.status == 200, path
        return await resp.text()

    try:
        return [loop.run_until_complete(get(p)) for p in paths]
    finally:
        loop.run_until_complete(client.close())
        loop.close()
        store.close()


def test_a_model_behind_another_server_has_an_unknown_cost_everywhere(tmp_path: Path) -> None:
    with running_simulator(SimConfig(seed=4)) as sim:
        env = cli_env(f"sqlite:///{tmp_path / 'u.db'}")
        judge = f"j=openai/gpt-4o@{sim.openai_base_url}"
        flask_eval("run", *INPUTS, "--judge", judge, "--run", "r", "--quiet", env=env)
    report = flask_eval("report", "r", env=env).stdout
    cost_line = next(x for x in report.splitlines() if x.strip().startswith("j:") and "calls" in x)
    assert "cost unknown" in cost_line and WHY in cost_line and not ZERO.search(cost_line)
    [cost] = json.loads(flask_eval("report", "r", "--format", "json", env=env).stdout)["cost"]
    assert cost["cost"] is None and WHY in cost["unpriced"]
    status = flask_eval("status", "r", env=env).stdout
    assert "unknown (" in status and WHY in status and not ZERO.search(status)
    runs = flask_eval("runs", env=env).stdout
    assert "unknown (" in runs and not ZERO.search(runs)
    run_page, judgment = viewer_pages(
        env["FLASK_EVAL_DATABASE_URL"], ["/runs/r", "/runs/r/judgments/1"]
    )
    for html in (run_page, judgment):
        assert "unknown (" in html and WHY in html and not ZERO.search(html)


def test_eval_s_report_says_the_cost_is_unknown(tmp_path: Path) -> None:
    levels = {"m1": 2.0, "m2": 4.0}
    with running_simulator(SimConfig(seed=3, generators=levels, generation_tokens=40)) as sim:
        env = cli_env(f"sqlite:///{tmp_path / 'e.db'}", OPENAI_BASE_URL=sim.openai_base_url)
        args = [
            "eval",
            "--instances",
            str(EXAMPLES / "instances.jsonl"),
            "--judge",
            f"judge=openai/gpt-4o@{sim.openai_base_url}",
            "--out",
            str(tmp_path / "out"),
            "--quiet",
            "--model",
            "m1=openai/m1",
            "--model",
            "m2=openai/m2",
        ]
        result = flask_eval(*args, env=env)
    header = result.stdout.split("\n\n")[0]
    assert "cost unknown" in header and WHY in header and not ZERO.search(header)
    # the models have no price either: their responses' cost is unknown (null), not 0
    lines = (tmp_path / "out" / "responses" / "m1.jsonl").read_text().splitlines()
    assert lines and all(json.loads(x)["usage"]["cost"] is None for x in lines)
