"""A worker pays for no row that is no longer its own (in-process executor, memory judge,
real SQLite and PostgreSQL): not after its lease ran out and another worker took the
rows, not after their run was deleted; what it paid before is kept."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from sqlalchemy import select

from flask_eval.core.errors import Status
from flask_eval.storage.models import CALL, JUDGMENT
from flask_eval.storage.records import Outcome
from flask_eval.storage.store import Store
from flask_eval.workers.judge import GenerateConfig, JudgeOutput, Message
from flask_eval.workers.providers.memory_judge import MemoryJudge, default_answer
from flask_eval.workers.runner import Executor, ExecutorConfig
from tests.helpers import wait_until
from tests.storage.test_store import create, open_ids
from tests.workers.test_judging import judge_with, reset_memory_judge  # noqa: F401  (autouse)

J, C = JUDGMENT.c, CALL.c


def run_to_end(executor: Executor, run_id: int, calls: Sequence[Sequence[int]]) -> None:
    """One batch through ``executor``, on a loop of its own, then close it."""

    async def go() -> None:
        try:
            await executor.run_batch(run_id, calls)
        finally:
            await executor.aclose()

    asyncio.run(go())


def paid(store: Store) -> list[tuple[str, int | None]]:
    """Every paid answer: (its text, the run it belongs to)."""
    with store.engine.connect() as conn:
        return [(r.raw, r.run_id) for r in conn.execute(select(C.raw, C.run_id))]


def test_a_worker_stopped_past_its_lease_pays_for_no_row_another_worker_took(
    database_url: str,
) -> None:
    """The worker's process stops (SIGSTOP: its loop and heartbeat frozen) while its first
    call is on the wire and two more wait for a lane; its lease runs out, another worker
    claims those two calls' rows and finishes them. Woken, the worker sends neither."""
    store, other = Store(database_url), Store(database_url)
    run_id = create(store)
    calls = open_ids(store, run_id)[:3]
    later = [i for call in calls[1:] for i in call]

    def script(messages: Sequence[Message]) -> str:
        if MemoryJudge.calls == 1:  # the first request: the whole process stops here
            taken = wait_until(
                lambda: other.claim_contexts(run_id, later, 60),
                timeout=60,
                what="the stopped worker's lease to run out",
            )
            other.write([], [Outcome(c.id, Status.DONE, score=1) for c in taken])
        return default_answer(messages)

    judge_with(script)
    run_to_end(Executor(store, ExecutorConfig(in_flight=1, lease_seconds=1.0)), run_id, calls)
    assert MemoryJudge.calls == 1  # the two calls another worker had finished: not sent
    with store.engine.connect() as conn:
        rows = dict(conn.execute(select(J.id, J.score).where(J.id.in_(later))).all())
    assert set(rows.values()) == {1}  # the other worker's results stand
    assert len(paid(store)) == 1


