"""The viewer's runs list (docs/design/viewer.md): each run with its models, judges,
progress, cost and duration, and the runs of one evaluation (`eval`: generate, annotate,
judge, named by :func:`app.evaluate.step_run_name`) grouped under it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from flask_eval.app.evaluate import eval_step
from flask_eval.app.progress import runs_overview
from flask_eval.app.score_tables import config_judges, config_models
from flask_eval.core.errors import Status
from flask_eval.core.redact import redact
from flask_eval.producer.prices import unpriced
from flask_eval.rubrics import kinds
from flask_eval.storage import browse
from flask_eval.storage.browse import RunLine
from flask_eval.storage.store import Store

#: statuses of a judgment still to be judged
OPEN = (Status.PENDING.value, Status.RUNNING.value)


@dataclass(frozen=True)
class RunRow:
    """One run of the list."""

    line: RunLine
    kind: str  # judgment, generation or annotation
    step: str  # the evaluation's step it is ('' for a run of its own)
    models: list[str]  # the models it evaluates (a generation run: those answering)
    judges: list[str]  # its judges (an annotation run: its annotators)
    cost: float  # of its priced calls
    unpriced: list[str]  # its workers without a price: their cost is unknown, never 0
    #: seconds from its creation to its last judgment's change (None: nothing yet)
    duration_s: float | None

    @property
    def name(self) -> str:
        return self.line.name

    @property
    def total(self) -> int:
        return sum(self.line.counts.values())

    def count(self, status: str) -> int:
        return self.line.counts.get(status, 0)

    @property
    def open(self) -> int:
        return sum(self.count(s) for s in OPEN)


@dataclass(frozen=True)
class RunGroup:
    """The runs of one evaluation (``name``), in the order they ran; or one run of its own
    (``name`` '')."""

    name: str
    runs: list[RunRow]

    @property
    def cost(self) -> float:
        return sum(r.cost for r in self.runs)

    @property
    def unpriced(self) -> list[str]:
        return list(dict.fromkeys(n for r in self.runs for n in r.unpriced))

    @property
    def open(self) -> int:
        return sum(r.open for r in self.runs)

    @property
    def duration_s(self) -> float | None:
        """From its first run's creation to its last change."""
        ends = [r.line.last_update for r in self.runs if r.line.last_update is not None]
        if not ends:
            return None
        return _seconds(min(r.line.created_at for r in self.runs), max(ends))


def _seconds(start: datetime, end: datetime) -> float:
    if (start.tzinfo is None) != (end.tzinfo is None):  # a driver's mix: both as UTC
        start, end = start.replace(tzinfo=None), end.replace(tzinfo=None)
    return max(0.0, (end - start).total_seconds())


def _row(line: RunLine, cost: float) -> RunRow:
    of_kind = kinds.of(line.config.kind)
    kind = of_kind.name
    workers = [redact(j) for j in config_judges(line.config)]
    models, judges = config_models(line.config), workers
    if of_kind.workers_tested:  # its workers are the models under test
        models, judges = workers, []
    missing = [redact(n) for n in unpriced(list(line.config.judges))]
    step = eval_step(line.name)
    end = line.last_update
    return RunRow(
        line,
        kind,
        step[1] if step else "",
        models,
        judges,
        cost,
        missing,
        _seconds(line.created_at, end) if end is not None else None,
    )


def runs(store: Store) -> list[RunGroup]:
    """The store's runs, newest first, an evaluation's runs grouped where its newest
    one is (in the order they ran: generate, annotate, judge)."""
    costs = {str(r["name"]): float(r["cost"] or 0.0) for r in runs_overview(store)}
    groups: dict[str, RunGroup] = {}
    out: list[RunGroup] = []
    for line in browse.runs(store):
        row = _row(line, costs.get(line.name, 0.0))
        step = eval_step(line.name)
        if step is None:
            out.append(RunGroup("", [row]))
        elif step[0] in groups:
            groups[step[0]].runs.append(row)
        else:
            groups[step[0]] = RunGroup(step[0], [row])
            out.append(groups[step[0]])
    for group in groups.values():
        group.runs.sort(key=lambda r: r.line.id)  # the order they were made in
    return out
