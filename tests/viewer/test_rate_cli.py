"""`flask-eval rate` and `flask-eval view --rate` on the command line: bad input, and the
workspace started as a process that says where it listens."""

from __future__ import annotations

import signal
import sqlite3
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


@pytest.fixture
def never_served(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command that would serve fails instead of serving until killed."""
    from aiohttp import web

    def serve(*args: object, **kwargs: object) -> None:
        raise AssertionError("the command went on to serve")

    monkeypatch.setattr(web, "run_app", serve)


def refused(proc: subprocess.CompletedProcess[str], says: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert says in proc.stderr


@pytest.mark.usefixtures("never_served")
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    env = cli_env(f"sqlite:///{tmp_path / 'none.db'}")
    missing = flask_eval("rate", "--db", f"sqlite:///{tmp_path / 'none.db'}", env=env, check=False)
    refused(missing, "no flask-eval store")
    assert not (tmp_path / "none.db").exists()
    alone = flask_eval("view", "--with-results", env=cli_env(_store(tmp_path)), check=False)
    refused(alone, "--with-results is for --rate")
    lease = flask_eval("rate", "--lease", "1", env=env, check=False)
    assert lease.returncode == 2


@pytest.mark.usefixtures("never_served")
@pytest.mark.parametrize(
    "command", [("rate",), ("rate", "--port", "0"), ("view", "--rate", "--port", "0")]
)
def test_a_store_that_does_not_exist_is_refused_not_made(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """`rate` (and `view --rate`) on the configured store or ``--db``: a SQLite file that is
    not there, or one that holds no flask-eval store, is one line and exit 2; nothing is
    created or written."""
    none = tmp_path / "none.db"
    refused(flask_eval(*command, env=cli_env(f"sqlite:///{none}"), check=False), "no flask-eval")
    assert list(tmp_path.iterdir()) == []
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    conn.close()
    before = other.read_bytes()
    for env, args in (
        (cli_env(f"sqlite:///{other}"), ()),
        (cli_env(f"sqlite:///{none}"), ("--db", f"sqlite:///{other}")),
    ):
        if command[0] == "view" and args:
            continue  # the viewer reads the configured store only
        refused(flask_eval(*command, *args, env=env, check=False), "no flask-eval store")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]
    assert other.read_bytes() == before


@pytest.mark.usefixtures("never_served")
def test_a_postgresql_database_without_a_store_is_refused_not_made(postgres_url: str) -> None:
    from sqlalchemy import create_engine, inspect

    for env, args in (
        (cli_env(postgres_url), ()),
        (cli_env("sqlite:///unused.db"), ("--db", postgres_url)),
    ):
        refused(
            flask_eval("rate", "--port", "0", *args, env=env, check=False), "no flask-eval store"
        )
    engine = create_engine(postgres_url)
    try:
        with engine.connect() as conn:
            assert inspect(conn).get_table_names() == []
    finally:
        engine.dispose()


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
