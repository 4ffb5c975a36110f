"""Live operations with real Redis and real Celery worker processes: a worker's /metrics
scraped during a run and matched with the ledger, `status --watch --json` during a
2-worker run, a metrics port in use."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.workers.processes import WorkerGroup
from tests.conftest import EXAMPLES
from tests.helpers import REPO, cli_env, flask_eval, flask_eval_process, wait_until
from tests.workers.test_events import sample


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_run(env: Mapping[str, str], sim: Any, name: str) -> None:
    flask_eval(
        "run",
        "--instances",
        str(EXAMPLES / "instances.jsonl"),
        "--responses",
        f"model_a={EXAMPLES / 'model_a.jsonl'}",
        "--responses",
        f"model_b={EXAMPLES / 'model_b.jsonl'}",
        "--judge",
        f"openai/sim-gpt@{sim.openai_base_url}",
        "--judge",
        f"anthropic/sim-claude@{sim.anthropic_base_url}",
        "--run",
        name,
        "--no-wait",
        "--quiet",
        env=env,
    )


def scrape(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            return str(r.read().decode())
    except OSError:
        return ""


def test_a_workers_metrics_are_scraped_during_a_run_and_match_the_ledger(
    sqlite_url: str, redis_url: str, tmp_path: Path
) -> None:
    port = free_port()
    env = cli_env(sqlite_url, redis_url)
    with running_simulator(SimConfig(latency_ms=30, garbage_rate=0.1, seed=3)) as sim:
        start_run(env, sim, "scraped")
        cmd = [
            sys.executable,
            "-m",
            "flask_eval",
            "worker",
            "--in-flight",
            "16",
            "--loglevel",
            "WARNING",
            "--metrics-port",
            str(port),
        ]
        with (tmp_path / "w.log").open("wb") as log:
            proc = subprocess.Popen(
                cmd, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
            try:
                during = wait_until(
                    lambda: scrape(port),
                    lambda text: sample(text, "flask_eval_judgments_total") > 0,
                    timeout=120,
                    what="judgments counted on /metrics",  # with start-up
                )
                st = wait_until(
                    lambda: json.loads(flask_eval("status", "scraped", "--json", env=env).stdout),
                    lambda s: s["pending"] == 0,
                    timeout=120,
                    what="the run to finish",
                )
                final = wait_until(
                    lambda: scrape(port),
                    lambda t: sample(t, "flask_eval_judgments_total") == st["total"],
                    timeout=60,
                    what="the last judgments counted",
                )
            finally:
                proc.terminate()
                proc.wait(timeout=30)
    assert 0 < sample(during, "flask_eval_judgments_total") <= st["total"]
    assert sample(final, "flask_eval_judgments_total", status="done") == st["done"]
    for reason, n in st["failed_by_reason"].items():
        assert sample(final, "flask_eval_judgments_total", status="failed", reason=reason) == n
    assert sample(final, "flask_eval_calls_total", outcome="answered") == st["calls"]
    assert sample(final, "flask_eval_in_flight_calls") == 0
    assert sample(final, "flask_eval_judge_latency_seconds_count") == st["calls"]


def test_status_watch_shows_two_live_workers_and_rates_until_the_run_is_done(
    sqlite_url: str, redis_url: str, tmp_path: Path
) -> None:
    env = cli_env(sqlite_url, redis_url)
    lines: list[dict[str, Any]] = []
    # 104 calls over 2 x 4 lanes at 600 ms: ~8 s, longer than a heartbeat (5 s), so a
    # heartbeat falls while calls are in flight
    with running_simulator(SimConfig(latency_ms=600, seed=4)) as sim:
        start_run(env, sim, "watched")
        watch = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "flask_eval",
                "status",
                "watched",
                "--watch",
                "--json",
                "--interval",
                "0.5",
            ],
            env=env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        reader = threading.Thread(
            target=lambda: lines.extend(json.loads(line) for line in watch.stdout or ()),
            daemon=True,
        )
        reader.start()
        with WorkerGroup(env, 2, 4, "WARNING", tmp_path / "w.log", cwd=REPO):
            code = watch.wait(timeout=300)  # a deadline: the workers start slowly when loaded
        reader.join(timeout=5)
    assert code == 0, watch.stderr.read() if watch.stderr else ""
    assert any(len(x["workers"]) == 2 for x in lines), lines[-1:]
    assert any(j["judgments_per_s"] > 0 for x in lines for j in x["runs"][0]["judges"])
    assert any(w["in_flight"] > 0 for x in lines for w in x["workers"])
    last = lines[-1]
    assert (
        last["finished"]
        and last["runs"][0]["done"] + last["runs"][0]["failed"] == (last["runs"][0]["total"])
    )
    assert last["runs"][0]["done"] == last["runs"][0]["total"]


def test_a_metrics_port_in_use_is_one_line_and_exit_2(sqlite_url: str, redis_url: str) -> None:
    env = cli_env(sqlite_url, redis_url)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = flask_eval_process("worker", "--metrics-port", str(port), env=env, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: --metrics-port: cannot listen on 127.0.0.1:{port}: in use"
    ]
