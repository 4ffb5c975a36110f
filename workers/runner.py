"""The executor: turn a batch of ledger ids into judgments. Same code in-process and in
Celery workers.

Per batch: read the run's stored configuration (a worker trusts no message beyond what the
ledger confirms), claim the rows of that run (so a duplicate delivery does not pay twice),
check that the rows of each call share run, models, instance and judge (what does not
match is refused, logged and given back, never judged), render every call's prompt through
the run's grading protocol and look all of them up in the answer cache at once. Per call:
reuse a cached answer or ask the judge (one retry loop, ours); an answer cut off by its
token limit is never read (asked once more with a larger budget if the judge has one, else
failed as ``truncated``): workers/asking.py; read it criterion by criterion, keep the
valid scores, and ask once more, with a format reminder, only for the criteria it missed.
Every paid answer is written as its own row, with the outcomes. Every row claimed ends
done or failed with a reason, unless it stops being this worker's before its request is
sent (workers/leases.py): then this worker writes nothing for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import replace

from flask_eval.core import logs
from flask_eval.core.errors import (
    ConfigError,
    CredentialsError,
    FailureReason,
    FlaskEvalError,
    JudgeError,
    Status,
)
from flask_eval.core.redact import redact
from flask_eval.core.stored import StoredConfig
from flask_eval.core.types import JudgeConfig
from flask_eval.producer.context import RunContext
from flask_eval.rubrics.echo import template_of, template_text, without_echoes
from flask_eval.storage.records import CallRecord, JobContext, Outcome
from flask_eval.storage.retry import is_transient
from flask_eval.storage.store import Store
from flask_eval.workers import events
from flask_eval.workers.asking import Asker, keep
from flask_eval.workers.batch_lane import BatchLane
from flask_eval.workers.calls import BatchSummary, Call, done, failed, subject_texts
from flask_eval.workers.context import cache_key, generate_config
from flask_eval.workers.executor_config import ExecutorConfig as ExecutorConfig  # re-exported
from flask_eval.workers.executor_config import executor_config as executor_config  # re-exported
from flask_eval.workers.feed import Ticket
from flask_eval.workers.halts import HaltWatch
from flask_eval.workers.image_cache import ImageCache
from flask_eval.workers.judge import Judge
from flask_eval.workers.leases import Leases
from flask_eval.workers.limiter import Budget, Limiter, NullLimiter
from flask_eval.workers.sender import Halted, Sender
from flask_eval.workers.spool import Spool
from flask_eval.workers.subject import job_subject
from flask_eval.workers.writer import WriteBehind

log = logging.getLogger("flask_eval.worker")


#: a lease longer than this is the batch lane's (workers/batch_lane.py), not a worker's
PARKED_LEASE = 86_400.0


class RunNotFound(FlaskEvalError):
    """A message names a run this worker's database does not have."""


