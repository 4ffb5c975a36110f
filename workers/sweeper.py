"""The sweeper: send again the judgments whose message the broker lost.

Some brokers can lose a message a worker took: Redis's transport pops a message
(``BRPOP``) before it records it as unacknowledged, so a worker killed between the two
loses that message for good, and no visibility timeout brings it back (a kill -9 test lost
one message of 255 this way). The ledger still knows the rows are open, so on such a
broker (``Consumer.loses_messages``) every worker process runs this loop:

every ``interval`` seconds, one worker (``Consumer.sweep_turn``) asks its broker's
consumer whether the queue is idle (``Consumer.idle``: nothing queued, nothing waiting
unacknowledged); then the open rows (pending, or running on an expired lease) of every
run whose producer sent all its calls, untouched for ``grace`` seconds, have no message
anywhere, and they are sent again through the broker's transport. A spare copy costs
nothing: claims make a second delivery skip rows that are done or leased. Runs held back
by ``--max-cost`` are never swept (see ``producer.dispatch.dispatch_open``).
"""

from __future__ import annotations

import logging
import threading
import time

from flask_eval.core.settings import Settings
from flask_eval.producer.dispatch import Transport, dispatch_open
from flask_eval.storage import queries
from flask_eval.storage.store import Store
from flask_eval.workers.broker import Consumer, transport_of

log = logging.getLogger("flask_eval.sweeper")


def sweep(
    store: Store, consumer: Consumer, transport: Transport, settings: Settings, grace: float
) -> int:
    """One pass (this process's turn); returns how many calls were sent again."""
    if not consumer.idle():
        return 0
    sent = 0
    for run in queries.stale_open_runs(store, grace, consumer.queue):
        # calls sent before, within the budget then: not estimated again (a metered
        # estimate would read every text of the run into this worker)
        result = dispatch_open(store, run, transport, settings.calls_per_message, meter=False)
        if result.sent:
            log.warning(
                "run %s: sent %d calls again; their messages were lost by the broker",
                run.name,
                result.sent,
            )
        sent += result.sent
    return sent


def start(
    settings: Settings, consumer: Consumer, interval: float | None = None
) -> threading.Thread | None:
    """Run the sweeper in a daemon thread of this worker process (brokers that can lose a
    message only)."""
    if not consumer.loses_messages:
        return None
    every = interval if interval is not None else max(5.0, settings.visibility_timeout / 2)
    grace = settings.visibility_timeout

    def loop() -> None:
        store: Store | None = None
        transport: Transport | None = None
        while True:
            time.sleep(every)
            try:
                if not consumer.sweep_turn(every):
                    continue  # another worker sweeps this round
                store = store or Store(settings.database_url)
                transport = transport or transport_of(settings)
                sweep(store, consumer, transport, settings, grace)
            except Exception:  # never kill the worker; the next round tries again
                log.exception("sweeper round failed")

    thread = threading.Thread(target=loop, name="flask-eval-sweeper", daemon=True)
    thread.start()
    return thread
