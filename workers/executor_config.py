"""The executor's settings (``workers.runner.Executor``), apart so that the batch lane
(``workers.batch_lane``) reads them without importing the executor."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from flask_eval.core.settings import Settings


@dataclass(frozen=True)
class ExecutorConfig:
    in_flight: int = 256
    #: a claimed row stays leased while its worker lives: renewed every lease/3 seconds
    lease_seconds: float = 60.0
    #: seconds a judge call may take
    timeout: float = 120.0
    max_attempts: int | None = None  # None: each judge's own default
    #: a judge whose first calls in a run all fail alike is halted after this many (0: never)
    halt_after: int = 5
    #: where paid answers wait on disk while the database is away (None: memory only)
    spool_dir: Path | None = None
    #: seconds between two looks at the open provider batches (workers/batch_lane.py)
    batch_poll: float = 30.0
    #: each judge endpoint's calls in flight fall on timeouts and 429s and climb back as
    #: it answers (workers/adaptive.py); False: always its max_in_flight (or in_flight)
    adaptive: bool = True


def executor_config(settings: Settings, in_flight: int) -> ExecutorConfig:
    """The executor settings of a worker process or an in-process run."""
    return ExecutorConfig(
        in_flight=in_flight,
        lease_seconds=settings.lease_seconds,
        timeout=settings.judge_timeout,
        max_attempts=settings.max_attempts,
        halt_after=settings.halt_after,
        adaptive=settings.adaptive,
        spool_dir=settings.spool_dir,
        batch_poll=settings.batch_poll_seconds,
    )
