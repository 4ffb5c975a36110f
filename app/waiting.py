"""What waiting for a run says (``pipeline.wait`` waits): what the progress bar waits for
before its first step, whether workers are alive and see this database, and how to go on
when the wait stops (Ctrl-C or ``--timeout``) while workers judge on.
"""

from __future__ import annotations

import math
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from flask_eval.core.errors import FlaskEvalError
from flask_eval.core.redact import redact
from flask_eval.producer.dispatch import Transport
from flask_eval.storage.batches import BatchLedger
from flask_eval.storage.records import RunInfo
from flask_eval.storage.retry import is_transient
from flask_eval.storage.store import Store

#: seconds between two looks at the workers while nothing has been judged yet
LOOK_EVERY = 5.0
#: seconds between two looks at another process's leases before judging a run again
LEASE_LOOK_EVERY = 1.0


class WorkersElsewhere(FlaskEvalError):
    """Workers take the run's queue, but none of them uses the producer's database."""


class StoppedWaiting(FlaskEvalError):
    """The producer stopped waiting for a run that workers judge (exit code 1); ``lines``
    say how to go on. ``queue`` is the run's queue; ``alive``, the workers seen on it."""

    def __init__(
        self, run: str, open_: int, total: int, why: str, queue: str = "", alive: int = 0
    ) -> None:
        self.run, self.open, self.total, self.why = run, open_, total, why
        self.queue, self.alive = queue, alive
        super().__init__(self.lines()[0])

    def lines(self) -> list[str]:
        name = shlex.quote(self.run)
        going_on = (
            f"  {self.alive} worker(s) keep judging them: nothing judged is lost, nothing is "
            "paid twice"
            if self.alive
            else f"  no worker is alive on queue {self.queue}: they stay queued until one "
            "starts (`flask-eval worker`); nothing is lost"
        )
        return [
            f"stopped waiting for run {self.run} ({self.why}): {self.open:,} of "
            f"{self.total:,} judgments still open",
            going_on,
            f"  wait again:  flask-eval wait {name}",
            f"  progress:    flask-eval status {name}",
            f"  cancel:      flask-eval runs delete {name}  (deletes the run and its answers; "
            "its queued calls are dropped unpaid)",
        ]


class RunDeleted(FlaskEvalError):
    """The run waited for was deleted meanwhile (`runs delete`): exit code 1, never a
    success."""

    def __init__(self, run: RunInfo) -> None:
        super().__init__(
            f"run {run.name} was deleted while it was being waited for (`flask-eval runs "
            "delete`): its judgments are gone and its queued calls are dropped unpaid"
        )


class Outage:
    """The database as a waiting command last found it: unreachable since when (None:
    reachable). A wait rides an outage out, saying so once when it starts and once when
    it ends; the workers (or the in-process executor) keep their paid answers meanwhile."""

    def __init__(self) -> None:
        self.since: float | None = None

    def down(self, exc: BaseException, tell: Callable[[str], None]) -> None:
        if self.since is not None:
            return
        self.since = time.monotonic()
        tell(
            f"the database is unreachable ({type(exc).__name__}): still waiting; the "
            "answers already paid for wait to be stored, nothing is lost"
        )

    def back(self, tell: Callable[[str], None]) -> bool:
        """The database answered: True when it was unreachable until now."""
        if self.since is None:
            return False
        tell(f"the database is reachable again (after {time.monotonic() - self.since:.0f} s)")
        self.since = None
        return True


class StoppedOpen(FlaskEvalError):
    """An in-process run's executor ended with judgments still open (exit code 1: an
    unfinished run, not bad input)."""

    @classmethod
    def of(cls, store: Store, run: RunInfo, open_: int) -> StoppedOpen:
        """What to say: when some open rows are another process's under a live lease,
        how long until it runs out."""
        leased, left = store.live_leases(run.id)
        name = shlex.quote(run.name)
        if leased:
            return cls(
                f"run {run.name}: {open_:,} judgments still open, {leased:,} of them leased "
                f"by another process (one judging them, or one stopped with kill -9) for up "
                f"to {math.ceil(left)} s more; run `flask-eval resume {name}` after that "
                "to judge them"
            )
        return cls(
            f"run {run.name}: in-process execution ended with {open_:,} judgments still "
            f"open; `flask-eval resume {name}` judges them"
        )


def join_executor(join: Callable[[], None], run: RunInfo) -> None:
    """The end of an in-process run's executor: its crash raised again, but one that a
    database outage caused said in one line (exit 1), never taken for an outage the wait
    rides out (the executor is gone: waiting would not bring it back)."""
    try:
        join()
    except Exception as exc:
        if not is_transient(exc):
            raise
        raise StoppedOpen(
            f"run {run.name}: in-process judging stopped, the database unreachable "
            f"({type(exc).__name__}); `flask-eval resume {shlex.quote(run.name)}` judges "
            "what is left once it is back"
        ) from None


