"""An in-process run whose executor stopped because the database was unreachable ends in
one line and exit 1: the wait does not take the executor's end for an outage to ride out
(it would wait forever), nor show a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError

from flask_eval.producer.synthetic import write_inputs
from flask_eval.workers.runner import Executor
from tests.helpers import cli_env, flask_eval


def test_an_executor_stopped_by_an_outage_ends_the_run_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def unreachable(self: Executor, run_id: int, calls: object) -> None:
        raise OperationalError("SELECT 1", {}, ConnectionRefusedError("connection refused"))

    monkeypatch.setattr(Executor, "run_batch", unreachable)
    instances, responses = write_inputs(tmp_path / "in", 4)
    named = [a for r in responses for a in ("--responses", r)]
    result = flask_eval(
        "run",
        "--instances",
        str(instances),
        *named,
        "--judge",
        "memory/j",
        env=cli_env(f"sqlite:///{tmp_path / 'x.db'}"),
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert "in-process judging stopped, the database unreachable" in result.stderr
    assert "Traceback" not in result.stderr
