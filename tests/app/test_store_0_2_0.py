"""A store flask-eval 0.2.0 wrote (`eval` of 8 instances, 2 simulated models, one judge
and annotator: ``stores/eval-0.2.0.sql.gz``, its SQL dump) opens migrated: its generation
and annotation runs lose their stand-in responses, keep their rows and fingerprints, and
`eval` run again finds its three runs done and pays for nothing. A bundle it wrote of a
generation run (``stores/generation-0.2.0.bundle``) imports and exports the records its
export gave (``stores/generation-0.2.0.export.jsonl``), the worker renamed."""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

from sqlalchemy import select

from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage.models import RESPONSE, RUN
from flask_eval.storage.store import Store
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval

STORES = Path(__file__).parent / "stores"
DUMP = STORES / "eval-0.2.0.sql.gz"
#: the runs of that `eval`: their names carry their fingerprints
RUNS = {"e-generate-71cc7b2196", "e-annotate-1021f082b4", "e-judge-e0e1980bf0"}


def bare_instances(out: Path) -> Path:
    """The 8 instances that `eval` was given: the examples' first, id, instruction and
    reference only."""
    with out.open("w") as handle:
        for line in (EXAMPLES / "instances.jsonl").read_text().splitlines()[:8]:
            r = json.loads(line)
            handle.write(json.dumps({k: r[k] for k in ("idx", "instruction", "answer")}) + "\n")
    return out


def test_eval_again_on_a_0_2_0_store_finds_its_runs_done(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(gzip.decompress(DUMP.read_bytes()).decode())
    url = f"sqlite:///{path}"
    instances = bare_instances(tmp_path / "bare.jsonl")
    with running_simulator(SimConfig(seed=5, generators={"m1": 1.5, "m2": 3.0})) as sim:
        args = ["eval", "--instances", str(instances), "--judge", "judge=openai/judge"]
        args += ["--name", "e", "--out", str(tmp_path / "out"), "--quiet"]
        args += ["--model", "m1=openai/m1", "--model", "m2=openai/m2"]
        done = flask_eval(*args, env=cli_env(url, OPENAI_BASE_URL=sim.openai_base_url))
        assert sim.stats()["requests"] == 0
    assert "0 calls dispatched" in done.stdout + done.stderr
    store = Store(url)
    try:
        with store.engine.connect() as conn:
            names = {r[0] for r in conn.execute(select(RUN.c.name))}
            models = {r[0] for r in conn.execute(select(RESPONSE.c.model))}
        assert names == RUNS  # no run more: each found by its name
        assert models == {"m1", "m2"}  # the judging's responses; no stand-in ''
    finally:
        store.close()
    report = (tmp_path / "out" / "report.txt").read_text()
    assert "m1" in report and "m2" in report


def test_a_0_2_0_bundle_of_a_generation_imports_and_exports_the_same_records(
    tmp_path: Path,
) -> None:
    """A bundle flask-eval 0.2.0 wrote (format version 1) of a generation run imports
    without its stand-in, and exports the records 0.2.0's export gave, the model under
    test named `model` (it was `judge`, with `model` empty)."""
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    env = cli_env(url)
    flask_eval("import", str(STORES / "generation-0.2.0.bundle"), env=env)
    exported = flask_eval("export", "gen", env=env).stdout
    before = [json.loads(line) for line in (STORES / "generation-0.2.0.export.jsonl").open()]
    renamed = [
        {("model" if k == "judge" else k): v for k, v in r.items() if k != "model"} for r in before
    ]
    got = [json.loads(line) for line in exported.splitlines()]
    assert [list(r.items()) for r in got] == [list(r.items()) for r in renamed]
    store = Store(url)
    try:
        with store.engine.connect() as conn:
            assert conn.execute(select(RESPONSE.c.model)).all() == []
        run = store.find_run("gen")
        assert run is not None and (run.config.models, run.config.responses) == ((), {})
    finally:
        store.close()
