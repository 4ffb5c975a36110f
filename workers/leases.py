"""Leases: the rows a worker process is judging stay claimed by it while it lives, and it
pays for none that is no longer its own.

A claimed row is leased for ``lease_seconds``; a heartbeat renews the leases of every row
this process holds every third of that. A row held by two batches of the process (a
redelivered message whose rows this process still judges) stays held until both let go.
If the process dies, its leases run out and another worker may claim the rows again.

Before each request is sent, :meth:`Leases.check` makes sure this process may still pay
for its rows, without a database round trip in the usual case:

- *Its leases.* A claim's token (the row's claim count, ``JobContext.claims``) tells
  whose a row is. A lease is trusted for two thirds of its length after the moment it
  was taken or last renewed (the heartbeat renews every third, so normally always). A
  process that was stopped or cut off for longer (SIGSTOP, a stalled loop, a database
  outage) finds its leases stale: its requests wait for one renewal of all its rows (one
  statement, whatever the number of requests waiting) that returns the rows still its
  own; a request for a row another worker has taken since (or finished) is not sent.
- *Its runs.* While it holds rows, the process looks every second whether their runs
  still exist: once a run is deleted (`runs delete`), the requests of its claimed calls
  are not sent (dropped unpaid; the rows are gone). Answers already on their way are
  kept, attached to no run (``Store.write``).
- *Stopping.* An in-process run interrupted with Ctrl-C sends nothing more; the rows of
  the requests not sent are given back (pending) when the executor closes.

A request stopped so raises :class:`NotSent`; the executor writes no outcome for its rows
(``workers.calls.failed``), only what was already paid. What remains possible: a request
that had passed its check when the process stopped (microseconds before its first byte)
still goes out when it wakes; it is paid, and kept.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from flask_eval.core.errors import JudgeError
from flask_eval.storage.records import JobContext
from flask_eval.storage.retry import is_transient
from flask_eval.storage.store import Store

log = logging.getLogger("flask_eval.worker")

T = TypeVar("T")

#: the reason of a :class:`NotSent` (never written: its rows get no outcome)
NOT_SENT = "not_sent"
#: share of a lease's length for which it is trusted without asking the database
FRESH_SHARE = 2 / 3
#: seconds between two looks for deleted runs while rows are held
RUN_CHECK_SECONDS = 1.0
#: the longest wait between two attempts to reach the database from a check
MAX_BACKOFF = 5.0


class NotSent(JudgeError):
    """A request that must not be sent: its rows are no longer this process's to pay for
    (another worker took them, their run was deleted) or the process is stopping."""

    def __init__(self, detail: str) -> None:
        super().__init__(NOT_SENT, detail)


class Leases:
    def __init__(
        self, store: Store, lease_seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.store = store
        self.lease_seconds = lease_seconds
        self._clock = clock
        self._owned: dict[int, int] = {}  # row id -> batches holding it
        self._token: dict[int, int] = {}  # row id -> its claim's token
        self._run: dict[int, int] = {}  # row id -> its run
        self._fresh: dict[int, float] = {}  # row id -> until when its lease is surely ours
        self._lost: set[int] = set()  # held rows found no longer ours
        self._ending: set[int] = set()  # held rows whose outcome this process writes
        self._gone: set[int] = set()  # runs found deleted
        self._unsent: dict[int, int] = {}  # rows not sent because stopping -> token
        self._heartbeat: asyncio.Task[None] | None = None
        self._renewing: asyncio.Task[None] | None = None
        # the heartbeat's own thread: never queued behind the executor's reads and writes
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        #: no request is sent any more (an interrupted in-process run)
        self.stopping = False

    @property
    def held(self) -> int:
        return len(self._owned)

    def hold(self, rows: Mapping[int, JobContext]) -> None:
        """Rows this process just claimed (id -> what the claim returned)."""
        fresh = self._clock() + self.lease_seconds * FRESH_SHARE
        for i, row in rows.items():
            self._owned[i] = self._owned.get(i, 0) + 1
            self._token[i] = row.claims
            self._run[i] = row.run_id
            self._fresh[i] = fresh
            self._lost.discard(i)
            self._gone.discard(row.run_id)  # claimed just now: it exists
        if self._owned and (self._heartbeat is None or self._heartbeat.done()):
            self._heartbeat = asyncio.get_running_loop().create_task(self._beat())

    def release(self, ids: Iterable[int]) -> None:
        for i in ids:
            left = self._owned.get(i, 0) - 1
            if left > 0:
                self._owned[i] = left
                continue
            for table in (self._owned, self._token, self._run, self._fresh):
                table.pop(i, None)
            self._lost.discard(i)
            self._ending.discard(i)

    def ending(self, ids: Iterable[int]) -> None:
        """Rows this process is writing the outcome of (they stay held until their batch
        lets go): a renewal that no longer finds them running has found them finished by
        this process, not lost."""
        self._ending.update(i for i in ids if i in self._owned)

    def guard(self, run_id: int, rows: Sequence[JobContext]) -> Callable[[], Awaitable[None]]:
        """The check of a request for ``rows`` (as claimed), to run right before it is
        sent."""
        return functools.partial(self.check, run_id, list(rows))

    async def check(self, run_id: int, rows: Sequence[JobContext]) -> None:
        """Return if this process may pay for a request for ``rows`` (as its claim
        returned them) now; else raise :class:`NotSent`."""
        mine = [r.id for r in rows if self._token.get(r.id) == r.claims]
        if self.stopping:
            self._unsent.update({i: self._token[i] for i in mine})
            raise NotSent("not sent: the run was interrupted; its rows are given back")
        if len(mine) < len([r for r in rows if r.id in self._token]):
            # the lease ran out and a newer delivery to this process claimed them again
            raise NotSent("not sent: a newer claim of these rows judges them")
        now = self._clock()
        if any(self._fresh[i] <= now for i in mine):
            await self._renew_now()  # stale: ask the database, for every row at once
        if run_id in self._gone:
            raise NotSent(f"not sent: run {run_id} was deleted")
        if self._lost.intersection(mine):
            raise NotSent("not sent: another worker took these rows when their lease ran out")

    def stop(self) -> None:
        """Stop the heartbeat; give back the rows not sent because of :attr:`stopping`."""
        for task in (self._heartbeat, self._renewing):
            if task is not None:
                task.cancel()
        self._heartbeat = self._renewing = None
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
        unsent, self._unsent = self._unsent, {}
        if not unsent:
            return
        try:
            given = self.store.give_back(unsent)
        except Exception:
            log.exception(
                "could not give back %d rows; they are claimable again when their lease runs out",
                len(unsent),
            )
            return
        log.info("gave back %d rows that were claimed but not sent", given)

    async def _beat(self) -> None:
        """Renew the leases of every row this process holds every third of a lease, and
        look for deleted runs every second, until it holds none."""
        interval = self.lease_seconds / 3
        renewed = self._clock()
        while self._owned:
            await asyncio.sleep(min(RUN_CHECK_SECONDS, interval))
            try:
                await self._check_runs()
                if self._clock() - renewed >= interval:
                    renewed = self._clock()
                    await self._renew_now()
            except asyncio.CancelledError:
                raise
            except Exception:  # the store retries outages itself; never kill the loop
                log.exception("lease heartbeat failed")

    async def _check_runs(self) -> None:
        runs = set(self._run.values()) - self._gone
        if not runs:
            return
        gone = runs - await self._in_thread(self.store.existing_runs, runs)
        for run_id in sorted(gone):
            log.warning(
                "run %s was deleted: its calls claimed here are not sent; answers "
                "already on their way are kept, attached to no run",
                run_id,
            )
        self._gone |= gone

    async def _in_thread(self, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` on the heartbeat's thread (a busy process's shared pool of threads
        may hold a renewal back behind its writes for longer than a lease)."""
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="flask-eval-leases"
            )
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def _renew_now(self) -> None:
        """One renewal of every held lease; concurrent callers share it. Waits out a
        database outage (a stale lease cannot be trusted until the ledger says)."""
        if self._renewing is None or self._renewing.done():
            self._renewing = asyncio.get_running_loop().create_task(self._renew())
        await asyncio.shield(self._renewing)

    async def _renew(self) -> None:
        attempt = 0
        while True:
            held = {i: t for i, t in self._token.items() if i not in self._lost}
            started = self._clock()
            try:
                ours = await self._in_thread(self.store.extend_leases, held, self.lease_seconds)
                await self._check_runs()
            except Exception as exc:
                if not is_transient(exc):
                    raise
                attempt += 1
                await asyncio.sleep(min(MAX_BACKOFF, 0.1 * 2**attempt) * random.uniform(0.5, 1))
                continue
            break
        fresh = started + self.lease_seconds * FRESH_SHARE
        # still held, and not finished here (a row this process ended is not "lost")
        lost = [i for i in held if i not in ours and i in self._fresh and i not in self._ending]
        for i in ours:
            if i in self._fresh:
                self._fresh[i] = fresh
        for i in lost:
            self._fresh[i] = -math.inf
        taken = [i for i in lost if self._run.get(i) not in self._gone]
        self._lost.update(lost)
        if taken:
            log.warning(
                "%d rows this worker held are no longer its own (their lease ran "
                "out and another worker took or finished them): their calls are "
                "not sent",
                len(taken),
            )
