"""Workers trust no message beyond what the ledger confirms, and keep paid answers through
database outages. Real Redis, real worker processes, PostgreSQL and SQLite, the simulator.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from flask_eval.core import settings as settings_mod
from flask_eval.producer.synthetic import write_inputs
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage import queries
from flask_eval.storage.store import Store
from flask_eval.workers.celery_app import CeleryTransport
from tests.helpers import (
    cli_env,
    flask_eval,
    kill_group,
    live_workers,
    status,
    wait_done,
    wait_until,
    workers,
)
from tests.storage.test_store import open_ids
from tests.workers.test_reliability import run_cmd

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def send(env: dict[str, str], run_id: int, calls: list[list[int]]) -> None:
    """A well-formed JSON message of our task, as anyone who can write to the broker can."""
    settings = settings_mod.load()
    dispatcher = CeleryTransport(
        settings.__class__(
            **{
                **vars(settings),
                "broker_url": env["FLASK_EVAL_BROKER_URL"],
                "queue": env["FLASK_EVAL_QUEUE"],
            }
        )
    )
    dispatcher.submit(run_id, [calls])


def test_a_message_that_groups_rows_wrongly_is_refused_by_a_real_worker(
    sqlite_url: str, redis_url: str, tmp_path: Path
) -> None:
    """(The same refusal on PostgreSQL's claims: tests/workers/test_judging.py.)"""
    database_url = sqlite_url
    instances, responses = write_inputs(tmp_path / "in", 6, models=("m",))
    env = cli_env(database_url, redis_url)
    with running_simulator(SimConfig(seed=2)) as sim:
        args = run_cmd(instances, responses, sim, "trust")
        flask_eval(*args, "--no-wait", env=env)  # the real messages wait in the queue...
        store = Store(database_url)
        run = store.find_run("trust")
        assert run is not None
        import redis

        redis.Redis.from_url(redis_url).delete(env["FLASK_EVAL_QUEUE"])  # ... and go
        calls = open_ids(store, run.id)
        mixed = [calls[0][0], calls[1][0], calls[2][0]]  # three instances, one call
        flask_eval(*run_cmd(instances, responses, sim, "other"), "--no-wait", env=env)
        redis.Redis.from_url(redis_url).delete(env["FLASK_EVAL_QUEUE"])
        other_run = store.find_run("other")
        assert other_run is not None
        log = tmp_path / "w.log"
        with workers(env, log=log):
            send(env, run.id, [mixed])
            send(env, other_run.id, calls[3:5])  # another run's rows under this run's id
            wait_until(
                lambda: log.read_text(),
                lambda t: "does not match the ledger" in t,
                timeout=60,
                what="the worker refusing the message",
            )
            send(env, run.id, [calls[5]])  # a sound message after them: judged (the marker)
            wait_until(
                lambda: status(env, "trust")["done"],
                lambda n: n == 3,
                timeout=60,
                what="the sound message judged",
            )
        paid = sim.stats()["requests"]
    assert paid == 1  # the sound message only
    assert queries.status(store, run.id, "trust").pending == 6 * 3 * 2 - 3
    assert queries.status(store, other_run.id, "other").pending == 6 * 3 * 2


def test_workers_on_another_database_are_named_not_waited_for(
    sqlite_url: str, redis_url: str, tmp_path: Path
) -> None:
    instances, responses = write_inputs(tmp_path / "in", 5, models=("m",))
    producer_env = cli_env(sqlite_url, redis_url, FLASK_EVAL_STALL_SECONDS="3")
    worker_env = {**producer_env, "FLASK_EVAL_DATABASE_URL": f"sqlite:///{tmp_path / 'other.db'}"}
    with running_simulator(SimConfig()) as sim, workers(worker_env, log=tmp_path / "w.log"):
        started = time.monotonic()
        proc = flask_eval(
            *run_cmd(instances, responses, sim, "lost"), env=producer_env, check=False, timeout=120
        )
        took = time.monotonic() - started
    assert proc.returncode == 1
    assert "none uses this database" in proc.stderr and "worker(s) take queue" in proc.stderr
    assert took < 90
    assert "run 1 is not in this worker's database" in (tmp_path / "w.log").read_text()


def test_no_worker_is_said_only_when_none_is_alive(
    sqlite_url: str, redis_url: str, tmp_path: Path
) -> None:
    import subprocess
    import sys
    import threading

    instances, responses = write_inputs(tmp_path / "in", 4, models=("m",))
    env = cli_env(sqlite_url, redis_url, FLASK_EVAL_STALL_SECONDS="2")
    hint = "no worker alive"
    # a worker alive but slow (8 calls of 3 s, 2 at a time): no progress for 2 s, no hint
    with running_simulator(SimConfig(latency_ms=3000)) as sim:
        with workers(env, in_flight=2, log=tmp_path / "w.log"):
            proc = flask_eval(
                *run_cmd(instances, responses, sim, "slow"), env=env, check=False, timeout=300
            )
        assert proc.returncode == 0 and hint not in proc.stderr
    # a worker that stopped cleanly withdrew its announcement: no 30 s wait to say so
    assert live_workers(env) == []
    # no worker at all: the hint, once; then a worker finishes the run
    with running_simulator(SimConfig()) as sim:
        args = run_cmd(instances, responses, sim, "alone")
        producer = subprocess.Popen(
            [sys.executable, "-m", "flask_eval", *args], env=env, stderr=subprocess.PIPE, text=True
        )
        assert producer.stderr is not None
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(producer.stderr or ()))
        reader.start()
        wait_until(
            lambda: "".join(lines), lambda text: hint in text, timeout=60, what="the no-worker hint"
        )
        with workers(env, log=tmp_path / "w2.log"):
            assert producer.wait(timeout=240) == 0
        reader.join(timeout=10)
    assert "".join(lines).count(hint) == 1


