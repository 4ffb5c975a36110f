"""One step of work, whatever its kind: write a plan's run (or find it again), dispatch
what is open within its budget, wait for it. `generate`, `annotate`, `eval` and the
Python API (flask_eval.api) go through here; `run` keeps its own command-line path
(cli/run.py) over the same pipeline functions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from flask_eval.app import pipeline
from flask_eval.app.pipeline import Plan
from flask_eval.core.errors import FlaskEvalError
from flask_eval.core.settings import Settings
from flask_eval.core.types import JudgeConfig
from flask_eval.producer.dispatch import Transport
from flask_eval.storage import queries
from flask_eval.storage.records import Halt, RunInfo
from flask_eval.storage.store import Store

Say = Callable[[str], None]


class StepIncomplete(FlaskEvalError):
    """A step ended with work failed or pending (exit code 1): the message says how to go
    on; a step after it cannot start."""


def dispatcher_for(
    settings: Settings, store: Store, workers: Iterable[JudgeConfig], in_flight: int
) -> Transport:
    """Before anything is written: in-process, every model doing the work needs its key
    here; with a broker, the broker must answer. Then the transport of the run's calls."""
    if not settings.broker_url:
        pipeline.check_judges_locally(list(workers))
    pipeline.preflight(settings)
    return pipeline.make_dispatcher(settings, store, in_flight)


@dataclass(frozen=True)
class StepResult:
    """How a step ended: its run, whether it was created now, the calls it dispatched
    (``cached``: of those, answered by the answer cache, so not paid), its counts."""

    run: RunInfo
    created: bool
    dispatched: int
    cached: int
    counts: queries.StatusCounts
    halts: dict[str, Halt]

    @property
    def complete(self) -> bool:
        return not self.counts.failed and not self.counts.pending


@dataclass(frozen=True)
class StepWork:
    """How a step's work is done: within ``max_cost``, the failed calls again
    (``retry_failed``), waited for with a progress bar (``progress``) up to ``timeout``
    seconds, what takes time said to ``say``."""

    max_cost: float | None = None
    retry_failed: bool = False
    progress: bool = False
    timeout: float | None = None
    say: Say | None = None


#: a step's work as it is done when nothing else is asked
DEFAULT_WORK = StepWork()


def execute(
    plan: Plan,
    store: Store,
    dispatcher: Transport,
    settings: Settings,
    *,
    verb: str,
    work: StepWork = DEFAULT_WORK,
) -> StepResult:
    """Write ``plan``'s run, dispatch its open calls (and, with ``work.retry_failed``,
    the failed ones again) and wait until none is open (but what ``work.max_cost`` holds
    back); ``verb`` names the work in what is said. StepIncomplete when work is left
    failed or pending."""
    say = work.say
    tell = say or (lambda _line: None)
    before = _cache_answered(store, plan.name)
    started = pipeline.start(
        plan,
        store,
        dispatcher,
        settings,
        retry_failed=work.retry_failed,
        max_cost=work.max_cost,
        say=tell,
    )
    run, sent = started.run, started.dispatched
    state = "created" if started.created else "resumed"
    free = f", {sent.cached} answered from the answer cache" if sent.cached else ""
    tell(f"{verb}: run {run.name} {state}: {sent.sent} calls dispatched{free}")
    halts = pipeline.wait(
        store,
        run,
        dispatcher,
        progress=work.progress,
        leave_open=sent.held_back_rows,
        quiet_after=settings.stall_seconds,
        timeout=work.timeout,
        say=say,
    )
    counts = queries.status(store, run.id, run.name)
    # the calls the answer cache answered this time, as the ledger has them (the
    # dispatch counts them only where it estimates costs)
    cached = queries.cache_answered(store, run.id) - before
    result = StepResult(run, started.created, sent.sent, cached, counts, halts)
    if not result.complete:
        raise StepIncomplete(_incomplete(result, verb))
    return result


def _cache_answered(store: Store, name: str) -> int:
    """The calls of the run ``name`` answered from the answer cache so far (0: no run)."""
    run = store.find_run(name)
    return 0 if run is None else queries.cache_answered(store, run.id)


def _incomplete(step: StepResult, verb: str) -> str:
    """One line saying what of a step is not done, naming how to go on."""
    counts = step.counts
    parts = []
    if counts.failed:
        reasons = ", ".join(f"{r}: {n}" for r, n in counts.failed_by_reason.items())
        parts.append(f"{counts.failed} of {counts.total} failed ({reasons})")
    if counts.pending:
        parts.append(f"{counts.pending} of {counts.total} pending")
    return (
        f"{verb} run {step.run.name}: {'; '.join(parts)}; see `flask-eval export "
        f"{step.run.name}`, then `flask-eval resume {step.run.name}`"
    )
