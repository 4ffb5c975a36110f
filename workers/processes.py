"""The one way to start worker processes, for the command line, the tests and the
benchmarks: `flask-eval worker --processes P --in-flight N` as its own process group,
stopped with SIGTERM (a warm shutdown: calls in flight finish) and, if it lingers, SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO


def command(
    processes: int, in_flight: int, loglevel: str = "INFO", log_format: str = "text"
) -> list[str]:
    """The command line of `flask-eval worker` with this interpreter."""
    return [
        sys.executable,
        "-m",
        "flask_eval",
        "--log-format",
        log_format,
        "worker",
        "--processes",
        str(processes),
        "--in-flight",
        str(in_flight),
        "--loglevel",
        loglevel,
    ]


class WorkerGroup:
    """``processes`` worker processes (one Celery worker each) in one process group.

    ``log``: where their output goes (default: nowhere). ``stop()`` returns the CPU the
    whole group used, in seconds (user, system), for the benchmarks.
    """

    def __init__(
        self,
        env: Mapping[str, str],
        processes: int = 1,
        in_flight: int = 256,
        loglevel: str = "WARNING",
        log: Path | None = None,
        cwd: Path | None = None,
    ) -> None:
        self._out: IO[bytes] | int = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115
        self.proc: subprocess.Popen[bytes] = subprocess.Popen(
            command(processes, in_flight, loglevel),
            env=dict(env),
            cwd=cwd,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.pid = self.proc.pid

    def signal(self, sig: int) -> None:
        """Send ``sig`` to every process of the group."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        """kill -9 the whole group (main process and children), and reap it."""
        self.signal(signal.SIGKILL)
        self.proc.wait()
        self._close()

    def stop(self, timeout: float = 20.0) -> tuple[float, float]:
        """SIGTERM, then SIGKILL after ``timeout`` s; returns the group's (user, system) CPU
        (its main process and every child it reaped), as ``wait4`` reports it."""
        self.signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while True:
            pid, _, usage = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                self.signal(signal.SIGKILL)
                _, _, usage = os.wait4(self.proc.pid, 0)
                break
            time.sleep(0.05)
        self.proc.returncode = 0  # reaped here: Popen must not wait for it again
        self._close()
        return (usage.ru_utime, usage.ru_stime)

    def _close(self) -> None:
        if not isinstance(self._out, int):
            self._out.close()

    def __enter__(self) -> WorkerGroup:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.proc.poll() is None:
            self.stop()
        else:
            self._close()
