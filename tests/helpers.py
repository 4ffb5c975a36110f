"""Helpers for tests that run the real CLI and real Celery workers as processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from workers.worker import command as worker_command

REPO = Path(__file__).resolve().parent.parent


def cli_env(database_url: str, broker_url: str | None = None, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FLASK_EVAL_", "OPENAI_", "ANTHROPIC_"))
    }
    env["FLASK_EVAL_DATABASE_URL"] = database_url
    if broker_url:
        env["FLASK_EVAL_BROKER_URL"] = broker_url
        env["FLASK_EVAL_QUEUE"] = extra.pop("FLASK_EVAL_QUEUE", f"test-{uuid.uuid4().hex[:8]}")
    env.setdefault("OPENAI_API_KEY", "sk-test-key")
    env.setdefault("ANTHROPIC_API_KEY", "sk-test-key")
    env.update(extra)
    return env


def flask_eval(
    *args: str, env: Mapping[str, str], timeout: float = 300, check: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "flask_eval", *args],
        env=dict(env),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"flask-eval {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
        )
    return proc


@contextmanager
def workers(
    env: Mapping[str, str], processes: int = 1, in_flight: int = 64, log: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """A real `flask-eval worker` process group; stopped (TERM, then KILL) on exit."""
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen(
        worker_command(processes, in_flight, "WARNING"),
        env=dict(env),
        cwd=REPO,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        kill_group(proc, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            kill_group(proc, signal.SIGKILL)
            proc.wait()
        if log:
            out.close()  # type: ignore[union-attr]


def kill_group(proc: subprocess.Popen[Any], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def status(env: Mapping[str, str], run: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(flask_eval("status", run, "--json", env=env).stdout)
    return result


def wait_done(env: Mapping[str, str], run: str, timeout: float = 240) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        st = status(env, run)
        if st["pending"] == 0:
            return st
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run} not finished after {timeout}s: {st}")
        time.sleep(1)
