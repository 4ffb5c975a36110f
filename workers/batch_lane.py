"""The batch lane: the calls of a batch judge go through its provider's batch API.

The executor renders a batch judge's calls as it renders live ones and looks them up in
the answer cache; a call the cache cannot answer is *parked* here (a ``planned``
``batch_call`` row; its judgments stay ``running`` under a lease that outlives any batch)
instead of being sent, and its message is acknowledged. From then on the ledger carries
the call, and any worker carries it on: a periodic :meth:`BatchLane.tick`, run by one
worker at a time under a lease in the ledger (``lane_lease``), does for each (run, judge)

1. *heal*: a batch written but whose provider id was never recorded (the process died
   between "the provider accepted it" and "we recorded it", or the answer was lost) is
   looked up by its tag (:meth:`BatchAPI.find_batch`) and recorded, never sent twice;
   one the provider surely does not hold is closed and its calls planned again;
2. *poll* every open batch; an ended one is *collected*: each answer goes through the
   executor's own path (``Executor._run_call``: the readers, a live re-ask with a format
   reminder or a larger token budget, the cache, the ledger writes, the halts) as a
   prepaid answer costed at the judge's batch price; a call the provider failed or
   expired is planned again, alone (after ``MAX_TRIES`` batches its rows fail);
3. *submit* a judge's planned calls once ``batch_max_size`` of them wait, or the oldest
   waited ``batch_max_wait`` seconds (at once when the caller knows no more will come:
   an in-process run whose messages are all judged), within ``batch_max_tokens``. The
   batch row is written with its tag first (docs/design/batches.md).

Batch calls use no live rpm budget: only a live re-ask goes through the sender.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta

from flask_eval.core.errors import FailureReason, JudgeError
from flask_eval.core.types import JudgeConfig
from flask_eval.rubrics.messages import from_data, to_data
from flask_eval.storage.batch_rows import (
    COLLECTED_BATCH,
    CREATED,
    DUPLICATE,
    FAILED,
    PLANNED,
    SUBMITTED,
    BatchInfo,
    OpenCall,
    Parked,
)
from flask_eval.storage.batches import BatchLedger
from flask_eval.storage.models import utcnow
from flask_eval.workers import events
from flask_eval.workers.batch_parked import generate_of, request_of, tokens_of, within_tokens
from flask_eval.workers.batching import (
    BatchAPI,
    BatchRequest,
    BatchResults,
    BatchStatus,
    batch_api,
)
from flask_eval.workers.calls import Answer, BatchSummary, Call, CallKeys, answer_record, failed
from flask_eval.workers.judge import JudgeOutput
from flask_eval.workers.lane_executor import LaneExecutor
from flask_eval.workers.usage import Request

log = logging.getLogger("flask_eval.batches")

#: batches a call may be in that fail or expire before its rows fail for good
MAX_TRIES = 3
#: seconds a parked call waits for others by default (the judge's ``batch_max_wait``)
DEFAULT_MAX_WAIT = 60.0
#: a parked call's judgments stay leased this long: longer than a batch may live (24 h)
PARK_SECONDS = 2 * 86_400
#: the lane's duty in ``lane_lease`` (held for the workers' lease, at least three polls)
LEASE_NAME = "batch-lane"
#: reasons a refused submission surely left nothing at the provider
DEFINITE = (FailureReason.AUTH, FailureReason.REFUSED, FailureReason.CONFIG)


class BatchLane:
    """The batch calls of one executor (one process)."""

    def __init__(self, executor: LaneExecutor) -> None:
        self.executor = executor
        self.ledger = BatchLedger(executor.store)
        self.holder = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._apis: dict[str, BatchAPI] = {}

    # -- parking -------------------------------------------------------------------------

    async def park(self, calls: Sequence[Call]) -> int:
        """Hand ``calls`` to the batch lane (their rows stay running, under a long lease)."""
        parked = [
            Parked(
                uuid.uuid4().hex,
                c.rows[0].run_id,
                c.config.name,
                [r.id for r in c.rows],
                c.key,
                request_of(c),
                tokens_of(c),
            )
            for c in calls
        ]
        until = utcnow() + timedelta(seconds=PARK_SECONDS)
        return await asyncio.to_thread(self.ledger.park, parked, until)

    # -- the periodic pass ---------------------------------------------------------------

    @property
    def lease_seconds(self) -> float:
        config = self.executor.config
        return max(config.lease_seconds, 3 * config.batch_poll)

    async def hold(self) -> bool:
        """Take or renew the lane's lease: whether this process runs the lane now."""
        return await asyncio.to_thread(
            self.ledger.take_lease, LEASE_NAME, self.holder, self.lease_seconds
        )

    async def tick(self, *, flush: bool = False, run_id: int | None = None) -> None:
        """One pass over every open (run, judge) (``run_id``: that run's only); ``flush``
        submits planned calls without waiting for more."""
        for run, judge in await asyncio.to_thread(self.ledger.open_judges):
            if run_id is not None and run != run_id:
                continue
            if not await self.hold():  # lost it (stalled longer than the lease): stop
                return
            try:
                await self._judge_pass(run, judge, flush)
            except JudgeError as err:  # the provider is away: the next pass tries again
                log.warning("run %s judge %s: batch pass stopped: %s", run, judge, err)

    async def drain(self, run_id: int, poll: float, stop: Callable[[], bool]) -> None:
        """Pass until the run has no open batch call (an in-process run: no more calls
        will come, so planned ones are submitted at once)."""
        while not stop():
            if await self.hold():
                await self.tick(flush=True, run_id=run_id)
            states = await asyncio.to_thread(self.ledger.call_states, run_id)
            if not states.get(PLANNED) and not states.get(SUBMITTED):
                return
            await asyncio.sleep(poll)

    async def _judge_pass(self, run_id: int, judge: str, flush: bool) -> None:
        context = await self.executor.run_context(run_id)
        if context is None or judge not in context.judges:
            return
        config = context.judges[judge]
        api = self._api(config)
        for batch in await asyncio.to_thread(self.ledger.open_batches, run_id):
            if batch.judge != judge:
                continue
            if batch.state == CREATED:
                await self._heal(api, batch)
            elif batch.provider_id is not None:
                await self._poll(api, batch)
        await self._submit_due(api, config, run_id, flush)

    def _api(self, config: JudgeConfig) -> BatchAPI:
        api = self._apis.get(config.spec)
        if api is None:
            api = self._apis[config.spec] = batch_api(self.executor.judge(config))
        return api

    # -- submitting ----------------------------------------------------------------------

    async def _submit_due(
        self, api: BatchAPI, config: JudgeConfig, run_id: int, flush: bool
    ) -> None:
        size = min(config.batch_max_size or api.max_batch_size, api.max_batch_size)
        while True:
            planned = await asyncio.to_thread(self.ledger.planned, run_id, config.name, size)
            if not planned:
                return
            waited = (utcnow() - planned[0].created_at).total_seconds()
            wait = config.batch_max_wait if config.batch_max_wait is not None else DEFAULT_MAX_WAIT
            if not (flush or len(planned) >= size or waited >= wait):
                return
            chosen = planned
            if config.batch_max_tokens:
                queued = await asyncio.to_thread(self.ledger.queued_tokens, run_id, config.name)
                chosen = within_tokens(planned, config.batch_max_tokens - queued, queued == 0)
                if not chosen:
                    return  # the queue is full: wait for a batch to end
            await self._submit(api, config, run_id, chosen)

    async def _submit(
        self, api: BatchAPI, config: JudgeConfig, run_id: int, chosen: list[OpenCall]
    ) -> None:
        tag = uuid.uuid4().hex
        provider = config.spec.partition("/")[0]
        taken = set(
            await asyncio.to_thread(
                self.ledger.create_batch, tag, run_id, config.name, provider, [c.id for c in chosen]
            )
        )
        requests = [
            BatchRequest(
                c.uid, from_data(c.request["messages"]), generate_of(c.request["generate"])
            )
            for c in chosen
            if c.id in taken
        ]
        if not requests:
            return
        try:
            status = await api.submit_batch(tag, requests)
        except JudgeError as err:
            if err.reason in DEFINITE:  # refused: nothing is at the provider
                await self._close_failed(tag, f"refused: {err.detail}")
            else:  # maybe accepted: found again by its tag on a later pass
                log.warning("batch %s: submitted, answer not known (%s)", tag, err)
            return
        await self._record(tag, status)
        await self._tell(run_id, config.name, "submitted", len(requests))
        log.info(
            "batch %s of judge %s: %d calls submitted as %s",
            tag,
            config.name,
            len(requests),
            status.batch_id,
        )

    async def _record(self, tag: str, status: BatchStatus) -> None:
        await asyncio.to_thread(
            self.ledger.record,
            tag,
            status.batch_id,
            status.state,
            succeeded=status.succeeded,
            failed=status.failed,
            expires_at=status.expires_at,
            files=status.files,
        )

    async def _tell(self, run_id: int, judge: str, state: str, size: int) -> None:
        """Tell the observers (workers/events.py) a batch of ``judge`` changed state, with
        the run's batches of that judge by state as the ledger has them now."""
        if not events.OBSERVERS:
            return
        summary = await asyncio.to_thread(self.ledger.summary, run_id)
        counts = summary.get(judge, {}).get("batches", {})
        events.emit(
            events.BatchStateChanged(run_id, judge, state, size, tuple(sorted(counts.items())))
        )

    # -- healing and polling -------------------------------------------------------------

    async def _heal(self, api: BatchAPI, batch: BatchInfo) -> None:
        found = await api.find_batch(batch.uid, batch.created_at, batch.size)
        if found.batch_id is not None:
            log.warning(
                "batch %s: found at the provider as %s (its id had not been recorded)",
                batch.uid,
                found.batch_id,
            )
            await self._record(batch.uid, await api.poll_batch(found.batch_id))
        elif found.settled:
            await self._close_failed(batch.uid, "the provider never received it")

    async def _poll(self, api: BatchAPI, batch: BatchInfo) -> None:
        assert batch.provider_id is not None
        status = await api.poll_batch(batch.provider_id)
        await self._record(batch.uid, status)
        if status.phase == "failed":
            await self._close_failed(batch.uid, f"the provider failed it ({status.state})")
        elif status.phase == "ended":
            await self._collect(api, batch)

    async def _close_failed(self, tag: str, detail: str) -> None:
        calls = await asyncio.to_thread(self.ledger.calls_of, tag)
        open_ = [c for c in calls if c.state == SUBMITTED]
        await self._requeue(open_, detail)
        await asyncio.to_thread(self.ledger.end_batch, tag, FAILED, detail)
        if calls:
            await self._tell(calls[0].run_id, calls[0].judge, FAILED, len(calls))

    async def _requeue(self, calls: Sequence[OpenCall], detail: str) -> None:
        """Plan ``calls`` again; those out of tries fail their rows."""
        gone = await asyncio.to_thread(
            self.ledger.requeue, [c.uid for c in calls], detail, MAX_TRIES
        )
        for call in gone:
            rows = await asyncio.to_thread(
                self.ledger.retake, call.rows, self.executor.config.lease_seconds
            )
            err = JudgeError(
                FailureReason.PROVIDER_ERROR,
                f"no answer after {MAX_TRIES} provider batches: {detail}",
            )
            outcomes = failed(rows, err)
            await self.executor.writer.write(outcomes=outcomes)
            if events.OBSERVERS:
                events.emit_written(outcomes, rows)

    # -- collecting ----------------------------------------------------------------------

    async def _collect(self, api: BatchAPI, batch: BatchInfo) -> None:
        assert batch.provider_id is not None
        results = await api.batch_results(batch.provider_id)
        calls = [
            c
            for c in await asyncio.to_thread(self.ledger.calls_of, batch.uid)
            if c.state == SUBMITTED
        ]
        answered = [c for c in calls if isinstance(results.get(c.uid), JudgeOutput)]
        unanswered = [c for c in calls if not isinstance(results.get(c.uid), JudgeOutput)]
        await self._keep_duplicates(batch, calls, results)
        for call in unanswered:  # each with its own reason
            got = results.get(call.uid)
            why = got.detail if isinstance(got, JudgeError) else "missing from the results"
            await self._requeue([call], why)
        summary = BatchSummary()
        await asyncio.gather(
            *(
                self._judge_answer(c, results[c.uid], summary)  # type: ignore[arg-type]
                for c in answered
            )
        )
        await asyncio.to_thread(self.ledger.mark_collected, [c.uid for c in answered])
        await asyncio.to_thread(self.ledger.end_batch, batch.uid, COLLECTED_BATCH)
        await self._tell(batch.run_id, batch.judge, COLLECTED_BATCH, batch.size)
        log.info(
            "batch %s: %d answers collected, %d planned again",
            batch.uid,
            len(answered),
            len(unanswered),
        )

    async def _keep_duplicates(
        self, batch: BatchInfo, calls: Sequence[OpenCall], results: BatchResults
    ) -> None:
        """The answers the provider returned beyond the first of a request: each was paid
        for, so each is stored as a call of its own (``finish`` ``duplicate``, never read
        nor replayed), at the judge's batch price; its uid (the call's, numbered) makes a
        collection made again store it once."""
        ours = {c.uid: c for c in calls}
        extra = [(uid, out) for uid, out in results.duplicates if uid in ours]
        context = await self.executor.run_context(batch.run_id) if extra else None
        if context is None or batch.judge not in context.judges:
            return
        config, seen = context.judges[batch.judge], Counter[str]()
        provider = config.spec.partition("/")[0]
        records = []
        for uid, output in extra:
            seen[uid] += 1
            asked = Request.of_parked(ours[uid].request, provider)  # its usage is checked
            keys = CallKeys(batch.run_id, f"{uid}-{seen[uid]}", ours[uid].cache_key)
            record = answer_record(config, keys, output, False, asked, batch=True)
            records.append(replace(record, finish=DUPLICATE))
        await self.executor.writer.write(calls=records)
        log.warning(
            "batch %s of judge %s: the provider returned %d more answers than "
            "requests; the first answer of each request is read, the others are "
            "stored as paid duplicates",
            batch.uid,
            batch.judge,
            len(records),
        )

    async def _judge_answer(
        self, call: OpenCall, output: JudgeOutput, summary: BatchSummary
    ) -> None:
        """Judge a batch answer through the executor's own path, as a prepaid answer."""
        ex = self.executor
        context = await ex.run_context(call.run_id)
        if context is None:
            return
        taken = await asyncio.to_thread(self.ledger.retake, call.rows, ex.config.lease_seconds)
        by_id = {r.id: r for r in taken}
        if not by_id:
            return  # done since, or its run was deleted
        ex.leases.hold(by_id)
        try:
            groups = await ex._group([list(by_id)], by_id, context, summary)
            prepared = await ex._prepare(groups, context, summary)
            for p in prepared:  # the parked call, rendered again the same way
                if len(prepared) == 1 or to_data(p.messages) == call.request["messages"]:
                    p.prepaid = Answer(
                        output.text, output.finish, call.uid, output, 0.0, p.key, batch=True
                    )
                    break
            await asyncio.gather(*(ex._run_call(p, None, summary) for p in prepared))
        finally:
            ex.leases.release(by_id)
