"""`flask-eval status --watch` on a terminal, as people watch it: a real process on a
pseudo-terminal, its bytes read as they come, frames counted while a run is judged by
two real worker processes (real Redis), the cursor's state at the end."""

from __future__ import annotations

import fcntl
import itertools
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

import pytest

from flask_eval.app.progress import LiveView
from flask_eval.cli.status import refreshes
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage.store import Store
from flask_eval.workers.processes import WorkerGroup
from tests.helpers import REPO, cli_env, flask_eval, wait_until
from tests.workers.test_live_ops import start_run

HIDE_CURSOR, SHOW_CURSOR = b"\x1b[?25l", b"\x1b[?25h"
#: the first line of every frame (cli/live.py)
FRAME = b"status --watch: updated "
TITLE = re.compile(r"run (\S+): (\d+)/(\d+) done, (\d+) failed")


class Terminal:
    """A command on a pseudo-terminal of 200 x 60 (TERM=xterm-256color), each chunk of
    its output kept with the time it was read."""

    def __init__(self, args: Sequence[str], env: Mapping[str, str]) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, 200, 0, 0))
        env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "flask_eval", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=REPO,
            start_new_session=True,
            env={**env, "TERM": "xterm-256color"},
        )
        os.close(slave)
        self.master = master
        self.chunks: list[tuple[float, bytes]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO: the process and its terminal are gone
                return
            if not data:
                return
            with self._lock:
                self.chunks.append((time.monotonic(), data))

    def output(self) -> bytes:
        with self._lock:
            return b"".join(data for _, data in self.chunks)

    def text(self) -> str:
        return self.output().decode("utf-8", "replace")

    def wait(self, timeout: float) -> int:
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return code

    def frames(self) -> list[tuple[float, str]]:
        """Each frame drawn (from one first line to the next), with the time its first
        line was read."""
        with self._lock:
            chunks = list(self.chunks)
        out = b"".join(data for _, data in chunks)
        ends, at = [], 0
        for _, data in chunks:
            at += len(data)
            ends.append(at)
        starts = [m.start() for m in re.finditer(re.escape(FRAME), out)]
        frames = []
        for i, start in enumerate(starts):
            end = starts[i + 1] if i + 1 < len(starts) else len(out)
            read_at = chunks[next(k for k, e in enumerate(ends) if e > start)][0]
            frames.append((read_at, out[start:end].decode("utf-8", "replace")))
        return frames

    def __enter__(self) -> Terminal:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self._reader.join(timeout=10)
        os.close(self.master)


def cursor_shown_at_the_end(out: bytes) -> bool:
    """The show-cursor escape is the last cursor escape written (after the last hide)."""
    return out.rfind(SHOW_CURSOR) > out.rfind(HIDE_CURSOR) >= 0


def test_status_watch_draws_while_two_workers_judge_and_leaves_the_cursor_visible(
    sqlite_url: str, redis_url: str, tmp_path: Path
) -> None:
    """Started before its run exists, the view waits for it (one frame saying so per
    refresh), then draws a frame per refresh while two worker processes judge it, and
    ends when it is finished, exit 0, with the cursor shown again."""
    env = cli_env(sqlite_url, redis_url)
    Store(sqlite_url).close()  # the store exists; the run is not written yet
    interval = 0.5
    args = ("status", "watched", "--watch", "--interval", str(interval))
    # 104 calls of 600 ms over 2 x 4 lanes: ~8 s of judging, ~16 refreshes
    with running_simulator(SimConfig(latency_ms=600, seed=4)) as sim, Terminal(args, env) as term:
        wait_until(
            term.text,
            lambda t: "run watched does not exist yet" in t,
            timeout=60,
            what="the view to wait for its run",
        )
        assert term.proc.poll() is None, term.text()
        start_run(env, sim, "watched")
        with WorkerGroup(env, 2, 4, "WARNING", tmp_path / "w.log", cwd=REPO):
            code = term.wait(timeout=180)
    out = term.output()
    assert code == 0, out[-3000:]
    runs = [(t, TITLE.search(frame)) for t, frame in term.frames()]
    shown = [(t, m) for t, m in runs if m is not None and m.group(1) == "watched"]
    unfinished = [(t, m) for t, m in shown if int(m[2]) + int(m[4]) < int(m[3])]
    finished = [t for t, m in shown if int(m[2]) + int(m[4]) == int(m[3])]
    assert len(unfinished) >= 3, out[-3000:]
    # it redraws as the run goes on, not one picture: the counts move between frames
    assert len({m[2] for _, m in unfinished}) >= 2, [m[0] for _, m in unfinished]
    assert finished and shown[-1][1][2] == shown[-1][1][3] == "312"
    # a frame per refresh while unfinished: with a wide margin (a quarter of the
    # refreshes) for a loaded machine, where a refresh's queries take longer
    judging = finished[0] - unfinished[0][0]
    assert len(unfinished) >= judging / interval / 4, (len(unfinished), judging)
    assert cursor_shown_at_the_end(out), out[-200:]


def test_status_watch_ended_by_sigterm_puts_the_cursor_back(
    sqlite_url: str, redis_url: str
) -> None:
    """SIGTERM (as `timeout` sends) while a run is unfinished (no worker takes it): the
    last frame stays, the cursor is shown again, exit 128 + 15."""
    env = cli_env(sqlite_url, redis_url)
    with running_simulator(SimConfig(seed=1)) as sim:
        start_run(env, sim, "idle")
    with Terminal(("status", "--watch", "--interval", "0.2"), env) as term:
        wait_until(
            term.text,
            lambda t: TITLE.search(t) is not None,
            timeout=60,
            what="a frame of the unfinished run",
        )
        term.proc.send_signal(signal.SIGTERM)
        code = term.wait(timeout=60)
    assert code == 128 + signal.SIGTERM, term.text()[-2000:]
    assert cursor_shown_at_the_end(term.output())


def test_status_watch_into_a_pipe_prints_each_frame_and_says_a_deleted_run(
    sqlite_url: str, redis_url: str
) -> None:
    """Off a terminal each frame is printed as it is drawn (not held back to the end);
    a watched run deleted meanwhile is said, and the view exits 1."""
    env = cli_env(sqlite_url, redis_url)
    with running_simulator(SimConfig(seed=1)) as sim:
        start_run(env, sim, "idle")
    proc = subprocess.Popen(
        [sys.executable, "-m", "flask_eval", "status", "idle", "--watch", "--interval", "0.2"],
        env={**env, "TERM": "xterm-256color"},
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    reader.start()
    try:
        wait_until(
            lambda: sum("run idle: 0/" in x for x in lines),
            lambda n: n >= 2,
            timeout=60,
            what="two frames of the unfinished run",
        )
        flask_eval("runs", "delete", "idle", "--yes", env=env)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=10)
    assert code == 1, (proc.stderr.read() if proc.stderr else "", lines[-5:])
    assert "\x1b" not in "".join(lines)  # plain text: no cursor moves off a terminal
    last = lines[max(i for i, x in enumerate(lines) if FRAME.decode() in x) :]
    assert any("run idle: deleted" in x for x in last), last


def test_the_live_view_is_not_finished_while_it_has_no_run() -> None:
    """`--watch --json` while waiting for a run: ``"finished": false`` (it was true)."""
    view = LiveView(at="2026-01-01T00:00:00+00:00", runs=[])
    assert view.as_dict()["finished"] is False


@pytest.mark.parametrize("cost", [0.0, 0.3, 1.7])
def test_refreshes_keep_their_cadence_whatever_a_refresh_costs(
    cost: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refreshes come `--interval` apart from the first: a refresh's own time is taken
    from the wait after it, and one longer than the interval is followed at once."""
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    started = []
    for n in refreshes(1.0):
        started.append(clock[0])
        clock[0] += cost  # the refresh's queries and drawing
        if n == 9:
            break
    gaps = [b - a for a, b in itertools.pairwise(started)]
    assert gaps == [pytest.approx(max(1.0, cost))] * 9
