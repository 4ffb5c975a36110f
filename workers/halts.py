"""Stop paying for a judge that fails systematically.

A wrong base URL, a dead endpoint, a missing key or a judge that never answers in the
protocol's format fails every call the same way, and every call is paid (or at least
waited for). So when the first ``after`` calls of a judge in a run that ended in this
process all failed for the same reason, the judge is stopped at once in this process
(calls still queued for it wait), and the ledger is asked: if no judgment of that judge
in the run is done and all its failures share that reason, the judge is halted for the
run, recorded in the ledger (``judge_halt``), where every worker learns it with its next
message and the producer reads it to say why and exit non-zero. Its remaining judgments
fail with reason ``halted`` without a call. If the ledger disagrees (another worker's
call of that judge succeeded), the waiting calls go ahead. ``flask-eval resume`` clears
the halt.

Rate limits never halt a judge (they are a budget, not a fault); neither do halts.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from flask_eval.core.errors import FailureReason, Status
from flask_eval.storage.records import Halt, Outcome
from flask_eval.storage.store import Store

log = logging.getLogger("flask_eval.worker")

#: reasons that do not count toward a halt
_NOT_COUNTED = frozenset({FailureReason.RATE_LIMITED.value, FailureReason.HALTED.value})

Key = tuple[int, str]


@dataclass
class _Start:
    """How a judge's first calls in a run went, in this process."""

    settled: bool = False  # a call succeeded or failures differ: never halts
    failed: Counter[str] = field(default_factory=Counter)
    detail: str = ""


class HaltWatch:
    def __init__(self, store: Store, after: int) -> None:
        self.store = store
        self.after = after
        self._starts: dict[Key, _Start] = {}
        self._halted: dict[Key, Halt] = {}
        self._deciding: dict[Key, asyncio.Future[Halt | None]] = {}

    def learn(self, run_id: int, halts: Mapping[str, Halt]) -> None:
        """The halts the ledger holds for a run (read with each message)."""
        for key in [k for k in self._halted if k[0] == run_id and k[1] not in halts]:
            del self._halted[key]  # cleared by `resume`
            self._starts.pop(key, None)
        for judge, halt in halts.items():
            self._halted[(run_id, judge)] = halt

    def halted(self, run_id: int, judge: str) -> Halt | None:
        return self._halted.get((run_id, judge))

    async def check(self, run_id: int, judge: str) -> Halt | None:
        """The halt of ``judge`` for the run, waiting while one is being decided."""
        key = (run_id, judge)
        deciding = self._deciding.get(key)
        if deciding is not None:
            return await asyncio.shield(deciding)
        return self._halted.get(key)

    def observe(self, run_id: int, judge: str, outcomes: Sequence[Outcome]) -> bool:
        """A call of ``judge`` ended with ``outcomes``; True when this makes its first
        ``after`` calls all failures alike: the judge stops here until :meth:`decide`."""
        key = (run_id, judge)
        if self.after <= 0 or not outcomes or key in self._halted or key in self._deciding:
            return False
        start = self._starts.setdefault(key, _Start())
        if start.settled:
            return False
        reasons = {o.reason for o in outcomes}
        if any(o.status == Status.DONE for o in outcomes) or len(reasons) != 1:
            start.settled = True
            return False
        reason = str(reasons.pop())
        if reason in _NOT_COUNTED:
            return False
        start.failed[reason] += 1
        start.detail = outcomes[0].detail or ""
        if len(start.failed) > 1:
            start.settled = True
            return False
        if start.failed[reason] < self.after:
            return False
        self._deciding[key] = asyncio.get_running_loop().create_future()
        return True

    async def decide(self, run_id: int, judge: str) -> None:
        """After the tripping call's outcomes are written: halt if the ledger agrees."""
        key = (run_id, judge)
        start = self._starts[key]
        reason = next(iter(start.failed))
        halt: Halt | None = None
        try:
            finished = await asyncio.to_thread(self.store.finished_by_judge, run_id, judge)
            failed = {r for (status, r), _ in finished.items() if status == Status.FAILED.value}
            done = any(status == Status.DONE.value for status, _ in finished)
            if not done and failed - _NOT_COUNTED == {reason}:
                detail = (
                    f"judge {judge} halted: its first {start.failed[reason]} calls in this run "
                    f"all failed ({reason}): {start.detail[:300]}; fix the cause, then resume "
                    "the run"
                )
                await asyncio.to_thread(self.store.halt, run_id, judge, reason, detail)
                halt = Halt(judge, reason, detail)
                self._halted[key] = halt
                log.info("%s", detail)  # the producer says it to the user
            else:
                start.settled = True
        finally:
            self._deciding.pop(key).set_result(halt)
