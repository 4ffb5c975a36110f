"""`flask-eval rate` and `flask-eval view --rate` on the command line: bad input, and the
workspace started as a process that says where it listens."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from flask_eval.storage.store import Store
from tests.conftest import REPO
from tests.helpers import cli_env, flask_eval, kill_group


def _store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    Store(url).close()  # an empty store
    return url


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    env = cli_env(f"sqlite:///{tmp_path / 'none.db'}")
    missing = flask_eval("rate", "--db", f"sqlite:///{tmp_path / 'none.db'}", env=env, check=False)
    assert missing.returncode == 2 and "no flask-eval store" in missing.stderr
    assert not (tmp_path / "none.db").exists()
    alone = flask_eval("view", "--with-results", env=cli_env(_store(tmp_path)), check=False)
    assert alone.returncode == 2 and "--with-results is for --rate" in alone.stderr
    lease = flask_eval("rate", "--lease", "1", env=env, check=False)
    assert lease.returncode == 2


@pytest.mark.skipif(
    not (REPO / "storage" / "ratings.py").exists(), reason="no storage.ratings to serve from"
)
def test_the_workspace_starts_as_a_process_and_says_where(tmp_path: Path) -> None:
    url = _store(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "flask_eval", "rate", "--db", url, "--port", "0"],
        env=cli_env("sqlite:///unused.db"),
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # blocks until the line (or the end: a failure)
        assert "listening on http://127.0.0.1:" in line, line
        base = line.split("listening on ", 1)[1].split()[0]
        assert base.endswith("/rate")
        with urllib.request.urlopen(base + "/signin", timeout=10) as answer:
            assert answer.status == 200
            assert answer.headers["X-Frame-Options"] == "DENY"
            assert "script-src 'self'" in answer.headers["Content-Security-Policy"]
            assert 'id="signin"' in answer.read().decode()
        try:
            urllib.request.urlopen(base.removesuffix("/rate") + "/runs/x", timeout=10)
            raise AssertionError("the viewer's pages are not served by `rate`")
        except urllib.error.HTTPError as exc:
            assert exc.code == 403
    finally:
        kill_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if proc.poll() is None:
            kill_group(proc, signal.SIGKILL)
        proc.wait(10)