def await_leases(
    store: Store,
    run: RunInfo,
    tell: Callable[[str], None],
    pause: Callable[[float], None] = time.sleep,
) -> None:
    """Before this process judges ``run`` again: until no row of it is another process's
    under a live lease. A process killed with ``kill -9`` leaves its rows leased until
    the lease runs out (``FLASK_EVAL_LEASE_SECONDS``); one still judging them renews its
    leases and finishes them. Says once how long at most, unless they are renewed."""
    said = False
    while True:
        leased, left = store.live_leases(run.id)
        if not leased:
            return
        if not said:
            tell(
                f"run {run.name}: {leased:,} judgments are leased by another process (one "
                "judging them, or one stopped with kill -9): waiting for them to be judged "
                f"or for the leases to run out, in {math.ceil(left)} s unless renewed "
                "(Ctrl-C stops waiting; the run keeps its place)"
            )
            said = True
        pause(min(max(left, 0.05), LEASE_LOOK_EVERY))


class FirstStep:
    """What the progress bar waits for until its first judgment is finished: the first
    answers of the judges (in-process, or with workers alive), or a worker at all."""

    def __init__(self, store: Store, dispatcher: Transport, within: float) -> None:
        self.store = store
        self.dispatcher = dispatcher
        self.within = within
        self._text = ""
        self._looked = float("-inf")
        self._shown: str | None = None

    def label(self, started: bool) -> str | None:
        """The bar's label when it changes (None: as it is): what it waits for until
        ``started``, then nothing."""
        text = "" if started else self.text()
        if text == (self._shown or ""):
            return None
        self._shown = text
        return text

    def alive(self) -> int:
        """The workers that announced themselves on the queue lately."""
        queue = self.dispatcher.queue
        return len(self.store.live_workers(queue, within=self.within)) if queue else 0

    def seen(self) -> int:
        """:meth:`alive`, or 0 while the database is away."""
        try:
            return self.alive()
        except Exception as exc:
            if not is_transient(exc):
                raise
            return 0

    def text(self) -> str:
        queue = self.dispatcher.queue
        if queue is None:
            return "waiting for the judges' first answers"
        now = time.monotonic()
        if now - self._looked >= LOOK_EVERY:
            self._looked = now
            alive = self.alive()
            self._text = (
                f"waiting for the first answers ({alive} worker(s) on queue {queue})"
                if alive
                else f"waiting for a worker to take queue {queue}"
            )
        return self._text


@dataclass
class Watch:
    """What `wait` has told the user already."""

    halts: set[str] = field(default_factory=set)
    hinted: bool = False


def check_workers(
    store: Store,
    run: RunInfo,
    dispatcher: Transport,
    watch: Watch,
    tell: Callable[[str], None],
    within: float,
) -> None:
    assert dispatcher.queue is not None
    if store.live_workers(dispatcher.queue, within=max(within, 30.0)):
        return  # workers see this database: they are busy (or rate limited)
    consumers = dispatcher.consumers() or []
    if consumers:
        raise WorkersElsewhere(
            f"run {run.name}: {len(consumers)} worker(s) take queue {dispatcher.queue!r} "
            f"({', '.join(consumers[:3])}) but none uses this database "
            f"({redact(str(store.engine.url.render_as_string(hide_password=True)))}): "
            "start them with the same FLASK_EVAL_DATABASE_URL, then `flask-eval resume "
            f"{run.name}`"
        )
    if not watch.hinted:
        tell(
            f"no progress and no worker alive on queue {dispatcher.queue}: start one with "
            "`flask-eval worker` (Ctrl-C stops waiting; the run keeps its place)"
        )
        watch.hinted = True


#: the states of a batch whose calls are still the provider's (storage/batches.py)
_OPEN = frozenset({"created", "submitted"})


class BatchWatch:
    """Says, while a run is waited for, each change of state of its provider batches
    (created, submitted, collected, failed: docs/design/batches.md), one line each, looking
    at most every :data:`LOOK_EVERY` / 2 seconds."""

    def __init__(self, store: Store, run_id: int) -> None:
        self.ledger = BatchLedger(store)
        self.run_id = run_id
        self.seen: dict[str, tuple[str, str]] = {}
        self._looked = float("-inf")

    @classmethod
    def of(cls, store: Store, run: RunInfo) -> BatchWatch | None:
        """The watch of ``run``'s batches; None when no judge of it is a batch judge."""
        batched = any(j.batch for j in run.config.judges)
        return cls(store, run.id) if batched else None

    def settle(self, tell: Callable[[str], None], within: float = 5.0) -> None:
        """Once every row is done: the batches as they end. A batch's last rows are
        written before the batch itself is marked collected (docs/design/batches.md), so
        look until none is open any more, for at most ``within`` seconds."""
        deadline = time.monotonic() + within
        while True:
            self.look(tell, force=True)
            if all(s not in _OPEN for s, _ in self.seen.values()) or time.monotonic() > deadline:
                return
            time.sleep(0.05)

    def look(self, tell: Callable[[str], None], force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._looked < LOOK_EVERY / 2:
            return
        self._looked = now
        for b in self.ledger.batches(self.run_id):
            state = (b.state, b.provider_state)
            if self.seen.get(b.uid) == state:
                continue
            self.seen[b.uid] = state
            provider = f", provider says {b.provider_state}" if b.provider_state else ""
            answered = (
                f", {b.succeeded} answered, {b.failed} not" if b.succeeded or b.failed else ""
            )
            tell(
                f"batch {b.uid[:12]} of judge {b.judge} ({b.provider}, {b.size} calls): "
                f"{b.state}{provider}{answered}"
            )
