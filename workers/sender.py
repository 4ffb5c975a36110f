"""The sender: how one judge request leaves a worker process (its lanes, an endpoint's
adaptive in-flight limit under its ``max_in_flight`` (workers/adaptive.py), the budget
shared by all workers, halted judges, the one retry loop) and the feed that decides when
a batch may claim its rows (workers/feed.py).

One per process, on the process's event loop; the executor (workers/runner.py) hands it
rendered messages and gets an answer or the error that ends them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from flask_eval.core.errors import FailureReason, JudgeError
from flask_eval.core.types import JudgeConfig
from flask_eval.rubrics.prompt import Message, estimate_tokens
from flask_eval.workers import events
from flask_eval.workers.adaptive import InFlightLimit, Mark
from flask_eval.workers.feed import Feed
from flask_eval.workers.halts import HaltWatch
from flask_eval.workers.judge import GenerateConfig, Judge, JudgeOutput, create_judge
from flask_eval.workers.lanes import Lanes
from flask_eval.workers.leases import NotSent
from flask_eval.workers.limiter import Limiter

log = logging.getLogger("flask_eval.worker")


#: what an endpoint says when it has more calls than it can answer in time
OVERLOADED = frozenset({FailureReason.TIMEOUT, FailureReason.RATE_LIMITED})


class Halted(JudgeError):
    """Raised in a lane when the call's judge was halted while the call waited."""

    def __init__(self, detail: str) -> None:
        super().__init__(FailureReason.HALTED, detail)


