"""Helpers for tests that run the CLI (in this process, or as a real one), real Celery
workers and the ledger; waiting with a deadline."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, TypeVar

from flask_eval.workers.processes import WorkerGroup

REPO = Path(__file__).resolve().parent.parent

T = TypeVar("T")

#: how much of the last observed value a timeout message shows
SHOWN_CHARS = 500


def wait_until(
    observe: Callable[[], T],
    until: Callable[[T], object] = bool,
    *,
    timeout: float,
    what: str = "the condition",
    interval: float = 0.2,
) -> T:
    """Call ``observe`` until ``until(value)`` holds; return that value.

    A test waits for the state it needs, not a fixed time: a fixed sleep is too short on
    a loaded machine (and the assertion after it fails) and too long on an idle one.
    ``observe`` runs at least once, even with ``timeout=0``. Past the deadline this
    raises an AssertionError naming ``what`` it waited for and the last observed value
    (clipped), so a failure says how far things got.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = observe()
        if until(value):
            return value
        if time.monotonic() >= deadline:
            shown = repr(value)
            if len(shown) > SHOWN_CHARS:
                shown = shown[:SHOWN_CHARS] + "..."
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what}; last observed: {shown}"
            )
        time.sleep(interval)


#: queues the tests asked for, so that a broker fixture can delete them afterwards
QUEUES: list[str] = []


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
        QUEUES.append(env["FLASK_EVAL_QUEUE"])
    env.setdefault("OPENAI_API_KEY", "sk-test-key")
    env.setdefault("ANTHROPIC_API_KEY", "sk-test-key")
    env.update(extra)
    return env


def flask_eval(
    *args: str, env: Mapping[str, str], timeout: float = 300, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """`flask-eval ARGS` run in this process (click's CliRunner), as a fresh process would
    run it: ``os.environ`` is exactly ``env``, the working directory is the repository,
    logging starts unconfigured, and all of it (with the signal handlers) is put back
    afterwards. An exception that escapes the CLI shows as a traceback on stderr with exit
    code 1, as it would in a process. Without a broker, `run` looks whether it is done
    every 0.05 s instead of 0.5 s (each test waited out the difference after each run).
    ``timeout`` applies to :func:`flask_eval_process` only (in-process, pytest-timeout
    bounds the test).

    Use :func:`flask_eval_process` where the test needs a real process: signals, start-up
    imports, stdin or a terminal, or a command running while the test does other things.
    """
    from click.testing import CliRunner

    from flask_eval.cli import main

    if not _CLI_LOCK.acquire(blocking=False):
        raise RuntimeError(
            "flask_eval() runs in this process, one command at a time: use "
            "flask_eval_process() for a command that runs while another does"
        )
    try:
        polling = _polling_often() if not env.get("FLASK_EVAL_BROKER_URL") else nullcontext()
        with _as_a_fresh_process(env), polling:
            result = CliRunner().invoke(main, list(args), prog_name="flask-eval")
    finally:
        _CLI_LOCK.release()
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    proc = subprocess.CompletedProcess(
        ["flask-eval", *args], result.exit_code, result.stdout, stderr
    )
    return _checked(proc, args, check)


def flask_eval_process(
    *args: str, env: Mapping[str, str], timeout: float = 300, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """`flask-eval ARGS` as a real process (a fresh interpreter: ~2-4 s). A test calling
    this is in the integration tier (tests/conftest.py)."""
    proc = subprocess.run(
        [sys.executable, "-m", "flask_eval", *args],
        env=dict(env),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return _checked(proc, args, check)


def _checked(
    proc: subprocess.CompletedProcess[str], args: tuple[str, ...], check: bool
) -> subprocess.CompletedProcess[str]:
    if check and proc.returncode != 0:
        raise AssertionError(
            f"flask-eval {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
        )
    return proc


#: one in-process command at a time: os.environ, sys.stdout and the cwd are the process's
_CLI_LOCK = threading.Lock()


#: how often `run` without a broker looks whether its judgments are done (the CLI: 0.5 s)
POLL_SECONDS = 0.05


@contextmanager
def _polling_often() -> Iterator[None]:
    from unittest import mock

    from flask_eval.app import wait_loop

    with mock.patch.object(wait_loop, "POLL_SECONDS", POLL_SECONDS):
        yield


@contextmanager
def _as_a_fresh_process(env: Mapping[str, str]) -> Iterator[None]:
    """The process-wide state a command reads or changes, as a new process has it, and put
    back afterwards: the environment (settings and secrets to redact are read from it),
    the working directory, the root logger (the CLI's ``basicConfig`` must write to the
    captured stderr, and its redaction filters must not pile up) and signal handlers."""
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    root = logging.getLogger()
    saved_logging = (root.level, root.handlers[:], root.filters[:])
    saved_signals = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    os.environ.clear()
    os.environ.update(env)
    os.chdir(REPO)
    root.handlers.clear()
    root.filters.clear()
    root.setLevel(logging.WARNING)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        root.level, root.handlers[:], root.filters[:] = saved_logging
        for sig, handler in saved_signals.items():
            signal.signal(sig, handler)


@contextmanager
def workers(
    env: Mapping[str, str], processes: int = 1, in_flight: int = 64, log: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """A real `flask-eval worker` process group (workers.processes.WorkerGroup), yielded
    once each of its ``processes`` has announced itself in the database (a test does not
    race the workers' start-up, which takes seconds on a loaded machine); stopped (TERM,
    then KILL) on exit."""
    with WorkerGroup(env, processes, in_flight, "WARNING", log, cwd=REPO) as group:
        wait_until(
            lambda: group.proc.poll() is not None or len(live_workers(env)) >= processes,
            timeout=120,
            what=f"{processes} worker process(es) to start",
        )
        assert group.proc.poll() is None, f"the workers exited with {group.proc.returncode}"
        yield group.proc


def live_workers(env: Mapping[str, str]) -> list[str]:
    """The workers that announced themselves on ``env``'s queue and database lately."""
    from flask_eval.storage.store import Store

    store = Store(env["FLASK_EVAL_DATABASE_URL"])
    try:
        return store.live_workers(env.get("FLASK_EVAL_QUEUE", "flask_eval"), within=30)
    finally:
        store.close()


def kill_group(proc: subprocess.Popen[Any], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def status(env: Mapping[str, str], run: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(flask_eval("status", run, "--json", env=env).stdout)
    return result


def wait_done(env: Mapping[str, str], run: str, timeout: float = 240) -> dict[str, Any]:
    """Until no judgment of ``run`` is pending; its final status."""
    return wait_until(
        lambda: status(env, run),
        lambda st: st["pending"] == 0,
        timeout=timeout,
        what=f"run {run} to finish",
        interval=1,
    )


def running_rows(database_url: str, run: str) -> int:
    """Judgments of ``run`` that a worker has claimed and not finished (status running)."""
    # imported here: the limiter tests' spawned processes import this module, lightly
    from sqlalchemy import func, select

    from flask_eval.core.errors import Status
    from flask_eval.storage.models import JUDGMENT
    from flask_eval.storage.store import Store

    store = Store(database_url)
    try:
        info = store.find_run(run)
        assert info is not None, f"no run {run}"
        stmt = select(func.count()).where(
            JUDGMENT.c.run_id == info.id, JUDGMENT.c.status == Status.RUNNING.value
        )
        with store.engine.connect() as conn:
            return int(conn.execute(stmt).scalar_one())
    finally:
        store.close()
