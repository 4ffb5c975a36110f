"""An in-process run meets rows another process holds: a run killed with kill -9 leaves
its rows leased until the lease runs out; one still judging renews them. Judging the run
again waits for those rows, saying how long, and never exits 2 (bad input)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, update

from flask_eval.core.errors import Status
from flask_eval.producer.synthetic import write_inputs
from flask_eval.storage import queries
from flask_eval.storage.models import JUDGMENT, utcnow
from flask_eval.storage.store import Store
from flask_eval.workers.judge import Message
from flask_eval.workers.providers.memory_judge import MemoryJudge, default_answer
from tests.helpers import cli_env, flask_eval
from tests.storage.test_store import open_ids

J = JUDGMENT.c


@pytest.fixture(autouse=True)
def memory_judge() -> Iterator[None]:
    MemoryJudge.calls = 0
    yield
    MemoryJudge.script = staticmethod(default_answer)  # type: ignore[assignment]
    MemoryJudge.calls = 0


def args(tmp_path: Path) -> list[str]:
    instances, responses = write_inputs(tmp_path / "in", 12)
    named = [a for r in responses for a in ("--responses", r)]
    return [
        "run",
        "--instances",
        str(instances),
        *named,
        "--judge",
        "memory/j",
        "--run",
        "r",
        "--in-flight",
        "1",
    ]


def counts(store: Store) -> queries.StatusCounts:
    info = store.find_run("r")
    assert info is not None
    return queries.status(store, info.id, "r")


def test_a_rerun_after_a_kill_9_waits_for_the_killed_process_leases(tmp_path: Path) -> None:
    """A process judging the run was killed with kill -9 holding three rows (running, their
    lease live for a few more seconds); the same command again says it waits for them and
    how long, then judges them: exit 0, every judgment done."""
    database_url = f"sqlite:///{tmp_path / 'x.db'}"
    env = cli_env(database_url)
    flask_eval(*args(tmp_path), env=env)
    store = Store(database_url)
    info = store.find_run("r")
    assert info is not None
    assert not open_ids(store, info.id)
    with store.engine.begin() as conn:  # what the killed process left: three rows held
        first = select(J.id).where(J.run_id == info.id).order_by(J.id).limit(3)
        ids = list(conn.execute(first).scalars())
        conn.execute(
            update(JUDGMENT)
            .where(J.id.in_(ids))
            .values(
                status=Status.RUNNING.value,
                score=None,
                claims=J.claims + 1,
                lease_until=utcnow() + timedelta(seconds=3),
            )
        )
    again = flask_eval(*args(tmp_path), env=env, check=False)
    assert again.returncode == 0, again.stderr
    assert "3 judgments are leased by another process" in again.stderr
    assert "in 3 s unless renewed" in again.stderr
    assert counts(store).done == counts(store).total
    store.close()


def test_rows_another_process_takes_mid_run_end_it_unfinished_exit_1_saying_how_long(
    tmp_path: Path,
) -> None:
    """While this run judges, another process claims the rows of its last call (a second
    `run` of the same run, in another terminal): this one judges the rest, then says
    that those rows are leased and for how long, with exit 1, not 2 (bad input)."""
    database_url = f"sqlite:///{tmp_path / 'x.db'}"
    env = cli_env(database_url, FLASK_EVAL_CALLS_PER_MESSAGE="1")
    other = Store(database_url)

    def script(messages: Sequence[Message]) -> str:
        if MemoryJudge.calls == 1:  # the first request: the other process claims the last
            info = other.find_run("r")
            assert info is not None
            last = open_ids(other, info.id)[-1]
            assert other.claim_contexts(info.id, last, 600)
        return default_answer(messages)

    MemoryJudge.script = staticmethod(script)  # type: ignore[assignment]
    result = flask_eval(*args(tmp_path), env=env, check=False)
    assert result.returncode == 1, result.stderr
    assert "leased by another process" in result.stderr
    # the lease's 600 s less the time this run took after the claim (seconds on a busy machine)
    said = re.search(r"for up to (\d+) s more", result.stderr)
    assert said is not None and 540 <= int(said.group(1)) <= 600, result.stderr
    assert "Traceback" not in result.stderr
    other.close()
