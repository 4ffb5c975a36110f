"""The executor: turn a batch of ledger ids into judgments. Same code in-process and in
Celery workers.

Per batch: claim the rows (so a duplicate delivery does not pay twice) and load what
they are about, render every call's prompt, and look all of them up in the answer cache
at once. Per call: reuse a cached answer or ask the judge (one retry loop, ours), parse,
ask once more with a format reminder if the answer is unparseable, and write the paid
answer and the outcome together. Every row claimed ends done or failed with a reason;
nothing is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from flask_eval.exceptions import FlaskEvalError, JudgeError
from flask_eval.redact import redact
from rubrics.parse import parse
from rubrics.prompt import estimate_tokens, reminder, render
from rubrics.skills import Skill
from storage.models import FailureReason, Status
from storage.records import CallRecord, JobContext, Outcome
from storage.store import Store
from workers.context import RunContext, cache_key
from workers.endpoints import JudgeConfig
from workers.errors import classify
from workers.judge import GenerateConfig, Judge, JudgeOutput, Message, create_judge
from workers.lanes import Lanes
from workers.limiter import Budget, Limiter, NullLimiter, endpoint_key
from workers.writer import WriteBehind

log = logging.getLogger("flask_eval.worker")

RATIONALE_LIMIT = 8_000
#: where each provider's SDK finds its API key (fingerprinted into the budget key)
_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


@dataclass(frozen=True)
class ExecutorConfig:
    in_flight: int = 256
    #: a claimed row stays leased while its worker lives: renewed every lease/3 seconds
    lease_seconds: float = 60.0
    generate: GenerateConfig = field(default_factory=GenerateConfig)
    max_attempts: int | None = None  # None: each judge's own default


@dataclass
class BatchSummary:
    done: int = 0
    failed: int = 0
    skipped: int = 0  # already done, or owned by another live delivery
    calls: int = 0  # provider calls made (cache hits excluded)
    cache_hits: int = 0


@dataclass(frozen=True)
class _Call:
    """One judge call, ready to send."""

    rows: list[JobContext]
    config: JudgeConfig
    judge: Judge
    skills: list[Skill]
    messages: list[Message]
    key: str


Answer = tuple[str, dict[str, int | None] | None, str, CallRecord | None]


class Executor:
    """Runs judge calls for one process; create it on the loop that will use it."""

    def __init__(
        self, store: Store, config: ExecutorConfig, limiter: Limiter | None = None
    ) -> None:
        self.store = store
        self.config = config
        self.limiter: Limiter = limiter or NullLimiter()
        self._budget_keys: dict[str, str] = {}  # judge spec -> endpoint budget key
        self._judges: dict[str, Judge] = {}
        self._judge_slots: dict[str, asyncio.Semaphore] = {}
        self._lanes = Lanes(config.in_flight)
        self._owned: dict[int, int] = {}  # row id -> batches holding it
        self._heartbeat: asyncio.Task[None] | None = None
        # a flush starts at once when every call in flight is waiting on it
        self._writer = WriteBehind(store, max_items=config.in_flight)

    def judge(self, config: JudgeConfig) -> Judge:
        """One client per judge endpoint and process, reused by every batch."""
        if config.spec not in self._judges:
            limit = min(self.config.in_flight, config.max_in_flight or self.config.in_flight)
            judge = create_judge(config.spec, max_connections=limit)
            if self.config.max_attempts is not None:
                judge.max_attempts = self.config.max_attempts
            self._judges[config.spec] = judge
        return self._judges[config.spec]

    def _endpoint_slots(
        self, config: JudgeConfig
    ) -> contextlib.AbstractAsyncContextManager[object]:
        if config.max_in_flight is None:
            return contextlib.nullcontext()
        if config.spec not in self._judge_slots:
            self._judge_slots[config.spec] = asyncio.Semaphore(config.max_in_flight)
        return self._judge_slots[config.spec]

    def budget_key(self, judge: Judge, config: JudgeConfig) -> str:
        """The shared budget of the endpoint: provider, model, base URL and API key."""
        if config.spec not in self._budget_keys:
            spec = judge.spec
            env = _KEY_ENV.get(spec.provider)
            key = endpoint_key(spec.provider, spec.model, spec.base_url, os.environ.get(env or ""))
            if config.rpm or config.tpm:
                self.limiter.register(key, Budget(rpm=config.rpm, tpm=config.tpm))
            self._budget_keys[config.spec] = key
        return self._budget_keys[config.spec]

    async def aclose(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            self._heartbeat = None
        await self._lanes.aclose()
        for judge in self._judges.values():
            await judge.aclose()
        self._judges.clear()
        await self.limiter.aclose()

    async def run_batch(self, calls: Sequence[Sequence[int]], run: RunContext) -> BatchSummary:
        """Judge ``calls`` (lists of ledger ids, one list per judge call)."""
        summary = BatchSummary()
        wanted = [i for call in calls for i in call]
        contexts = await asyncio.to_thread(
            self.store.claim_contexts, wanted, self.config.lease_seconds
        )
        by_id = {c.id: c for c in contexts}
        summary.skipped = len(wanted) - len(by_id)
        self._hold(set(by_id))
        try:
            groups = [[by_id[i] for i in call if i in by_id] for call in calls]
            prepared = await self._prepare([g for g in groups if g], run, summary)
            cached = await asyncio.to_thread(self.store.cached_calls, [p.key for p in prepared])
            results = await asyncio.gather(
                *(self._run_call(p, cached.get(p.key), summary) for p in prepared),
                return_exceptions=True,
            )
            for call, result in zip(prepared, results, strict=True):
                if isinstance(result, BaseException):  # a bug: record it, never drop the rows
                    log.error(
                        "internal error judging rows %s", [c.id for c in call.rows], exc_info=result
                    )
                    err = JudgeError(
                        FailureReason.INTERNAL, redact(f"{type(result).__name__}: {result}")
                    )
                    await self._finish(summary, _failed(call.rows, err))
        finally:
            self._release(set(by_id))
        return summary

    async def _prepare(
        self, groups: list[list[JobContext]], run: RunContext, summary: BatchSummary
    ) -> list[_Call]:
        prepared, failures = [], []
        for rows in groups:
            first = rows[0]
            try:
                config = run.judges[first.judge]
                judge = self.judge(config)
                skills = [run.skillset.get(c.skill) for c in rows]
            except (FlaskEvalError, KeyError) as exc:
                is_config = isinstance(exc, FlaskEvalError)
                reason = FailureReason.AUTH if is_config else FailureReason.INTERNAL
                failures += _failed(rows, JudgeError(reason, redact(str(exc))))
                continue
            messages = render(
                instruction=first.instruction,
                reference=first.reference,
                response=first.response,
                skills=skills,
            )
            key = cache_key(judge.name, messages, self.config.generate)
            prepared.append(_Call(rows, config, judge, skills, messages, key))
        if failures:
            await self._finish(summary, failures)
        return prepared

    async def _run_call(
        self, call: _Call, cached: CallRecord | None, summary: BatchSummary
    ) -> None:
        first = await self._answer(call, call.messages, call.key, cached, summary)
        if isinstance(first, JudgeError):
            await self._finish(summary, _failed(call.rows, first))
            return
        text, scores, key, paid = first
        if scores is None:  # unparseable: keep the paid answer, ask once more with a reminder
            if paid is not None:
                await self._writer.write(calls=[paid])
            retry = [*call.messages, *reminder(text, call.skills)]
            retry_key = cache_key(call.judge.name, retry, self.config.generate)
            hit = (await asyncio.to_thread(self.store.cached_calls, [retry_key])).get(retry_key)
            second = await self._answer(call, retry, retry_key, hit, summary)
            if isinstance(second, JudgeError):
                await self._finish(summary, _failed(call.rows, second, key))
                return
            text, scores, key, paid = second
            if scores is None:
                err = JudgeError(FailureReason.UNPARSEABLE, parse_error(text, call.skills), text)
                await self._finish(summary, _failed(call.rows, err, key), paid)
                return
        rationale = _rationale(text)
        outcomes = [
            Outcome(c.id, Status.DONE, score=scores[c.skill], rationale=rationale, call_key=key)
            for c in call.rows
        ]
        await self._finish(summary, outcomes, paid)

    async def _answer(
        self,
        call: _Call,
        messages: list[Message],
        key: str,
        cached: CallRecord | None,
        summary: BatchSummary,
    ) -> Answer | JudgeError:
        """A cached answer (paid = None), or a new paid one (kept even when unparseable)."""
        if cached is not None:
            scores = _scores(cached.raw, call.skills)
            if scores is not None:
                summary.cache_hits += 1
                return cached.raw, scores, key, None
        started = time.perf_counter()
        try:
            output = await self._generate(call.judge, call.config, messages)
        except JudgeError as err:
            return err
        summary.calls += 1
        scores = _scores(output.text, call.skills)
        paid = CallRecord(
            cache_key=key,
            run_id=call.rows[0].run_id,
            judge=call.config.name,
            raw=output.text,
            parsed=scores is not None,
            prompt_tokens=output.prompt_tokens,
            completion_tokens=output.completion_tokens,
            cost=call.config.price.cost(output.prompt_tokens, output.completion_tokens),
            latency_ms=(time.perf_counter() - started) * 1000,
        )
        return output.text, scores, key, paid

    async def _generate(
        self, judge: Judge, config: JudgeConfig, messages: Sequence[Message]
    ) -> JudgeOutput:
        """The one retry loop (the SDKs' own retries are off), under the shared budget."""
        key = self.budget_key(judge, config)
        estimate = estimate_tokens(messages) + self.config.generate.max_tokens

        async def send() -> JudgeOutput:  # one attempt, in a lane
            await self.limiter.acquire(key, estimate)  # the last wait before sending
            async with asyncio.timeout(self.config.generate.timeout + 5):  # SDK backstop
                return await judge.generate(messages, self.config.generate)

        attempt = 0
        while True:
            attempt += 1
            try:
                async with self._endpoint_slots(config):
                    output = await self._lanes.run(send)
            except Exception as exc:
                err = classify(exc)
                if err.reason == FailureReason.RATE_LIMITED:  # slow the endpoint for everyone
                    await self.limiter.penalize(key, err.retry_after or 1.0)
                decision = judge.should_retry(err, attempt)
                if not decision.retry:
                    raise err from exc
                log.info(
                    "retrying %s after %s (attempt %d, %.1fs)",
                    judge.name,
                    err.reason,
                    attempt,
                    decision.delay,
                )
                await asyncio.sleep(decision.delay)
            else:
                used = output.prompt_tokens + output.completion_tokens
                if used:  # 0: the provider reported no usage; keep the estimate
                    await self.limiter.settle(key, estimate, used)
                return output

    async def _finish(
        self, summary: BatchSummary, outcomes: list[Outcome], paid: CallRecord | None = None
    ) -> None:
        await self._writer.write(calls=[paid] if paid is not None else [], outcomes=outcomes)
        for o in outcomes:
            if o.status == Status.DONE:
                summary.done += 1
            else:
                summary.failed += 1

    # -- leases ------------------------------------------------------------------------

    def _hold(self, ids: set[int]) -> None:
        for i in ids:
            self._owned[i] = self._owned.get(i, 0) + 1
        if self._heartbeat is None or self._heartbeat.done():
            self._heartbeat = asyncio.get_running_loop().create_task(self._beat())

    def _release(self, ids: set[int]) -> None:
        for i in ids:
            left = self._owned.get(i, 0) - 1
            if left > 0:
                self._owned[i] = left
            else:
                self._owned.pop(i, None)

    async def _beat(self) -> None:
        """Renew the leases of every row this process is judging, until it has none."""
        interval = self.config.lease_seconds / 3
        while self._owned:
            await asyncio.sleep(interval)
            ids = list(self._owned)
            try:
                await asyncio.to_thread(self.store.extend_leases, ids, self.config.lease_seconds)
            except Exception:  # the store retries outages itself; never kill the loop
                log.exception("lease heartbeat failed")


def _failed(
    rows: Sequence[JobContext], err: JudgeError, call_key: str | None = None
) -> list[Outcome]:
    detail = redact(err.detail)[:2000]
    return [
        Outcome(c.id, Status.FAILED, reason=str(err.reason), detail=detail, call_key=call_key)
        for c in rows
    ]


def _scores(text: str, skills: Sequence[Skill]) -> dict[str, int | None] | None:
    parsed = parse(text, [s.name for s in skills], [s.name for s in skills if s.allow_na])
    return dict(parsed.scores) if parsed.scores is not None else None


def parse_error(text: str, skills: Sequence[Skill]) -> str:
    parsed = parse(text, [s.name for s in skills], [s.name for s in skills if s.allow_na])
    return f"unparseable after a format reminder: {parsed.error}"


def _rationale(text: str) -> str:
    lines = text.rstrip().splitlines()
    return "\n".join(lines[:-1]).strip()[:RATIONALE_LIMIT]
