"""The executor: turn a batch of ledger ids into judgments. Same code in-process and in
Celery workers.

Per call: claim the rows (so a duplicate delivery does not pay twice), render the
prompt, reuse a cached answer or ask the judge (one retry loop, ours), parse, ask once
more with a format reminder if the answer is unparseable, and write the outcome. Every
row claimed ends done or failed with a reason; nothing is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flask_eval.exceptions import FlaskEvalError, JudgeError
from flask_eval.redact import redact
from rubrics import codec
from rubrics.parse import parse
from rubrics.prompt import reminder, render
from rubrics.skills import Skill, SkillSet
from storage.models import FailureReason, Status
from storage.records import JobContext, Outcome
from storage.store import Store
from workers.endpoints import JudgeConfig
from workers.errors import classify
from workers.judge import GenerateConfig, Judge, JudgeOutput, Message, create_judge

log = logging.getLogger("flask_eval.worker")

RATIONALE_LIMIT = 8_000


@dataclass(frozen=True)
class ExecutorConfig:
    in_flight: int = 256
    #: a claimed row stays leased while its worker lives: renewed every lease/3 seconds
    lease_seconds: float = 60.0
    generate: GenerateConfig = field(default_factory=GenerateConfig)
    max_attempts: int | None = None  # None: each judge's own default


@dataclass(frozen=True)
class RunContext:
    """What a batch needs to know about its run: rubrics and judge configurations."""

    skillset: SkillSet
    judges: Mapping[str, JudgeConfig]

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> RunContext:
        judges = [JudgeConfig.from_data(j) for j in config["judges"]]
        return cls(codec.from_data(config["skills"]), {j.name: j for j in judges})


@dataclass
class BatchSummary:
    done: int = 0
    failed: int = 0
    skipped: int = 0  # already done, or owned by another live delivery
    calls: int = 0  # provider calls made (cache hits excluded)
    cache_hits: int = 0


def cache_key(judge: str, messages: Sequence[Message], config: GenerateConfig) -> str:
    payload = {
        "judge": judge,
        "messages": list(messages),
        "max_tokens": config.max_tokens,
        "temperature": config.temperature,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class Executor:
    """Runs judge calls for one process; create it on the loop that will use it."""

    def __init__(self, store: Store, config: ExecutorConfig) -> None:
        self.store = store
        self.config = config
        self._judges: dict[str, Judge] = {}
        self._slots = asyncio.Semaphore(config.in_flight)
        self._owned: dict[int, int] = {}  # row id -> batches holding it
        self._heartbeat: asyncio.Task[None] | None = None
        self._judge_slots_by_spec: dict[str, asyncio.Semaphore] = {}

    def judge(self, config: JudgeConfig) -> Judge:
        """One client per judge endpoint and process, reused by every batch."""
        if config.spec not in self._judges:
            judge = create_judge(config.spec)
            judge.max_connections = min(judge.max_connections, self.config.in_flight)
            if self.config.max_attempts is not None:
                judge.max_attempts = self.config.max_attempts
            self._judges[config.spec] = judge
        return self._judges[config.spec]

    def _judge_slots(self, config: JudgeConfig) -> asyncio.Semaphore | None:
        if config.max_in_flight is None:
            return None
        if config.spec not in self._judge_slots_by_spec:
            self._judge_slots_by_spec[config.spec] = asyncio.Semaphore(config.max_in_flight)
        return self._judge_slots_by_spec[config.spec]

    async def aclose(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            self._heartbeat = None
        for judge in self._judges.values():
            await judge.aclose()
        self._judges.clear()

    async def run_batch(self, calls: Sequence[Sequence[int]], run: RunContext) -> BatchSummary:
        """Judge ``calls`` (lists of ledger ids, one list per judge call)."""
        summary = BatchSummary()
        wanted = [i for call in calls for i in call]
        claimed = set(await asyncio.to_thread(self.store.claim, wanted, self.config.lease_seconds))
        summary.skipped = len(wanted) - len(claimed)
        self._hold(claimed)
        try:
            contexts = {
                c.id: c for c in await asyncio.to_thread(self.store.contexts, sorted(claimed))
            }
            groups = [[contexts[i] for i in call if i in contexts] for call in calls]
            groups = [g for g in groups if g]
            results = await asyncio.gather(
                *(self._run_call(g, run, summary) for g in groups), return_exceptions=True
            )
        finally:
            self._release(claimed)
        for group, result in zip(groups, results, strict=True):
            if isinstance(result, BaseException):  # a bug: record it, never drop the rows
                log.exception(
                    "internal error judging rows %s", [c.id for c in group], exc_info=result
                )
                err = JudgeError(
                    FailureReason.INTERNAL, redact(f"{type(result).__name__}: {result}")
                )
                await self._finish(self._failed(group, err, None), summary)
        return summary

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

    async def _run_call(
        self, group: list[JobContext], run: RunContext, summary: BatchSummary
    ) -> None:
        first = group[0]
        try:
            config = run.judges[first.judge]
            judge = self.judge(config)
            skills = [run.skillset.get(c.skill) for c in group]
        except (FlaskEvalError, KeyError) as exc:
            reason = (
                FailureReason.AUTH if isinstance(exc, FlaskEvalError) else FailureReason.INTERNAL
            )
            await self._finish(
                self._failed(group, JudgeError(reason, redact(str(exc))), None), summary
            )
            return
        messages = render(
            instruction=first.instruction,
            reference=first.reference,
            response=first.response,
            skills=skills,
        )
        outcome = await self._ask(judge, config, first.run_id, messages, skills, summary)
        if isinstance(outcome, JudgeError):
            await self._finish(self._failed(group, outcome, None), summary)
            return
        text, scores, call_id = outcome
        if scores is None:  # unparseable: ask once more with a format reminder
            retry = [*messages, *reminder(text, skills)]
            second = await self._ask(judge, config, first.run_id, retry, skills, summary)
            if isinstance(second, JudgeError):
                await self._finish(self._failed(group, second, call_id), summary)
                return
            text, scores, call_id = second
            if scores is None:
                err = JudgeError(FailureReason.UNPARSEABLE, parse_error(text, skills), text)
                await self._finish(self._failed(group, err, call_id), summary)
                return
        rationale = _rationale(text)
        await self._finish(
            [
                Outcome(
                    c.id, Status.DONE, score=scores[c.skill], rationale=rationale, call_id=call_id
                )
                for c in group
            ],
            summary,
        )

    async def _ask(
        self,
        judge: Judge,
        config: JudgeConfig,
        run_id: int,
        messages: list[Message],
        skills: Sequence[Skill],
        summary: BatchSummary,
    ) -> tuple[str, dict[str, int | None] | None, int] | JudgeError:
        """One prompt: a cached answer, or a paid one (kept even when unparseable)."""
        key = cache_key(judge.name, messages, self.config.generate)
        cached = await asyncio.to_thread(self.store.cached_call, key)
        if cached is not None:
            scores = _scores(cached.raw, skills)
            if scores is not None:
                summary.cache_hits += 1
                return cached.raw, scores, cached.id
        started = time.perf_counter()
        try:
            output = await self._generate(judge, config, messages)
        except JudgeError as err:
            return err
        summary.calls += 1
        scores = _scores(output.text, skills)
        call_id = await asyncio.to_thread(
            self.store.record_call,
            cache_key=key,
            run_id=run_id,
            judge=config.name,
            raw=output.text,
            parsed=scores is not None,
            prompt_tokens=output.prompt_tokens,
            completion_tokens=output.completion_tokens,
            latency_ms=(time.perf_counter() - started) * 1000,
            cost=config.price.cost(output.prompt_tokens, output.completion_tokens),
        )
        return output.text, scores, call_id

    async def _generate(
        self, judge: Judge, config: JudgeConfig, messages: Sequence[Message]
    ) -> JudgeOutput:
        """The one retry loop: the SDKs' own retries are off."""
        attempt = 0
        while True:
            attempt += 1
            try:
                async with self._slots, _maybe(self._judge_slots(config)):
                    return await asyncio.wait_for(
                        judge.generate(messages, self.config.generate),
                        self.config.generate.timeout + 5,
                    )
            except Exception as exc:
                err = classify(exc)
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

    def _failed(
        self, group: Sequence[JobContext], err: JudgeError, call_id: int | None
    ) -> list[Outcome]:
        detail = redact(err.detail)[:2000]
        return [
            Outcome(c.id, Status.FAILED, reason=str(err.reason), detail=detail, call_id=call_id)
            for c in group
        ]

    async def _finish(self, outcomes: list[Outcome], summary: BatchSummary) -> None:
        await asyncio.to_thread(self.store.finish, outcomes)
        for o in outcomes:
            if o.status == Status.DONE:
                summary.done += 1
            else:
                summary.failed += 1


def _maybe(sem: asyncio.Semaphore | None) -> contextlib.AbstractAsyncContextManager[object]:
    return sem if sem is not None else contextlib.nullcontext()


def _scores(text: str, skills: Sequence[Skill]) -> dict[str, int | None] | None:
    parsed = parse(text, [s.name for s in skills], [s.name for s in skills if s.allow_na])
    return dict(parsed.scores) if parsed.scores is not None else None


def parse_error(text: str, skills: Sequence[Skill]) -> str:
    parsed = parse(text, [s.name for s in skills], [s.name for s in skills if s.allow_na])
    return f"unparseable after a format reminder: {parsed.error}"


def _rationale(text: str) -> str:
    lines = text.rstrip().splitlines()
    return "\n".join(lines[:-1]).strip()[:RATIONALE_LIMIT]
