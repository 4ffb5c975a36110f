"""The read side of progress: what `status`, `runs` and the live view (`status --watch`)
show, as data. The command line (flask_eval/cli/status.py) only prints it.

The live view's rates come from the ledger's timestamps (judgments finished and calls
paid in the last minute), its in-flight counts from the rows under a live lease and from
the workers' heartbeats, which carry each worker's counters of the executor's events
(workers/events.py); see docs/design/events.md.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from flask_eval.core.stored import StoredConfig
from flask_eval.producer.prices import unpriced, unpriced_reasons
from flask_eval.report.document import Progress
from flask_eval.storage import live, queries
from flask_eval.storage.batches import BatchLedger
from flask_eval.storage.models import utcnow
from flask_eval.storage.queries import StatusCounts
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store

#: seconds of history behind a rate (calls/s, judgments/s) and its ETA
RATE_WINDOW = 60.0
#: a worker whose last beat is older than this is not shown as live (app/waiting.py's 30 s)
LIVE_WITHIN = 30.0
#: batch states that are still open at the provider
OPEN_BATCH = ("created", "submitted")


@dataclass(frozen=True)
class RunStatus:
    """What `flask-eval status RUN` shows."""

    counts: StatusCounts
    halts: list[str]  # each halted judge's detail
    batches: dict[str, dict[str, dict[str, int]]]  # judge -> batches/calls -> state -> n
    cache_answered: int  # judge calls answered from the answer cache
    #: judge -> why it has no price: the run's cost is unknown, not its metered $0
    unpriced: dict[str, str]
    #: judge -> answers its provider returned beyond one per batch request (paid, not read)
    duplicates: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        """The JSON form of `status --json`: ``cost`` is what was metered; ``unpriced``
        names the judges whose calls it counts at $0 (their cost is unknown)."""
        return {
            **self.counts.as_dict(),
            "batches": self.batches,
            "duplicate_batch_answers": self.duplicates,
            "unpriced": self.unpriced,
        }


def unpriced_judges(info: RunInfo) -> list[str]:
    """The names of ``info``'s judges without a price (their cost is unknown, never $0)."""
    return unpriced(list(info.config.judges))


def run_status(store: Store, info: RunInfo) -> RunStatus:
    return RunStatus(
        counts=queries.status(store, info.id, info.name),
        halts=[h.detail for h in store.halts(info.id).values()],
        batches=BatchLedger(store).summary(info.id),
        cache_answered=queries.cache_answered(store, info.id),
        unpriced=cost_unknown(info.config),
        duplicates=BatchLedger(store).duplicates(info.id),
    )


def run_progress(store: Store, info: RunInfo) -> Progress:
    """How far ``info``'s judgments are (what a report of it says when in progress)."""
    c = queries.status(store, info.id, info.name)
    return Progress(total=c.total, done=c.done, failed=c.failed, pending=c.pending)


def cost_unknown(config: StoredConfig) -> dict[str, str]:
    """Judge name -> why its cost is unknown, for a run's judges without a price."""
    return unpriced_reasons(list(config.judges))


def runs_overview(store: Store) -> list[dict[str, Any]]:
    """Every run, newest first: name, created, models, judges, done/failed/total, cost
    (and ``unpriced``: judge -> why its cost is unknown)."""
    rows = queries.runs_overview(store)
    for row in rows:
        row["unpriced"] = unpriced_reasons(list(row.pop("judge_configs")))
    return rows


# -- the live view -----------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeLive:
    """One judge of a run, now."""

    judge: str
    total: int
    done: int
    failed: int
    in_flight: int  # rows under a live lease
    failed_by_reason: dict[str, int]
    judgments_per_s: float  # finished over the last RATE_WINDOW seconds
    calls_per_s: float  # paid calls over the last RATE_WINDOW seconds
    eta_s: float | None  # left / judgments_per_s (None: no rate yet)
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: float
    open_batches: int


@dataclass(frozen=True)
class RunLive:
    run: str
    total: int
    done: int
    failed: int
    pending: int
    judges: list[JudgeLive]
    cost: float
    unpriced: list[str]
    halts: list[str]
    deleted: bool = False  # `runs delete` removed it while it was watched

    @property
    def finished(self) -> bool:
        return self.pending == 0


