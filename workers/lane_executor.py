"""What the batch lane (``workers.batch_lane``) uses of its executor
(``workers.runner.Executor``), as a protocol: the lane is typed against it and so needs
no import of the executor, which builds the lane."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from flask_eval.core.types import JudgeConfig
from flask_eval.producer.context import RunContext
from flask_eval.storage.records import CallRecord, JobContext
from flask_eval.storage.store import Store
from flask_eval.workers.calls import BatchSummary, Call
from flask_eval.workers.executor_config import ExecutorConfig
from flask_eval.workers.judge import Judge
from flask_eval.workers.leases import Leases
from flask_eval.workers.writer import WriteBehind


class LaneExecutor(Protocol):
    """What the lane uses of its executor (``workers.runner.Executor``): its store,
    settings, writer and leases, and the executor's own path for judging a call."""

    store: Store
    config: ExecutorConfig
    writer: WriteBehind

    @property
    def leases(self) -> Leases: ...

    def judge(self, config: JudgeConfig) -> Judge: ...

    async def run_context(self, run_id: int) -> RunContext | None: ...

    async def _group(
        self,
        calls: Sequence[Sequence[int]],
        by_id: dict[int, JobContext],
        context: RunContext,
        summary: BatchSummary,
    ) -> list[list[JobContext]]: ...

    async def _prepare(
        self, groups: list[list[JobContext]], context: RunContext, summary: BatchSummary
    ) -> list[Call]: ...

    async def _run_call(
        self, call: Call, cached: CallRecord | None, summary: BatchSummary
    ) -> None: ...