class Sender:
    """Sends judge requests, at most ``in_flight`` at once in this process, and at most
    each endpoint's adaptive limit (workers/adaptive.py) to that endpoint."""

    def __init__(
        self,
        in_flight: int,
        limiter: Limiter,
        halts: HaltWatch,
        max_attempts: int | None = None,
        adaptive: bool = True,
    ) -> None:
        self.in_flight = in_flight
        self.limiter = limiter
        self.halts = halts
        self.max_attempts = max_attempts
        self.adaptive = adaptive
        self._judges: dict[str, Judge] = {}
        self._limits: dict[str, InFlightLimit] = {}
        self._lanes = Lanes(in_flight)
        self._slot_waiting = 0  # calls waiting for an endpoint's in-flight limit
        #: a batch claims its rows once fewer than a lane-full of calls wait
        self.feed = Feed(in_flight, lambda: self._lanes.waiting + self._slot_waiting)

    def judge(self, config: JudgeConfig) -> Judge:
        """One client per judge endpoint and process, reused by every batch."""
        if config.spec not in self._judges:
            limit = min(self.in_flight, config.max_in_flight or self.in_flight)
            judge = create_judge(config.spec, max_connections=limit)
            if self.max_attempts is not None:
                judge.max_attempts = self.max_attempts
            self._judges[config.spec] = judge
        return self._judges[config.spec]

    def in_flight_limit(self, config: JudgeConfig) -> InFlightLimit:
        """The endpoint's limit: from its ``max_in_flight`` (or the lanes) down, as it
        answers or times out."""
        limit = self._limits.get(config.spec)
        if limit is None:
            ceiling = min(self.in_flight, config.max_in_flight or self.in_flight)
            limit = InFlightLimit(config.name, ceiling, self.in_flight, self.adaptive)
            self._limits[config.spec] = limit
        return limit

    @contextlib.asynccontextmanager
    async def _slot(self, limit: InFlightLimit) -> AsyncIterator[None]:
        """One of the endpoint's slots; calls waiting for one count as waiting for a lane
        (the feed claims no more while they wait)."""
        self._slot_waiting += 1
        try:
            await limit.acquire()
        finally:
            self._slot_waiting -= 1
        try:
            yield
        finally:
            limit.release()

    async def generate(
        self,
        config: JudgeConfig,
        run_id: int,
        messages: Sequence[Message],
        generate: GenerateConfig,
        urgent: bool,
        guard: Callable[[], Awaitable[None]] | None = None,
    ) -> tuple[JudgeOutput | JudgeError, int]:
        """The one retry loop (the SDKs' own retries are off), under the shared budget;
        returns the answer or the final error, and the HTTP requests sent. ``urgent``
        requests (a call's retries and reminders) go before fresh calls in the lanes.
        ``guard`` raises NotSent when the rows may no longer be paid for (workers/leases.py);
        it runs before the budget's wait and right before each request."""
        judge = self.judge(config)
        budget = judge.budget_key()
        estimate = estimate_tokens(messages) + generate.max_tokens
        limit = self.in_flight_limit(config)
        sent: Mark | None = None  # the limit as the current attempt's request left
        started = 0.0

        async def send() -> JudgeOutput:  # one attempt, in a lane
            nonlocal sent, started
            self.feed.poke()
            halt = await self.halts.check(run_id, config.name)  # decided while queued
            if halt is not None:
                raise Halted(halt.detail)
            if guard is not None:
                await guard()
            if not events.OBSERVERS:
                await self.limiter.acquire(budget, estimate)  # the last wait before sending
            else:
                waiting = time.monotonic()
                await self.limiter.acquire(budget, estimate)
                events.emit(events.LimiterWait(config.name, time.monotonic() - waiting))
            if guard is not None:
                await guard()
            sent, started = limit.mark(), time.monotonic()
            if not events.OBSERVERS:
                async with asyncio.timeout(generate.timeout + 5):  # SDK backstop
                    return await judge.generate(messages, generate)
            return await self._observed(judge, config, run_id, messages, generate, started)

        attempt = 0
        while True:
            attempt += 1
            sent = None
            try:
                async with self._slot(limit):
                    output = await self._lanes.run(send, urgent=attempt > 1 or urgent)
            except (Halted, NotSent) as stopped:
                return stopped, attempt - 1
            except Exception as exc:
                err = judge.classify(exc)
                if sent is not None and err.reason in OVERLOADED:  # fewer at once from here
                    limit.overloaded(sent, err.reason)
                if err.reason == FailureReason.RATE_LIMITED:  # slow the endpoint for everyone
                    if events.OBSERVERS:
                        events.emit(events.RateLimited(run_id, config.name))
                    await self.limiter.penalize(budget, err.retry_after or 1.0)
                decision = judge.should_retry(err, attempt)
                if not decision.retry:
                    return err, attempt
                log.debug(
                    "retrying %s after %s (attempt %d, %.1fs)",
                    judge.name,
                    err.reason,
                    attempt,
                    decision.delay,
                )
                await asyncio.sleep(decision.delay)
            else:
                if sent is not None:
                    seconds = time.monotonic() - started
                    limit.answered(sent, seconds, generate.timeout, retried=attempt > 1)
                used = output.prompt_tokens + output.completion_tokens
                if used:  # 0: the provider reported no usage; keep the estimate
                    await self.limiter.settle(budget, estimate, used)
                return output, attempt

    @staticmethod
    async def _observed(
        judge: Judge,
        config: JudgeConfig,
        run_id: int,
        messages: Sequence[Message],
        generate: GenerateConfig,
        started: float,
    ) -> JudgeOutput:
        """One request, told to the observers (workers/events.py): started, then answered
        (latency, tokens, cost at the judge's price) or failed (its reason)."""
        events.emit(events.CallStarted(run_id, config.name))
        try:
            async with asyncio.timeout(generate.timeout + 5):  # SDK backstop
                output = await judge.generate(messages, generate)
        except Exception as exc:
            events.emit(events.CallFailed(run_id, config.name, str(judge.classify(exc).reason)))
            raise
        except BaseException:
            events.emit(events.CallFailed(run_id, config.name, "cancelled"))
            raise
        events.emit(events.answered(run_id, config, output, "paid", time.monotonic() - started))
        return output

    async def aclose(self) -> None:
        await self._lanes.aclose()
        for judge in self._judges.values():
            await judge.aclose()
        self._judges.clear()
        await self.limiter.aclose()