@dataclass(frozen=True)
class WorkerLive:
    name: str
    host: str
    pid: int
    queue: str
    seen_s: float  # seconds since its last beat
    up_s: float  # seconds since it started
    in_flight: int
    calls: int
    metrics_url: str | None


@dataclass(frozen=True)
class LiveView:
    """What one refresh of `status --watch` shows; ``as_dict`` is its JSON line."""

    at: str
    runs: list[RunLive]
    workers: list[WorkerLive] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        """Every run shown is finished (or deleted); False while there is none yet."""
        return bool(self.runs) and all(r.finished for r in self.runs)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["finished"] = self.finished
        for run, data in zip(self.runs, out["runs"], strict=True):
            data["finished"] = run.finished
        return out


def _judge_live(c: live.JudgeCounts, batches: dict[str, dict[str, int]]) -> JudgeLive:
    rate = c.finished_recently / RATE_WINDOW
    left = c.total - c.done - c.failed
    return JudgeLive(
        judge=c.judge,
        total=c.total,
        done=c.done,
        failed=c.failed,
        in_flight=c.leased,
        failed_by_reason=dict(sorted(c.failed_by_reason.items())),
        judgments_per_s=round(rate, 3),
        calls_per_s=round(c.calls_recently / RATE_WINDOW, 3),
        eta_s=round(left / rate, 1) if rate > 0 and left else (0.0 if not left else None),
        calls=c.calls,
        prompt_tokens=c.prompt_tokens,
        completion_tokens=c.completion_tokens,
        cost=round(c.cost, 6),
        open_batches=sum(n for s, n in batches.get("batches", {}).items() if s in OPEN_BATCH),
    )


def run_live(store: Store, info: RunInfo) -> RunLive:
    """One run's progress per judge, now."""
    counts = live.judge_counts(store, info.id, RATE_WINDOW)
    batches = BatchLedger(store).summary(info.id)
    judges = [_judge_live(c, batches.get(name, {})) for name, c in sorted(counts.items())]
    done, failed = sum(j.done for j in judges), sum(j.failed for j in judges)
    total = sum(j.total for j in judges)
    return RunLive(
        run=info.name,
        total=total,
        done=done,
        failed=failed,
        pending=total - done - failed,
        judges=judges,
        cost=round(sum(j.cost for j in judges), 6),
        unpriced=unpriced_judges(info),
        halts=[h.detail for h in store.halts(info.id).values()],
    )


def live_workers(store: Store, queue: str | None = None) -> list[WorkerLive]:
    """The workers that beat in the last LIVE_WITHIN seconds."""
    now = utcnow()
    return [
        WorkerLive(
            w.name,
            w.host or w.name.rpartition("@")[2],
            w.pid,
            w.queue,
            round((now - w.seen_at).total_seconds(), 1),
            round((now - w.started_at).total_seconds(), 1),
            w.in_flight,
            w.calls,
            w.metrics_url,
        )
        for w in live.workers(store, LIVE_WITHIN, queue)
    ]


def watched_runs(store: Store, name: str | None) -> list[RunInfo]:
    """The run named ``name`` (none while it does not exist: the caller waits for it),
    else every unfinished run."""
    names = [name] if name else live.unfinished_runs(store)
    return [info for n in names if (info := store.find_run(n)) is not None]


def _exists(store: Store, info: RunInfo) -> bool:
    found = store.find_run(info.name)
    return found is not None and found.id == info.id


def _deleted(info: RunInfo) -> RunLive:
    return RunLive(
        run=info.name,
        total=0,
        done=0,
        failed=0,
        pending=0,
        judges=[],
        cost=0.0,
        unpriced=[],
        halts=[],
        deleted=True,
    )


def live_view(store: Store, runs: list[RunInfo], queue: str | None = None) -> LiveView:
    """One refresh of the live view of ``runs``."""
    return LiveView(
        at=utcnow().isoformat(timespec="seconds"),
        runs=[_live_or_deleted(store, info) for info in runs],
        workers=live_workers(store, queue),
    )


def _live_or_deleted(store: Store, info: RunInfo) -> RunLive:
    """The run's progress, or deleted: existence is checked after its counts were read,
    so a run deleted while they were read (no rows left: 0 of 0, "finished") is said
    deleted rather than finished."""
    if not _exists(store, info):
        return _deleted(info)
    progress = run_live(store, info)
    return progress if _exists(store, info) else _deleted(info)
