"""Asking a judge for one call's whole answer: a provider batch's prepaid answer, a cached
one that was read, or a new one from the judge through the sender; an answer cut off by
its token limit is asked once more with the judge's larger budget (``retry_max_tokens``);
one that is not whole is never read. Every new paid answer becomes its own call row
(:func:`keep`). The executor (workers/runner.py) reads the answers and asks again, with a
format reminder, for the criteria an answer missed."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace

from flask_eval.core.errors import FailureReason, JudgeError
from flask_eval.rubrics.parse import Reading
from flask_eval.rubrics.prompt import Message
from flask_eval.storage.records import CallRecord, JobContext
from flask_eval.storage.store import Store
from flask_eval.workers import events
from flask_eval.workers.calls import DETAIL_LIMIT, Answer, BatchSummary, Call, Failure, paid_record
from flask_eval.workers.context import cache_key
from flask_eval.workers.judge import CUT_OFF, FINISHED, REFUSAL, GenerateConfig, not_read
from flask_eval.workers.leases import Leases
from flask_eval.workers.sender import Halted, Sender


def keep(call: Call, answer: Answer, reading: Reading | None) -> None:
    """A new paid answer becomes its own call row; read ones may be replayed."""
    output = answer.output
    if output is None:
        return
    call.paid.append(
        paid_record(
            call, answer, output, reading is not None and bool(reading.scores), answer.batch
        )
    )


class Asker:
    """Gets the executor's calls their answers (one per process, beside its executor)."""

    def __init__(self, store: Store, sender: Sender, leases: Leases) -> None:
        self.store = store
        self.sender = sender
        self.leases = leases

    async def whole(
        self,
        call: Call,
        rows: Sequence[JobContext],
        messages: list[Message],
        key: str,
        cached: CallRecord | None,
        summary: BatchSummary,
    ) -> Answer | JudgeError:
        """A whole answer, or the error that ends these rows (a refusal, or
        ``workers.judge.not_read``). An answer cut off by max_tokens is asked once more
        with the judge's larger budget (``retry_max_tokens``) if it has one; an answer
        that is not whole is never read, but by a protocol that keeps cut-off answers (a
        generation: the response is kept, its call row's ``finish`` says it was cut off)."""
        answer = await self.ask(call, rows, messages, key, call.generate, cached, summary)
        if isinstance(answer, JudgeError):
            return answer
        bigger = call.config.retry_max_tokens
        if answer.finish == CUT_OFF and bigger and bigger > call.generate.max_tokens:
            keep(call, answer, None)
            generate = replace(call.generate, max_tokens=bigger)
            key = cache_key(call.judge.name, messages, generate)
            hit = (await asyncio.to_thread(self.store.cached_calls, [key])).get(key)
            retried = await self.ask(call, rows, messages, key, generate, hit, summary)
            if isinstance(retried, Halted):  # not asked again: the cut-off answer's failure
                return Failure(
                    FailureReason.TRUNCATED,
                    "the answer was cut off by its token "
                    "limit (max_tokens) and was not read; not asked again with a "
                    "larger budget: the judge was halted",
                    answer.uid,
                )
            if isinstance(retried, JudgeError):
                return retried
            answer = retried
        if answer.finish == FINISHED or (answer.finish == CUT_OFF and call.protocol.keeps_cut_off):
            return answer  # a cut-off response is kept: its call row's finish marks it
        keep(call, answer, None)
        if answer.finish == REFUSAL:
            what = f": {answer.text[:DETAIL_LIMIT]}" if answer.text else " (no text)"
            return Failure(FailureReason.REFUSED, f"the judge refused{what}", answer.uid)
        unread = not_read(answer.finish, answer.output.stop_reason if answer.output else "")
        return Failure(unread.reason, unread.detail, answer.uid)

    async def ask(
        self,
        call: Call,
        rows: Sequence[JobContext],
        messages: list[Message],
        key: str,
        generate: GenerateConfig,
        cached: CallRecord | None,
        summary: BatchSummary,
    ) -> Answer | JudgeError:
        """A cached answer that was read, or a new one from the judge."""
        if call.prepaid is not None and key == call.key:  # a provider batch's answer
            answer, call.prepaid = call.prepaid, None
            call.begun = True
            call.count(rows, 1)
            if events.OBSERVERS and answer.output is not None:
                events.emit(
                    events.answered(call.rows[0].run_id, call.config, answer.output, "batch")
                )
            return answer
        if cached is not None and cached.parsed:
            summary.cache_hits += 1
            call.count(rows, 0)
            if events.OBSERVERS:
                events.emit(events.CallAnswered(call.rows[0].run_id, call.config.name, "cache"))
            return Answer(cached.raw, cached.finish, cached.uid, None)
        started = time.perf_counter()
        run_id = call.rows[0].run_id
        output, requests = await self.sender.generate(
            call.config,
            run_id,
            messages,
            generate,
            urgent=call.begun,
            guard=self.leases.guard(run_id, rows),
        )
        call.begun = True
        call.count(rows, requests)
        summary.calls += requests
        if isinstance(output, JudgeError):
            return output
        latency = (time.perf_counter() - started) * 1000
        return Answer(
            output.text,
            output.finish,
            uuid.uuid4().hex,
            output,
            latency,
            key,
            messages=messages,
            max_tokens=generate.max_tokens,
        )