def test_paid_answers_survive_an_outage_longer_than_the_retry_window_and_a_kill(
    postgres_url: str, redis_url: str, tmp_path: Path
) -> None:
    """PostgreSQL away for longer than FLASK_EVAL_DB_RETRY_SECONDS while calls are in
    flight; the worker is killed -9 during the outage and another one starts after it: every
    answer the simulator billed is in the ledger, none recorded as our bug."""
    from sqlalchemy.engine import make_url

    from tests.proxy import CuttableProxy

    url = make_url(postgres_url)
    proxy = CuttableProxy((url.host or "127.0.0.1", url.port or 5432))
    proxied = url.set(port=proxy.port).render_as_string(hide_password=False)
    instances, responses = write_inputs(tmp_path / "in", 40, models=("m",))
    spool = tmp_path / "spool"
    env = cli_env(
        proxied,
        redis_url,
        FLASK_EVAL_DB_RETRY_SECONDS="2",
        FLASK_EVAL_LEASE_SECONDS="6",
        FLASK_EVAL_VISIBILITY_TIMEOUT="20",
        FLASK_EVAL_SPOOL_DIR=str(spool),
    )
    try:
        with running_simulator(SimConfig(latency_ms=1500, seed=4)) as sim:
            flask_eval(*run_cmd(instances, responses, sim, "outage"), "--no-wait", env=env)
            with workers(env, in_flight=8, log=tmp_path / "w1.log") as proc:
                wait_until(
                    lambda: sim.stats()["in_flight"],
                    lambda n: n >= 4,
                    timeout=60,
                    what="calls in flight",
                )
                proxy.cut()  # answers arrive while the database is away

                def spooled() -> tuple[int, int, int]:
                    """(calls in flight, answers billed, answers on disk)"""
                    st = sim.stats()
                    lines = [ln for f in spool.glob("*.jsonl") for ln in f.read_text().splitlines()]
                    return st["in_flight"], st["served"], sum('"call"' in ln[:10] for ln in lines)

                # nothing in flight, and every billed answer held only by the worker's
                # memory and its spool: now kill it
                wait_until(
                    spooled,
                    lambda t: t[0] == 0 and t[1] > 0 and t[2] == t[1],
                    timeout=120,
                    what="every billed answer spilled",
                )
                kill_group(proc, signal.SIGKILL)
                proc.wait()
            proxy.restore()
            with workers(env, in_flight=8, log=tmp_path / "w2.log"):
                st = wait_done(env, "outage", timeout=240)
            billed = sim.stats()["served"]
    finally:
        proxy.close()
    assert st["done"] == st["total"] == 40 * 3 * 2
    direct = cli_env(postgres_url, redis_url)
    counts = json.loads(flask_eval("status", "outage", "--json", env=direct).stdout)
    assert "internal" not in counts["failed_by_reason"]
    assert counts["calls"] == billed  # every billed answer kept, the spilled ones too
    assert "database unavailable" in (tmp_path / "w1.log").read_text()
    assert not list(spool.glob("*.jsonl"))  # replayed and removed


def test_per_request_lines_only_at_debug(sqlite_url: str, redis_url: str, tmp_path: Path) -> None:
    instances, responses = write_inputs(tmp_path / "in", 30, models=("m",))
    env = cli_env(sqlite_url, redis_url)
    log = tmp_path / "w.log"
    with running_simulator(SimConfig()) as sim:
        import subprocess

        from flask_eval.workers.processes import command

        with open(log, "wb") as out:
            proc = subprocess.Popen(
                command(1, 16, "INFO"),
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                flask_eval(*run_cmd(instances, responses, sim, "quiet"), env=env)
            finally:
                kill_group(proc, signal.SIGTERM)
                proc.wait(timeout=30)
    text = log.read_text()
    assert "HTTP Request" not in text and "succeeded in" not in text
    assert len(text) < 20_000  # 60 calls: start-up lines only


def test_messages_of_a_deleted_run_are_dropped_unpaid(
    sqlite_url: str, redis_url: str, tmp_path: Path
) -> None:
    import redis

    from flask_eval.workers.celery_app import queue_idle

    instances, responses = write_inputs(tmp_path / "in", 10, models=("m",))
    env = cli_env(sqlite_url, redis_url)
    client = redis.Redis.from_url(redis_url)
    with running_simulator(SimConfig()) as sim:
        flask_eval(*run_cmd(instances, responses, sim, "gone"), "--no-wait", env=env)
        assert client.llen(env["FLASK_EVAL_QUEUE"]) > 0
        flask_eval("runs", "delete", "gone", "--yes", env=env)
        with workers(env, log=tmp_path / "w.log"):
            wait_until(
                lambda: queue_idle(client, env["FLASK_EVAL_QUEUE"]),
                lambda idle: idle,
                timeout=60,
                what="the deleted run's messages consumed",
            )
        assert sim.stats()["requests"] == 0
    assert "gone" not in flask_eval("runs", env=env).stdout
