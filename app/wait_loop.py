"""Waiting for a run: a progress bar over the ledger until no judgment is open, riding out
a database outage, saying what it waits for (``app.waiting``); ``pipeline.wait`` is this
function."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from tqdm import tqdm

from flask_eval.app.waiting import (
    BatchWatch,
    FirstStep,
    Outage,
    RunDeleted,
    StoppedOpen,
    StoppedWaiting,
    Watch,
    check_workers,
    join_executor,
)
from flask_eval.core.redact import redact
from flask_eval.producer.dispatch import Transport
from flask_eval.rubrics import kinds
from flask_eval.storage import queries
from flask_eval.storage.records import Halt, RunInfo
from flask_eval.storage.retry import is_transient, retrying_within
from flask_eval.storage.store import Store
from flask_eval.workers.inprocess import InProcessTransport

#: seconds between two looks at whether a run is done
POLL_SECONDS = 0.5


def wait(
    store: Store,
    run: RunInfo,
    dispatcher: Transport,
    *,
    progress: bool = True,
    leave_open: int = 0,
    quiet_after: float = 15.0,
    say: Callable[[str], None] | None = None,
    timeout: float | None = None,
) -> dict[str, Halt]:
    """Block until no judgment of ``run`` is open (but ``leave_open`` held back on
    purpose), with a progress bar; returns the judges halted meanwhile.

    Each halted judge is said once, in one line. Until the first judgment is finished the
    bar says what it waits for (``waiting.FirstStep``). On a broker, after ``quiet_after``
    seconds without progress: if no worker announced itself in this database but workers
    take the queue, raise WorkersElsewhere (they cannot see this run); if none takes it,
    say once that no worker is running. On a broker, Ctrl-C or ``timeout`` seconds raise
    StoppedWaiting (the workers judge on).
    """
    counts = queries.status(store, run.id, run.name)
    bar = tqdm(
        total=counts.total,
        initial=counts.total - counts.pending,
        desc=f"{kinds.of(run.config.kind).words.doing} {run.name}",
        unit="judgment",
        disable=not progress,
        file=sys.stderr,
        dynamic_ncols=True,
    )
    tell = say or (lambda line: tqdm.write(line, file=sys.stderr))
    watch = Watch()
    last_change, last_open = time.monotonic(), counts.pending
    first = FirstStep(store, dispatcher, within=max(quiet_after, 30.0))
    batches = BatchWatch.of(store, run)
    deadline = None if timeout is None else time.monotonic() + timeout
    open_ = counts.pending - leave_open
    queue = dispatcher.queue or ""
    halts: dict[str, Halt] = {}
    outage = Outage()

    def look() -> bool:
        """One look at the run (the database may be away); True when none is open."""
        nonlocal open_, last_change, last_open, halts
        if not store.existing_runs([run.id]):  # its rows are gone: none open, none done
            while isinstance(dispatcher, InProcessTransport) and dispatcher.alive():
                dispatcher.pause(POLL_SECONDS)  # the answers on the wire, kept (to no run)
            raise RunDeleted(run)
        open_ = store.count_open(run.id) - leave_open
        bar.update(bar.total - open_ - bar.n)
        if open_ != last_open:
            last_change, last_open = time.monotonic(), open_
        halts = store.halts(run.id)
        for judge in sorted(set(halts) - watch.halts):
            tell(redact(halts[judge].detail))
            watch.halts.add(judge)
        if batches is not None:
            batches.look(tell)
        label = first.label(started=open_ < counts.pending - leave_open)
        if progress and label is not None:
            bar.set_postfix_str(label)
        if open_ <= 0:
            if batches is not None:
                batches.settle(tell)  # the batches as they ended
            return True
        if isinstance(dispatcher, InProcessTransport) and not dispatcher.alive():
            join_executor(dispatcher.join, run)  # re-raises an executor crash
            left = store.count_open(run.id) - leave_open
            if left > 0:
                raise StoppedOpen.of(store, run, left)
        elif dispatcher.queue is not None and time.monotonic() - last_change > quiet_after:
            check_workers(store, run, dispatcher, watch, tell, quiet_after)
        return False

    try:
        while True:
            try:  # an outage is ridden out, within --timeout
                with retrying_within(None if deadline is None else deadline - time.monotonic()):
                    if look():
                        break
                if outage.back(tell):  # the workers' heartbeats are late: not a stall
                    last_change = time.monotonic()
            except Exception as exc:
                if not is_transient(exc):
                    raise
                outage.down(exc, tell)
            if deadline is not None and time.monotonic() >= deadline:
                away = ", the database unreachable" if outage.since is not None else ""
                why = f"--timeout {timeout:g} s{away}"
                raise StoppedWaiting(run.name, open_, counts.total, why, queue, first.seen())
            dispatcher.pause(POLL_SECONDS)
    except KeyboardInterrupt:
        if isinstance(dispatcher, InProcessTransport):  # keep every answer paid for
            dispatcher.interrupt(tell)
            tell(
                f"stopped: every answer paid for is stored; `flask-eval resume {run.name}` "
                "continues the run"
            )
            raise
        if dispatcher.queue is None:
            raise
        raise StoppedWaiting(run.name, open_, counts.total, "Ctrl-C", queue, first.seen()) from None
    finally:
        bar.close()
    dispatcher.join()
    return halts
