"""The `run` pipeline: validate everything, write the run and its ledger, dispatch, wait.

Validation is complete before the first write: bad input leaves the database and the
queue untouched.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

from flask_eval import settings as settings_mod
from flask_eval.exceptions import ConfigError, InputError
from flask_eval.settings import Settings
from producer.dispatch import CeleryDispatcher, Dispatcher, InProcessDispatcher
from producer.estimate import CallShape, Estimator
from producer.inputs import Inputs, load_inputs, parse_responses_arg
from producer.judges_file import combine
from producer.plan import DEFAULT_MODE, MODES, batches, default_run_name, fingerprint, run_config
from producer.schema import DOMAINS
from report.metrics import Row, rows_from_cells
from report.scores import ScoreTable, point_cells
from rubrics import codec
from rubrics.skills import SkillSet, load, load_default
from storage import analytics, queries
from storage.records import RunInfo
from storage.store import Store
from workers.context import RunContext
from workers.endpoints import JudgeConfig, Price
from workers.judge import create_judge


@dataclass(frozen=True)
class Plan:
    inputs: Inputs
    skillset: SkillSet
    judges: tuple[JudgeConfig, ...]
    mode: str
    name: str
    fingerprint: str
    instances_path: str

    def context(self) -> RunContext:
        return RunContext(self.skillset, {j.name: j for j in self.judges})

    def estimator(self) -> Estimator:
        return Estimator(self.inputs, self.skillset, self.judges)


@dataclass(frozen=True)
class Started:
    run: RunInfo
    created: bool
    dispatched: int  # calls sent
    held_back: int = 0  # calls left pending because of --max-cost
    held_back_rows: int = 0
    estimated_cost: float = 0.0  # of the calls sent


def prepare(
    *,
    instances: str,
    responses: Sequence[str],
    judges: Sequence[str] = (),
    judges_files: Sequence[str] = (),
    run_name: str | None = None,
    mode: str = DEFAULT_MODE,
    rubrics: str | None = None,
) -> Plan:
    """Validate all inputs and flags; raises InputError/ConfigError; writes nothing."""
    if mode not in MODES:
        raise InputError(f"invalid --mode {mode!r}; choose one of: {', '.join(MODES)}")
    if not judges and not judges_files:
        raise InputError(
            "no judge given; add --judge provider/model (e.g. --judge openai/gpt-4o) "
            "or --judges FILE"
        )
    configs = combine(judges, judges_files)
    if run_name is not None and not run_name.strip():
        raise InputError("--run needs a non-empty name")
    if run_name is not None and len(run_name) > 200:
        raise InputError("--run name is longer than 200 characters")
    skillset = load(rubrics) if rubrics else load_default()
    pairs = [parse_responses_arg(a) for a in responses]
    if not pairs:
        raise InputError("no responses given; add --responses NAME=PATH")
    inputs = load_inputs(instances, pairs, skillset.names)
    skills = codec.to_data(skillset)
    # Budgets and prices may change between attempts of a run; names and specs may not.
    digest = fingerprint(inputs, [f"{j.name}={j.spec}" for j in configs], mode, skills)
    name = run_name or default_run_name(digest)
    return Plan(inputs, skillset, tuple(configs), mode, name, digest, instances)


def check_judges_locally(plan: Plan) -> None:
    """In-process runs call the judges from here: their keys must be set here."""
    for judge in plan.judges:
        create_judge(judge.spec)  # raises ConfigError naming the missing variable


def preflight(settings: Settings) -> None:
    """Before anything is written: the broker, when one is configured, must answer."""
    if settings.broker_url:
        CeleryDispatcher(settings).check()


def make_dispatcher(
    settings: Settings, store: Store, context: RunContext, in_flight: int
) -> Dispatcher:
    if settings.broker_url:
        return CeleryDispatcher(settings)
    return InProcessDispatcher(store, context, settings_mod.executor_config(settings, in_flight))


def start(
    plan: Plan,
    store: Store,
    dispatcher: Dispatcher,
    settings: Settings,
    *,
    retry_failed: bool = False,
    max_cost: float | None = None,
) -> Started:
    """Write the run (or find it again) and dispatch what is not done yet.

    With ``max_cost``, calls are dispatched in order only while the cost already metered
    for this run plus the estimated cost of the calls sent stays within it.
    """
    dispatcher.check()
    run, created = store.create_run(
        name=plan.name,
        fingerprint=plan.fingerprint,
        mode=plan.mode,
        config=run_config(
            plan.inputs, plan.judges, plan.mode, codec.to_data(plan.skillset), plan.instances_path
        ),
        instances=plan.inputs.instances,
        response_sets=plan.inputs.response_sets,
        judges=[j.name for j in plan.judges],
    )
    if retry_failed:
        store.reset_failed(run.id)
    calls = store.open_call_details(run)
    if max_cost is None and all(j.price == Price() for j in plan.judges):
        # nothing to meter: skip rendering every prompt for an estimate of $0
        if calls:
            dispatcher.submit(run.id, batches([c.ids for c in calls], settings.calls_per_message))
        mark_dispatched(store, run, dispatcher, complete=True)
        return Started(run, created, len(calls))
    estimator = plan.estimator()
    spent = queries.status(store, run.id, run.name).cost
    chosen, estimated = [], 0.0
    for call in calls:
        cost = estimator.cost(
            CallShape(call.judge, call.model, call.instance_id, tuple(call.skills))
        )
        if max_cost is not None and spent + estimated + cost > max_cost:
            break
        chosen.append(call)
        estimated += cost
    if chosen:
        dispatcher.submit(run.id, batches([c.ids for c in chosen], settings.calls_per_message))
    held = calls[len(chosen) :]
    mark_dispatched(store, run, dispatcher, complete=not held)
    return Started(run, created, len(chosen), len(held), sum(len(c.ids) for c in held), estimated)


def mark_dispatched(store: Store, run: RunInfo, dispatcher: Dispatcher, complete: bool) -> None:
    """On a broker, let workers re-send this run's lost messages only if every open call
    was sent (not when ``--max-cost`` held some back). See workers/sweeper.py."""
    if isinstance(dispatcher, CeleryDispatcher):
        store.set_dispatched(run.id, dispatcher.settings.queue if complete else None)


def wait(
    store: Store,
    run: RunInfo,
    dispatcher: Dispatcher,
    *,
    progress: bool = True,
    poll: float = 0.5,
    leave_open: int = 0,
) -> None:
    """Block until no judgment of ``run`` is open (but ``leave_open`` held back on
    purpose), with a progress bar."""
    counts = queries.status(store, run.id, run.name)
    bar = tqdm(
        total=counts.total,
        initial=counts.total - counts.pending,
        desc=f"judging {run.name}",
        unit="judgment",
        disable=not progress,
        file=sys.stderr,
        dynamic_ncols=True,
    )
    last_change, last_open = time.monotonic(), counts.pending
    hinted = False
    try:
        while True:
            open_ = store.count_open(run.id) - leave_open
            bar.update(bar.total - open_ - bar.n)
            if open_ != last_open:
                last_change, last_open = time.monotonic(), open_
            if open_ == 0:
                break
            local = isinstance(dispatcher, InProcessDispatcher)
            if isinstance(dispatcher, InProcessDispatcher) and not dispatcher.alive():
                dispatcher.join()  # re-raises an executor crash
                if store.count_open(run.id) > leave_open:
                    raise ConfigError(
                        f"run {run.name}: in-process execution stopped with judgments open; "
                        "rerun to resume"
                    )
            if not local and not hinted and time.monotonic() - last_change > 15:
                bar.write(
                    "no progress for 15 s: is a worker running? start one with `flask-eval worker`"
                )
                hinted = True
            time.sleep(poll)
    finally:
        bar.close()
    dispatcher.join()


def config_judges(config: dict[str, Any]) -> list[str]:
    """Judge names of a run's config: a list of names, or of objects with a ``name``."""
    names = []
    for entry in config.get("judges") or ():
        name = entry.get("name") if isinstance(entry, dict) else entry
        if isinstance(name, str) and name:
            names.append(name)
    return names


def run_table(store: Store, run: RunInfo) -> ScoreTable:
    """The run's score table, judge columns in the order the run was given them."""
    return analytics.score_table(store, run.id, config_judges(run.config), domain_order=DOMAINS)


def table_rows(table: ScoreTable, skillset: SkillSet) -> list[Row]:
    """Every breakdown's point estimates from a score table, in report order."""
    return rows_from_cells(
        point_cells(table),
        {s.name: s.ability for s in skillset},
        skill_order=skillset.names,
        ability_order=tuple(skillset.abilities),
        domain_order=DOMAINS,
    )


def report_rows(store: Store, run: RunInfo) -> list[Row]:
    """The tables `run` and `demo` print: as `report` computes them, without intervals."""
    return table_rows(run_table(store, run), codec.from_data(run.config["skills"]))