def test_a_run_deleted_while_its_calls_wait_sends_nothing_more_and_keeps_what_was_paid(
    database_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """`runs delete` while a worker holds the run's calls: the call on the wire is paid
    and its answer kept (attached to no run), the calls waiting for a lane are dropped
    unpaid, and nothing fails."""
    store = Store(database_url)
    run_id = create(store)
    calls = open_ids(store, run_id)
    answered = threading.Event()

    async def held(
        self: MemoryJudge, messages: Sequence[Message], _: GenerateConfig
    ) -> JudgeOutput:
        type(self).calls += 1
        while not answered.is_set():  # the answer is on its way
            await asyncio.sleep(0.01)
        return JudgeOutput(default_answer(messages), 100, 20)

    monkeypatch.setattr(MemoryJudge, "generate", held)
    executor = Executor(store, ExecutorConfig(in_flight=1))
    ended: list[object] = []

    async def go() -> None:
        try:
            ended.append(await executor.run_batch(run_id, calls))
        except BaseException as exc:
            ended.append(exc)
        finally:
            await executor.aclose()

    worker = threading.Thread(target=asyncio.run, args=(go(),))
    caplog.set_level(logging.WARNING, logger="flask_eval.worker")
    worker.start()
    wait_until(lambda: MemoryJudge.calls, timeout=60, what="the first call sent")
    store.delete_run(run_id)
    wait_until(
        lambda: f"run {run_id} was deleted" in caplog.text,
        timeout=60,
        what="the worker to learn of the delete",
    )
    answered.set()
    worker.join(timeout=60)
    assert not worker.is_alive()
    assert not isinstance(ended[0], BaseException), ended[0]
    assert MemoryJudge.calls == 1 < len(calls)
    assert [run for _, run in paid(store)] == [None]  # the paid answer, kept


def test_of_two_claims_of_a_row_in_one_process_only_the_newer_one_sends(tmp_path: Path) -> None:
    """A delivery's lease ran out while its requests waited, and a newer delivery to the
    same process claimed the rows again: only the newer claim's requests go out."""
    from flask_eval.workers.leases import Leases, NotSent

    store = Store(f"sqlite:///{tmp_path / 'x.db'}")
    run_id = create(store)
    ids = open_ids(store, run_id)[0]
    old = store.claim_contexts(run_id, ids, -1)  # ran out
    new = store.claim_contexts(run_id, ids, 60)

    async def go() -> None:
        leases = Leases(store, 60)
        leases.hold({r.id: r for r in old})
        leases.hold({r.id: r for r in new})
        try:
            await leases.check(run_id, new)
            with pytest.raises(NotSent, match="newer claim"):
                await leases.check(run_id, old)
        finally:
            leases.stop()

    asyncio.run(go())


def test_rows_this_worker_finished_are_not_reported_as_taken_away(
    database_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A batch's first call is answered and its rows written as done; its second call is
    still on the wire when the heartbeat renews the batch's leases. The renewal no longer
    finds the first call's rows running: this worker finished them, nobody took them, and
    the worker says nothing of rows no longer its own."""
    store = Store(database_url)
    run_id = create(store)
    first, second = open_ids(store, run_id)[:2]

    def status_of(ids: Sequence[int]) -> set[str]:
        with store.engine.connect() as conn:
            return set(conn.execute(select(J.status).where(J.id.in_(ids))).scalars())

    def leased_until(ids: Sequence[int]) -> set[object]:
        with store.engine.connect() as conn:
            return set(conn.execute(select(J.lease_until).where(J.id.in_(ids))).scalars())

    async def condition(observe: Callable[[], object], what: str) -> None:
        deadline = time.monotonic() + 60
        while not await asyncio.to_thread(observe):
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.02)

    async def answer(
        self: MemoryJudge, messages: Sequence[Message], _: GenerateConfig
    ) -> JudgeOutput:
        type(self).calls += 1
        if type(self).calls == 2:  # the second call, on the wire
            await condition(lambda: status_of(first) == {Status.DONE.value}, "call 1 stored")
            before = leased_until(second)
            await condition(lambda: leased_until(second) != before, "a renewal after it")
        return JudgeOutput(default_answer(messages), 100, 20)

    monkeypatch.setattr(MemoryJudge, "generate", answer)
    caplog.set_level(logging.WARNING, logger="flask_eval.worker")
    run_to_end(
        Executor(store, ExecutorConfig(in_flight=1, lease_seconds=1.0)), run_id, [first, second]
    )
    assert status_of([*first, *second]) == {Status.DONE.value}
    assert "no longer its own" not in caplog.text


def test_a_late_renewal_keeps_the_rows_nobody_took(tmp_path: Path) -> None:
    """The worker's renewal comes after its lease ran out (a busy loop, a stopped
    process), and no other worker took the rows meanwhile: they are still its own, and
    its requests for them are sent."""
    from flask_eval.workers.leases import Leases

    store = Store(f"sqlite:///{tmp_path / 'x.db'}")
    run_id = create(store)
    ids = open_ids(store, run_id)[0]
    late = store.claim_contexts(run_id, ids, -1)  # its lease ran out before any renewal
    now = [0.0]

    async def go() -> None:
        leases = Leases(store, 60, clock=lambda: now[0])
        leases.hold({r.id: r for r in late})
        now[0] = 3600.0  # the check finds the lease stale: it asks the ledger
        try:
            await leases.check(run_id, late)  # NotSent would raise
        finally:
            leases.stop()

    asyncio.run(go())
    assert store.leased(run_id, ids)[0] == sorted(ids)  # renewed: live again


def test_a_lease_that_ran_out_after_the_claim_looked_is_looked_at_again(tmp_path: Path) -> None:
    """A delivery could not claim rows another worker held; by the time it asks which are
    leased, that lease has run out (a worker killed a moment before): the rows are still
    reported, to be looked at again at once, never dropped (on RabbitMQ nothing else would
    send them again)."""
    store = Store(f"sqlite:///{tmp_path / 'x.db'}")
    run_id = create(store)
    live, dead = open_ids(store, run_id)[:2]
    store.claim_contexts(run_id, live, 3600)  # a live holder: waited for
    held, wait = store.leased(run_id, live)
    assert held == sorted(live) and 3500 < wait <= 3600
    store.claim_contexts(run_id, dead, -1)  # its holder died; the lease ran out
    assert store.leased(run_id, dead) == (sorted(dead), 0.0)
    both, wait = store.leased(run_id, [*live, *dead])
    assert both == sorted([*live, *dead]) and wait > 3500