class Executor:
    """Runs judge calls for one process; create it on the loop that will use it."""

    def __init__(
        self, store: Store, config: ExecutorConfig, limiter: Limiter | None = None
    ) -> None:
        self.store = store
        self.config = config
        self.limiter: Limiter = limiter or NullLimiter()
        self._leases = Leases(store, config.lease_seconds)
        self._contexts: dict[int, tuple[str, RunContext]] = {}
        self.halts = HaltWatch(store, config.halt_after)
        self.sender = Sender(
            config.in_flight, self.limiter, self.halts, config.max_attempts, config.adaptive
        )
        url = store.engine.url.render_as_string(hide_password=False)
        spool = Spool(config.spool_dir, url) if config.spool_dir is not None else None
        if spool is not None:
            spool.replay(store)
        # a flush starts at once when every call in flight is waiting on it
        self.writer = WriteBehind(store, max_items=config.in_flight, spool=spool)
        self.batches = BatchLane(self)
        self._asker = Asker(store, self.sender, self._leases)
        self._images = ImageCache(store)

    def judge(self, config: JudgeConfig) -> Judge:
        return self.sender.judge(config)

    @property
    def leases(self) -> Leases:
        """The rows this process holds, and whether it may still pay for them."""
        return self._leases

    async def aclose(self) -> None:
        self._leases.stop()
        await self.sender.aclose()

    async def run_context(self, run_id: int) -> RunContext | None:
        """The run's configuration as stored now (budgets and prices may have changed
        since the last message); None for a deleted run. RunNotFound if unknown."""
        text = await asyncio.to_thread(self.store.run_config_text, run_id)
        if text is None:
            if await asyncio.to_thread(self.store.is_deleted, run_id):
                return None
            raise RunNotFound(
                f"run {run_id} is not in this worker's database "
                f"({redact(self.store.engine.url.render_as_string(hide_password=True))}); "
                "point the workers at the producer's FLASK_EVAL_DATABASE_URL"
            )
        known = self._contexts.get(run_id)
        if known is not None and known[0] == text:
            return known[1]
        context = RunContext.from_config(StoredConfig.from_text(text))
        for judge in context.judges.values():
            if judge.rpm or judge.tpm:
                key = self.judge(judge).budget_key()
                self.limiter.register(key, Budget(rpm=judge.rpm, tpm=judge.tpm))
        self._contexts[run_id] = (text, context)
        return context

    async def run_batch(self, run_id: int, calls: Sequence[Sequence[int]]) -> BatchSummary:
        """Judge ``calls`` (lists of ledger ids, one list per judge call) of run ``run_id``."""
        summary = BatchSummary()
        logs.set_context(run=run_id)  # this batch's task: its log lines name the run
        context = await self.run_context(run_id)
        wanted = list(dict.fromkeys(i for call in calls for i in call))
        if context is None:  # a deleted run: its queued messages are dropped
            summary.skipped = len(wanted)
            return summary
        ticket = await self.sender.feed.enter(len(calls))  # claim only what lanes start soon
        try:
            return await self._run_batch(run_id, calls, context, wanted, summary, ticket)
        finally:
            ticket.arrived()

    async def _run_batch(
        self,
        run_id: int,
        calls: Sequence[Sequence[int]],
        context: RunContext,
        wanted: list[int],
        summary: BatchSummary,
        ticket: Ticket,
    ) -> BatchSummary:
        self.halts.learn(run_id, await asyncio.to_thread(self.store.halts, run_id))
        claimed = await asyncio.to_thread(
            self.store.claim_contexts, run_id, wanted, self.config.lease_seconds
        )
        by_id = {c.id: c for c in claimed}
        summary.skipped = len(wanted) - len(by_id)
        if summary.skipped:
            unclaimed = [i for i in wanted if i not in by_id]
            summary.leased, summary.lease_wait = await asyncio.to_thread(
                self.store.leased, run_id, unclaimed
            )
            if summary.lease_wait > PARKED_LEASE:  # the batch lane's rows: it ends them
                summary.leased, summary.lease_wait = [], 0.0
        self._leases.hold(by_id)
        try:
            groups = await self._group(calls, by_id, context, summary)
            prepared = await self._prepare(groups, context, summary)
            cached = await asyncio.to_thread(self.store.cached_calls, [p.key for p in prepared])
            prepared = await self._park(prepared, cached, by_id)
            ticket.arrived()  # queued from here on: the next batch may claim
            results = await asyncio.gather(
                *(self._run_call(p, cached.get(p.key), summary) for p in prepared),
                return_exceptions=True,
            )
            outage: BaseException | None = None
            for call, result in zip(prepared, results, strict=True):
                if not isinstance(result, BaseException):
                    continue
                if is_transient(result):  # the database is away: not our bug; redelivered
                    outage = result
                    continue
                log.error(
                    "internal error judging rows %s", [c.id for c in call.rows], exc_info=result
                )
                err = JudgeError(FailureReason.INTERNAL, f"{type(result).__name__}: {result}")
                await self._finish(summary, call, failed(call.rows, err))
            if outage is not None:
                raise outage
        finally:
            self._leases.release(by_id)
        return summary

    async def _group(
        self,
        calls: Sequence[Sequence[int]],
        by_id: dict[int, JobContext],
        context: RunContext,
        summary: BatchSummary,
    ) -> list[list[JobContext]]:
        """The message's calls, as far as the ledger confirms them: the rows of a call must
        share run, models, instance and judge and name distinct criteria, and no row may
        appear in two calls; each confirmed group is split as the run's protocol says."""
        groups: list[list[JobContext]] = []
        refused: list[int] = []
        used: set[int] = set()
        for call in calls:
            rows = [by_id[i] for i in dict.fromkeys(call) if i in by_id]
            if not rows:
                continue
            ids = {r.id for r in rows}
            if (
                len({r.subject_key for r in rows}) > 1
                or len({r.criterion for r in rows}) < len(rows)
                or ids & used
            ):
                refused += [r.id for r in rows if r.id not in used]
                continue
            used |= ids
            by_name = {r.criterion: r for r in rows}
            protocol = context.protocol_for(rows[0].judge)
            groups += [[by_name[c] for c in part] for part in protocol.calls(list(by_name))]
        if refused:
            log.error(
                "refused a message of run %s: its call of rows %s does not match the ledger "
                "(rows of one call must share run, model, instance and judge)",
                next(iter(by_id.values())).run_id,
                refused[:20],
            )
            await asyncio.to_thread(self.store.release, refused)
            summary.refused += len(refused)
        return groups

    async def _prepare(
        self, groups: list[list[JobContext]], context: RunContext, summary: BatchSummary
    ) -> list[Call]:
        prepared = []
        wanted = {i.sha256 for rows in groups for i in rows[0].images}
        images = (
            await asyncio.to_thread(self._images.images, groups[0][0].run_id, wanted)
            if wanted
            else {}
        )
        unjudged: list[Outcome] = []  # one write for the batch, not one per call (each alone
        # waits out the write-behind window: 0.1 s a call, minutes for a halted judge)
        unjudged_rows: list[JobContext] = []
        for rows in groups:
            first = rows[0]
            unjudged_rows += rows  # those judged are written by their call, not here
            halt = self.halts.halted(first.run_id, first.judge)
            if halt is not None:
                unjudged += failed(rows, JudgeError(FailureReason.HALTED, halt.detail))
                continue
            try:
                config = context.judges[first.judge]
                judge = self.judge(config)
                protocol = context.protocol_for(first.judge)
                criteria = [context.criterion(r.criterion, r.rubrics) for r in rows]
            except CredentialsError as exc:
                unjudged += failed(rows, JudgeError(FailureReason.AUTH, str(exc)))
                continue
            except (ConfigError, KeyError) as exc:
                reason = (
                    FailureReason.INTERNAL if isinstance(exc, KeyError) else FailureReason.CONFIG
                )
                unjudged += failed(rows, JudgeError(reason, redact(str(exc))))
                continue
            missing = [i.sha256[:12] for i in first.images if i.sha256 not in images]
            if missing:  # the ledger names an image it does not hold: never judged without it
                detail = f"the run's ledger holds no image {', '.join(missing)}"
                unjudged += failed(rows, JudgeError(FailureReason.INTERNAL, detail))
                continue
            subject = job_subject(context, first, images)
            try:
                messages, schema = context.prompt(first.judge, subject, criteria)
            except (ValueError, KeyError) as exc:  # a call its protocol refuses to render
                detail = f"the call's prompt cannot be rendered: {exc}"
                unjudged += failed(rows, JudgeError(FailureReason.CONFIG, redact(detail)))
                continue
            generate = generate_config(config, self.config.timeout, schema)
            key = cache_key(judge.name, messages, generate)
            prepared.append(Call(rows, config, judge, protocol, criteria, messages, generate, key))
        if unjudged:
            await self._write_outcomes(summary, unjudged, rows=unjudged_rows)
        return prepared

    async def _park(
        self, prepared: list[Call], cached: dict[str, CallRecord], by_id: dict[int, JobContext]
    ) -> list[Call]:
        """Hand the calls of batch judges that the cache cannot answer to the batch lane
        (workers/batch_lane.py); the calls to judge here."""
        parked = [
            p for p in prepared if p.config.batch and not (p.key in cached and cached[p.key].parsed)
        ]
        if not parked:
            return prepared
        rows = [r.id for p in parked for r in p.rows]
        self._leases.release(rows)  # the lane's long lease, not this worker's, from here
        for i in rows:
            by_id.pop(i, None)
        await self.batches.park(parked)
        gone = {id(p) for p in parked}
        return [p for p in prepared if id(p) not in gone]

    # -- one call ----------------------------------------------------------------------

    async def _run_call(self, call: Call, cached: CallRecord | None, summary: BatchSummary) -> None:
        # each call is its own task: the lines it logs name its run, judge and prompt
        logs.set_context(run=call.rows[0].run_id, judge=call.config.name, call=call.key[:16])
        rows = {r.criterion: r for r in call.rows}
        outcomes: list[Outcome] = []
        first = await self._asker.whole(call, call.rows, call.messages, call.key, cached, summary)
        if isinstance(first, JudgeError):
            await self._finish(summary, call, failed(call.rows, first))
            return
        template = template_of(template_text(call.messages, subject_texts(call.rows[0])))
        reading = without_echoes(call.protocol.read(first.text, call.criteria), template)
        keep(call, first, reading)
        outcomes += done(rows, reading, first.uid)
        missing = [c for c in call.criteria if c.name in reading.problems]
        if missing:
            again = [
                *call.messages,
                *call.protocol.reminder(
                    first.text, missing, reading.problems, read=list(reading.scores)
                ),
            ]
            key = cache_key(call.judge.name, again, call.generate)
            hit = (await asyncio.to_thread(self.store.cached_calls, [key])).get(key)
            left = [rows[c.name] for c in missing]
            second = await self._asker.whole(call, left, again, key, hit, summary)
            if isinstance(second, Halted):  # no reminder: the answer's own failure stands
                for c in missing:
                    detail = f"{reading.problems[c.name]}; no reminder sent: the judge was halted"
                    err = JudgeError(FailureReason.UNPARSEABLE, detail)
                    outcomes += failed([rows[c.name]], err, first.uid)
            elif isinstance(second, JudgeError):
                outcomes += failed(left, second, first.uid)
            else:
                retry = without_echoes(call.protocol.read(second.text, missing), template)
                keep(call, second, retry)
                outcomes += done(rows, retry, second.uid)
                for c in missing:
                    if c.name in retry.problems:
                        detail = (
                            f"{reading.problems[c.name]}; after a format reminder: "
                            f"{retry.problems[c.name]}"
                        )
                        err = JudgeError(FailureReason.UNPARSEABLE, detail)
                        outcomes += failed([rows[c.name]], err, second.uid)
        await self._finish(summary, call, outcomes)

    async def _finish(self, summary: BatchSummary, call: Call, outcomes: list[Outcome]) -> None:
        """Write the call's paid answers and its rows' ends together; then see whether its
        judge has to be halted."""
        outcomes = [
            replace(o, asks=call.asks.get(o.id, 0), requests=call.requests.get(o.id, 0))
            for o in outcomes
        ]
        first = call.rows[0]
        trips = self.halts.observe(first.run_id, first.judge, outcomes)
        await self._write_outcomes(summary, outcomes, call.paid, call.rows)
        call.paid = []
        if trips:
            await self.halts.decide(first.run_id, first.judge)

    async def _write_outcomes(
        self,
        summary: BatchSummary,
        outcomes: list[Outcome],
        paid: Sequence[CallRecord] = (),
        rows: Sequence[JobContext] = (),
    ) -> None:
        """Write ``outcomes`` (of ``rows``) with the ``paid`` answers, then tell the
        observers (workers/events.py)."""
        self._leases.ending(o.id for o in outcomes)  # finished here, not taken away
        await self.writer.write(calls=paid, outcomes=outcomes)
        for o in outcomes:
            if o.status == Status.DONE:
                summary.done += 1
            else:
                summary.failed += 1
        if events.OBSERVERS and outcomes:
            events.emit_written(outcomes, rows)
