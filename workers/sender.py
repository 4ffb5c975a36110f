"""The sender: how one judge request leaves a worker process (its lanes, an endpoint's
``max_in_flight`` slots, the budget shared by all workers, halted judges, the one retry
loop) and the feed that decides when a batch may claim its rows (workers/feed.py).

One per process, on the process's event loop; the executor (workers/runner.py) hands it
rendered messages and gets an answer or the error that ends them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from flask_eval.core.errors import FailureReason, JudgeError
from flask_eval.core.types import JudgeConfig
from flask_eval.rubrics.prompt import Message, estimate_tokens
from flask_eval.workers.feed import Feed
from flask_eval.workers.halts import HaltWatch
from flask_eval.workers.judge import GenerateConfig, Judge, JudgeOutput, create_judge
from flask_eval.workers.lanes import Lanes
from flask_eval.workers.leases import NotSent
from flask_eval.workers.limiter import Limiter

log = logging.getLogger("flask_eval.worker")


class Halted(JudgeError):
    """Raised in a lane when the call's judge was halted while the call waited."""

    def __init__(self, detail: str) -> None:
        super().__init__(FailureReason.HALTED, detail)


class Sender:
    """Sends judge requests, at most ``in_flight`` at once in this process."""

    def __init__(
        self,
        in_flight: int,
        limiter: Limiter,
        halts: HaltWatch,
        max_attempts: int | None = None,
    ) -> None:
        self.in_flight = in_flight
        self.limiter = limiter
        self.halts = halts
        self.max_attempts = max_attempts
        self._judges: dict[str, Judge] = {}
        self._judge_slots: dict[str, asyncio.Semaphore] = {}
        self._lanes = Lanes(in_flight)
        self._slot_waiting = 0  # calls waiting for a judge's max_in_flight slots
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

    @contextlib.asynccontextmanager
    async def _endpoint_slots(self, config: JudgeConfig) -> AsyncIterator[None]:
        """One of the judge's ``max_in_flight`` slots; calls waiting for one count as
        waiting for a lane (the feed claims no more while they wait)."""
        if config.max_in_flight is None:
            yield
            return
        slots = self._judge_slots.get(config.spec)
        if slots is None:
            slots = self._judge_slots[config.spec] = asyncio.Semaphore(config.max_in_flight)
        self._slot_waiting += 1
        try:
            await slots.acquire()
        finally:
            self._slot_waiting -= 1
        try:
            yield
        finally:
            slots.release()

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

        async def send() -> JudgeOutput:  # one attempt, in a lane
            self.feed.poke()
            halt = await self.halts.check(run_id, config.name)  # decided while queued
            if halt is not None:
                raise Halted(halt.detail)
            if guard is not None:
                await guard()
            await self.limiter.acquire(budget, estimate)  # the last wait before sending
            if guard is not None:
                await guard()
            async with asyncio.timeout(generate.timeout + 5):  # SDK backstop
                return await judge.generate(messages, generate)

        attempt = 0
        while True:
            attempt += 1
            try:
                async with self._endpoint_slots(config):
                    output = await self._lanes.run(send, urgent=attempt > 1 or urgent)
            except (Halted, NotSent) as stopped:
                return stopped, attempt - 1
            except Exception as exc:
                err = judge.classify(exc)
                if err.reason == FailureReason.RATE_LIMITED:  # slow the endpoint for everyone
                    await self.limiter.penalize(budget, err.retry_after or 1.0)
                decision = judge.should_retry(err, attempt)
                if not decision.retry:
                    return err, attempt
                log.debug("retrying %s after %s (attempt %d, %.1fs)", judge.name, err.reason,
                          attempt, decision.delay)  # fmt: skip
                await asyncio.sleep(decision.delay)
            else:
                used = output.prompt_tokens + output.completion_tokens
                if used:  # 0: the provider reported no usage; keep the estimate
                    await self.limiter.settle(budget, estimate, used)
                return output, attempt

    async def aclose(self) -> None:
        await self._lanes.aclose()
        for judge in self._judges.values():
            await judge.aclose()
        self._judges.clear()
        await self.limiter.aclose()
