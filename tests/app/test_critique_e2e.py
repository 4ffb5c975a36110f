"""`flask-eval critique` end to end in-process: a simulated critic behind the real OpenAI
SDK, the executor and the SQLite ledger. The kind is one module and one registry line
(rubrics/critique.py): planned (one row per response and critic), asked, stored as a
value, written and exported naming the critic as a critic, shown by the viewer, refused
by `report` naming the command that writes it; a second run pays for nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from flask_eval.rubrics import kinds
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage.store import Store
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval
from tests.viewer.test_pages import serving

LIMIT = 4
MODELS = ("model_a", "model_b")


def read_jsonl(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _critique(env: dict[str, str], out: Path, run: str) -> str:
    args = ["critique", "--instances", str(EXAMPLES / "instances.jsonl")]
    for model in MODELS:
        args += ["--responses", f"{model}={EXAMPLES / model}.jsonl"]
    args += ["--critic", "critic=openai/critic", "--out", str(out), "--run", run]
    return flask_eval(*args, "--limit", str(LIMIT), "--quiet", env=env).stdout


def test_critiques_are_planned_asked_stored_exported_and_shown(
    tmp_path: Path, sqlite_url: str
) -> None:
    assert kinds.of("critique").words.worker == "critic"
    with running_simulator(SimConfig(generators={"critic": 3.0}, generation_tokens=40)) as sim:
        env = cli_env(sqlite_url, OPENAI_BASE_URL=sim.openai_base_url)
        out = tmp_path / "critiques.jsonl"
        said = _critique(env, out, "crit")
        asked = sim.stats()["requests"]
        assert asked == LIMIT * len(MODELS)
        assert f"{LIMIT * len(MODELS)} critiques by 1 critic -> {out}" in said
        written = read_jsonl(out.read_text())
        exported = read_jsonl(flask_eval("export", "crit", env=env).stdout)
        # the same run again: planned alike, every critique from the answer cache
        _critique(env, tmp_path / "again.jsonl", "crit2")
        assert sim.stats()["requests"] == asked
        refused = flask_eval("report", "crit", env=env, check=False)
        listed = flask_eval("--help", env=env).stdout
    assert written == exported and len(written) == LIMIT * len(MODELS)
    subjects = {(r["model"], r["instance_id"]) for r in written}
    assert len(subjects) == len(written) and {m for m, _ in subjects} == set(MODELS)
    for record in written:
        assert record["critic"] == "critic" and record["status"] == "done"
        assert record["critique"] and record["critique"] == record["raw"].strip()
        assert "judge" not in record and "score" not in record
    assert refused.returncode == 2
    assert (
        refused.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "run crit is a critique run: it has no scores to report; `critique --run` writes "
            "what it produced"
        )
    )
    assert re.search(r"^\s+critique\s+A critic writes", listed, re.M)
    store = Store(sqlite_url)
    try:
        with serving(store) as get:
            status, page = get("/runs/crit")
            assert status == 200 and "A critique run has no scores to report" in page
            status, listed_rows = get("/runs/crit/judgments")
            assert status == 200 and "<th>Critic</th>" in listed_rows
            assert "What the critic wrote / failure" in listed_rows
            assert "(simulated answer" in listed_rows  # each row's critique, in short
            status, page = get("/runs/crit/judgments/1")
    finally:
        store.close()
    assert status == 200
    assert "<th>Critic</th><td>critic</td>" in page
    shown = re.search(r'<pre class="text" id="value">(.*?)</pre>', page, re.S)
    assert shown and shown.group(1).strip() and "What the critic wrote" in page
    assert "The prompt the critic was sent" in page
