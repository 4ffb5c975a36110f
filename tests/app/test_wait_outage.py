"""A `run` waiting for workers rides out a database outage: it says the database is away,
keeps waiting, and ends as the run ends once it is back. What the waiting command does is
the same on either broker (Redis here); the workers' side of an outage, which the broker
does change (how a message goes back to its queue), is tested on both in
tests/workers/test_reliability.py."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from flask_eval.producer.synthetic import write_inputs
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from tests.helpers import REPO, cli_env, flask_eval, status, wait_until, workers
from tests.proxy import CuttableProxy

#: seconds PostgreSQL is away (the issue's outage: 20 s)
OUTAGE_SECONDS = 20


def done(env: dict[str, str]) -> int:
    """The run's judgments done (0 until the run is written)."""
    found = flask_eval("status", "outage", "--json", env=env, check=False)
    return int(json.loads(found.stdout)["done"]) if found.returncode == 0 else 0


def test_a_waiting_run_rides_out_a_database_outage(
    postgres_url: str, redis_url: str, tmp_path: Path
) -> None:
    from sqlalchemy.engine import make_url

    url = make_url(postgres_url)
    proxy = CuttableProxy((url.host or "127.0.0.1", url.port or 5432))
    proxied = url.set(port=proxy.port).render_as_string(hide_password=False)
    direct = cli_env(postgres_url, redis_url)
    # the waiting command's own retries give up long before the outage ends: the wait
    # must ride it out all the same (the workers keep their default retry window)
    env = {**direct, "FLASK_EVAL_DATABASE_URL": proxied}
    waiting_env = {**env, "FLASK_EVAL_DB_RETRY_SECONDS": "2"}
    instances, responses = write_inputs(tmp_path / "in", 60)
    named = [a for r in responses for a in ("--responses", r)]
    try:
        with running_simulator(SimConfig(latency_ms=100, seed=4)) as sim:
            args = [
                "run",
                "--instances",
                str(instances),
                *named,
                "--run",
                "outage",
                "--quiet",
                "--judge",
                f"openai/sim@{sim.openai_base_url}",
            ]
            with workers(env, processes=1, in_flight=4, log=tmp_path / "w.log"):
                waiting = subprocess.Popen(
                    [sys.executable, "-m", "flask_eval", *args],
                    env=waiting_env,
                    cwd=REPO,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                try:
                    wait_until(
                        lambda: waiting.poll() is not None or done(direct) > 0,
                        timeout=120,
                        what="the first judgments",
                    )
                    proxy.cut()
                    cut_at = time.monotonic()
                    wait_until(
                        lambda: (
                            waiting.poll() is not None
                            or time.monotonic() - cut_at >= OUTAGE_SECONDS
                        ),
                        timeout=OUTAGE_SECONDS + 60,
                        what="the outage",
                    )
                    proxy.restore()
                    _, err = waiting.communicate(timeout=300)
                finally:
                    if waiting.poll() is None:
                        waiting.kill()
                        waiting.wait()
    finally:
        proxy.close()
    assert waiting.returncode == 0, err[-3000:]
    assert "Traceback" not in err
    assert "database" in err  # it said why it waited
    st = status(direct, "outage")
    assert st["done"] == st["total"]
