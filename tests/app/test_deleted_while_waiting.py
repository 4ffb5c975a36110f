"""`runs delete RUN --yes` while `run` waits for RUN: the waiting command says the run was
deleted and exits 1; it never shows the run as complete."""

from __future__ import annotations

import threading
from pathlib import Path

from flask_eval.producer.synthetic import write_inputs
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage.store import Store
from tests.helpers import cli_env, flask_eval, wait_until


def test_a_run_deleted_while_it_is_waited_for_is_said_deleted_exit_1(tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'x.db'}"
    env = cli_env(database_url)
    instances, responses = write_inputs(tmp_path / "in", 40)
    named = [a for r in responses for a in ("--responses", r)]
    with running_simulator(SimConfig(latency_ms=100, seed=3)) as sim:
        args = [
            "run",
            "--instances",
            str(instances),
            *named,
            "--run",
            "gone",
            "--judge",
            f"openai/sim@{sim.openai_base_url}",
            "--in-flight",
            "4",
        ]

        def delete_mid_run() -> None:
            wait_until(lambda: sim.stats()["served"] >= 8, timeout=120, what="answers served")
            store = Store(database_url)
            try:
                info = store.find_run("gone")
                assert info is not None
                store.delete_run(info.id)  # what `runs delete gone --yes` does
            finally:
                store.close()

        deleter = threading.Thread(target=delete_mid_run, daemon=True)
        deleter.start()
        result = flask_eval(*args, env=env, check=False)
        deleter.join(timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "run gone was deleted" in result.stderr
    assert "Failures: none" not in result.stdout
    assert "Traceback" not in result.stderr
