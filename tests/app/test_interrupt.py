"""Ctrl-C on an in-process run keeps every answer paid for: nothing more is sent, the
calls on the wire are answered and stored, the rows not sent are given back, and running
the command again finishes the run with every billed answer in the ledger once."""

from __future__ import annotations

import _thread
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from flask_eval.cli import main
from flask_eval.producer.synthetic import write_inputs
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator, spawn_simulator
from flask_eval.storage import queries
from flask_eval.storage.store import Store
from tests.helpers import REPO, cli_env, flask_eval, wait_until

#: the simulator: a few hundred ms per answer, so that calls are on the wire at Ctrl-C
SLOW = SimConfig(latency_ms=300, latency_dist="lognormal", seed=5)


def run_args(tmp_path: Path, base_url: str) -> list[str]:
    instances, responses = write_inputs(tmp_path / "in", 30)
    args = [
        "run",
        "--instances",
        str(instances),
        "--judge",
        f"openai/sim@{base_url}",
        "--run",
        "cut",
        "--quiet",
        "--in-flight",
        "16",
    ]
    for r in responses:
        args += ["--responses", r]
    return args


def ledger(database_url: str) -> tuple[Any, int]:
    """The run's counts, and its rows still claimed (running)."""
    store = Store(database_url)
    try:
        info = store.find_run("cut")
        assert info is not None
        counts = queries.status(store, info.id, "cut")
        return counts, _running(store, info.id)
    finally:
        store.close()


def _running(store: Store, run_id: int) -> int:
    from sqlalchemy import func, select

    from flask_eval.storage.models import JUDGMENT

    stmt = select(func.count()).where(JUDGMENT.c.run_id == run_id, JUDGMENT.c.status == "running")
    with store.engine.connect() as conn:
        return int(conn.execute(stmt).scalar_one())


@pytest.fixture(autouse=True)
def sigint_handled() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt here and in the processes started here, however the
    suite was launched: a shell without job control starts a background command with
    SIGINT ignored, which its children inherit (and Python then installs no handler), so
    neither a simulated nor a real Ctrl-C would reach the run (two CI runs launched so
    finished every judgment instead of stopping)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def busy(sim: Any) -> bool:
    """Answers stored and calls on the wire: a moment to press Ctrl-C."""
    st = sim.stats()
    return bool(st["served"] >= 15 and st["in_flight"] >= 4)


@pytest.mark.e2e
def test_ctrl_c_keeps_every_answer_paid_for_and_a_rerun_finishes(tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'x.db'}"
    env = {
        "FLASK_EVAL_DATABASE_URL": database_url,
        "FLASK_EVAL_BROKER_URL": None,
        "OPENAI_API_KEY": "sk-test",
    }
    with running_simulator(SLOW) as sim:
        args = run_args(tmp_path, sim.openai_base_url)

        def press_ctrl_c() -> None:
            wait_until(lambda: busy(sim), timeout=120, what="calls on the wire")
            _thread.interrupt_main()  # SIGINT's handler, in the main thread

        threading.Thread(target=press_ctrl_c, daemon=True).start()
        first = CliRunner().invoke(main, args, env=env)
        assert first.exit_code == 1, first.output
        assert not [t for t in threading.enumerate() if t.name == "flask-eval-inprocess"]
        counts, running = ledger(database_url)
        served = sim.stats()["served"]
        assert counts.calls == served  # every billed answer is in the ledger
        assert running == 0  # claimed but not sent: given back
        assert 0 < counts.done < counts.total
        assert "interrupted" in first.stderr and "flask-eval resume cut" in first.stderr

        again = CliRunner().invoke(main, args, env=env)
        assert again.exit_code == 0, again.output
        counts, _ = ledger(database_url)
        assert counts.done == counts.total
        assert counts.calls == sim.stats()["served"] == counts.total // 3  # each call once


@pytest.mark.slow
def test_a_real_sigint_keeps_every_answer_paid_for(tmp_path: Path) -> None:
    """The same promise end to end: `flask-eval run` without a broker, a real SIGINT."""
    database_url = f"sqlite:///{tmp_path / 'x.db'}"
    env = cli_env(database_url)
    with spawn_simulator(SLOW) as sim:
        args = run_args(tmp_path, sim.openai_base_url)
        proc = subprocess.Popen(
            [sys.executable, "-m", "flask_eval", *args],
            env=env,
            cwd=REPO,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_until(lambda: busy(sim), timeout=120, what="calls on the wire")
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        counts = json.loads(flask_eval("status", "cut", "--json", env=env).stdout)
        assert counts["calls"] == sim.stats()["served"] and counts["pending"] > 0
        assert proc.returncode == 1 and "interrupted" in stderr
        flask_eval(*args, env=env)
        counts = json.loads(flask_eval("status", "cut", "--json", env=env).stdout)
        assert counts["done"] == counts["total"]
        assert counts["calls"] == sim.stats()["served"] == counts["total"] // 3


@pytest.mark.slow
def test_ctrl_c_of_a_run_piped_into_tee_keeps_every_answer_paid_for(tmp_path: Path) -> None:
    """`flask-eval run ... 2>&1 | tee log` and one Ctrl-C: the terminal sends SIGINT to the
    whole pipeline, so tee ends too and every later line flask-eval writes meets a closed
    pipe. The drain goes on regardless: every answer served is stored, and the same
    command again finishes the run paying for no call twice."""
    database_url = f"sqlite:///{tmp_path / 'x.db'}"
    env = cli_env(database_url)
    with spawn_simulator(SLOW) as sim:
        args = [a for a in run_args(tmp_path, sim.openai_base_url) if a != "--quiet"]

        def piped(interrupt: bool) -> int:
            """The command piped into tee, as one process group (a shell's job)."""
            command = subprocess.Popen(
                [sys.executable, "-m", "flask_eval", *args],
                env=env,
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                process_group=0,
            )
            assert command.stdout is not None
            log = str(tmp_path / "log")
            tee = subprocess.Popen(
                ["tee", log],
                stdin=command.stdout,
                stdout=subprocess.DEVNULL,
                process_group=command.pid,
            )
            command.stdout.close()  # tee alone reads the pipe
            try:
                if interrupt:
                    wait_until(lambda: busy(sim), timeout=120, what="calls on the wire")
                    # Ctrl-C signals the whole job at once; tee ending first (the order
                    # that lost answers) is made certain here
                    tee.send_signal(signal.SIGINT)
                    assert tee.wait(timeout=60) != 0
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(command.pid, signal.SIGINT)
                return command.wait(timeout=240)
            finally:
                for proc in (command, tee):
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait()

        assert piped(interrupt=True) == 1
        counts = json.loads(flask_eval("status", "cut", "--json", env=env).stdout)
        assert counts["calls"] == sim.stats()["served"]  # every answer served is stored
        assert 0 < counts["done"] < counts["total"]
        assert piped(interrupt=False) == 0
        counts = json.loads(flask_eval("status", "cut", "--json", env=env).stdout)
        assert counts["done"] == counts["total"]
        assert counts["calls"] == sim.stats()["served"] == counts["total"] // 3  # none twice
