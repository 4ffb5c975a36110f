"""Helpers for tests that run the real CLI and real Celery workers as processes."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
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
    """A real `flask-eval worker` process group (workers.processes.WorkerGroup); stopped
    (TERM, then KILL) on exit."""
    with WorkerGroup(env, processes, in_flight, "WARNING", log, cwd=REPO) as group:
        yield group.proc


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
