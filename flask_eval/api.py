"""The Python API: one function per step of an evaluation, for a notebook or a script.

Each function validates its inputs (``InputError``/``ConfigError`` naming the file and
line, nothing written), writes its run to the store, has the work done (in this process,
or by the workers when ``FLASK_EVAL_BROKER_URL`` is set) and returns plain records
(lists of dicts, ready for ``pandas.DataFrame(records)``). They call the same use cases
as the command line (``flask_eval.app``): the same runs, answer cache and budgets, so a
step run here and then from the command line is not paid twice.

    from flask_eval import api
    responses = api.generate("instances.jsonl", models=["m1=openai/gpt-5.4-mini"])
    labels = api.annotate("instances.jsonl", annotators=["openai/gpt-5.4"])
    rows = api.judge("instances.jsonl", {"m1": "responses/m1.jsonl"}, judges=["openai/gpt-5.4"])
    result = api.evaluate("instances.jsonl", models=[...], judges=[...])

Settings come from the environment as for the command line (``FLASK_EVAL_DATABASE_URL``,
the providers' keys); ``database_url`` overrides the store. Each function takes the options
of its command (``run``, ``generate``, ``annotate``, ``eval``) under the same names
(``--no-reference`` is ``reference=False``, ``--no-swap`` ``swap=False``, ``--model`` of
``run`` is ``models``), checked by name and type (:class:`GenerateOptions`,
:class:`AnnotateOptions`, :class:`EvaluateOptions`; ``judge``'s are a run spec's,
:meth:`RunSpec.from_flat`); ``judge(spec=...)`` takes a whole run spec instead
(``core/spec.py``: what ``run --spec`` reads). ``dry_run=True`` returns the estimate of
each judge (jobs, calls, tokens, cost; ``priced`` False: the cost is unknown, not 0) and
writes nothing. What the command line writes to files (``--out``) is returned as records
instead.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from typing import Any, TypeVar

from flask_eval.app import annotation, generation, jobs, pipeline, steps, turns
from flask_eval.app import evaluate as evaluate_use_case
from flask_eval.app.budget import check_budget
from flask_eval.app.cache import LedgerCache, existing_cache
from flask_eval.app.eval_estimate import step_estimates
from flask_eval.app.pipeline import Plan
from flask_eval.app.report import pairwise_report
from flask_eval.app.score_tables import report_rows
from flask_eval.core import settings as settings_mod
from flask_eval.core.errors import InputError
from flask_eval.core.settings import Settings
from flask_eval.core.spec import RunSpec, Sampling, decode_section, run_spec
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store

Records = list[dict[str, Any]]
T = TypeVar("T")

__all__ = ["RunSpec", "annotate", "evaluate", "generate", "judge", "report", "run_spec"]


#: a step ended with work failed or pending (the message says how to go on)
Incomplete = steps.StepIncomplete


@contextmanager
def _session(database_url: str | None) -> Iterator[tuple[Settings, Store]]:
    settings = _settings(database_url)
    store = Store(settings.database_url)
    try:
        yield settings, store
    finally:
        store.close()


def _settings(database_url: str | None) -> Settings:
    settings = settings_mod.load()
    return settings if database_url is None else replace(settings, database_url=database_url)


@contextmanager
def _ledger_cache(database_url: str | None) -> Iterator[LedgerCache | None]:
    """The answer cache of the ledger, when the database exists already (a dry run reads
    it to count what it would not pay for, and creates nothing)."""
    cache = existing_cache(_settings(database_url))
    try:
        yield cache
    finally:
        if cache is not None:
            cache.store.close()


def _estimates(plan: Plan, database_url: str | None) -> Records:
    """``dry_run``: each judge's estimate, nothing written or sent."""
    with _ledger_cache(database_url) as cache:
        return [asdict(e) for e in plan.sampled().summarize(cache)]


@dataclass(frozen=True)
class _Work:
    """How a step's work is done: calls in flight, budget, deadline."""

    in_flight: int
    max_cost: float | None
    timeout: float | None


def _run(
    plan: Plan,
    settings: Settings,
    store: Store,
    verb: str,
    work: _Work,
    retry_failed: bool = False,
) -> RunInfo:
    check_budget(plan.judges, plan.name, settings.database_url, work.max_cost)
    dispatcher = steps.dispatcher_for(settings, store, plan.judges, work.in_flight)
    step = steps.StepWork(work.max_cost, retry_failed, timeout=work.timeout)
    return steps.execute(plan, store, dispatcher, settings, verb=verb, work=step).run


@dataclass(frozen=True)
class _JobOptions:
    """What ``generate`` and ``annotate`` share: the instance sources other than FLASK's
    file, which of them, the run's name, budget and calls in flight."""

    biggen: str | None = None
    prometheus_set: str | None = None
    pairwise_set: str | None = None
    limit: int | None = None
    sample: int | None = None
    seed: int = 0
    run_name: str | None = None
    max_cost: float | None = None
    in_flight: int = 64


@dataclass(frozen=True)
class GenerateOptions(_JobOptions):
    """``generate``'s options (those of ``flask-eval generate``)."""

    models: tuple[str, ...] = ()
    models_files: tuple[str, ...] = ()


@dataclass(frozen=True)
class AnnotateOptions(_JobOptions):
    """``annotate``'s options (those of ``flask-eval annotate``)."""

    annotators: tuple[str, ...] = ()
    annotators_files: tuple[str, ...] = ()
    criteria: str | None = None
    relabel: bool = False


@dataclass(frozen=True)
class EvaluateOptions:
    """``evaluate``'s options (those of ``flask-eval eval``)."""

    models: tuple[str, ...] = ()
    models_files: tuple[str, ...] = ()
    judges: tuple[str, ...] = ()
    judges_files: tuple[str, ...] = ()
    annotators: tuple[str, ...] = ()
    annotators_files: tuple[str, ...] = ()
    criteria: str | None = None
    mode: str = "instance"
    out_dir: str = "flask-eval-out"
    name: str = "eval"
    limit: int | None = None
    sample: int | None = None
    seed: int = 0
    max_cost: float | None = None
    in_flight: int = 64


#: each function's options, by the names of its command's flags
OPTIONS: dict[str, type[Any]] = {
    "generate": GenerateOptions,
    "annotate": AnnotateOptions,
    "evaluate": EvaluateOptions,
}


def _options(kind: type[T], given: Mapping[str, Any]) -> T:
    """The typed options of keyword arguments (lists as given), validated by the spec's
    one section decoder: an unknown name or a value of the wrong type is refused."""
    return decode_section(kind, {k: list(v) if _listed(v) else v for k, v in given.items()})


def _listed(value: object) -> bool:
    return isinstance(value, list | tuple)


def generate(
    instances: str | None = None,
    *,
    dry_run: bool = False,
    timeout: float | None = None,
    database_url: str | None = None,
    **options: Any,
) -> Records:
    """The models under test answer the instances (``flask-eval generate``): one record
    per response (model, instance_id, text, finish, cut_off, tokens, cost; a turn of a
    conversation: its conversation, turn and the model's earlier answers, ``history``,
    which it was asked with); ``options``: :class:`GenerateOptions`."""
    o = _options(GenerateOptions, options)
    source = jobs.InstanceSource(instances, o.biggen, o.prometheus_set, o.pairwise_set)
    plan = jobs.prepare_generation(
        source,
        models=o.models,
        models_files=o.models_files,
        run_name=o.run_name,
        sampling=Sampling(o.limit, o.sample, o.seed),
    )
    if dry_run:
        return _estimates(plan, database_url)
    work = _Work(o.in_flight, o.max_cost, timeout)
    rounds = turns.split_turns(plan)
    with _session(database_url) as (settings, store):
        if rounds.later:  # conversations: turn by turn, each with the model's own answers
            check_budget(rounds.models, rounds.name, settings.database_url, work.max_cost)
            dispatcher = steps.dispatcher_for(settings, store, rounds.models, work.in_flight)
            step = steps.StepWork(work.max_cost, timeout=work.timeout)
            done = turns.generate_turns(rounds, store, dispatcher, settings, work=step)
            produced = done.responses
        else:
            run = _run(plan, settings, store, "generate", work)
            produced = generation.generated(store, run)
    return [
        {**asdict(g), "history": list(g.history), "cut_off": g.cut_off}
        for items in produced.values()
        for g in items
    ]


def annotate(
    instances: str | None = None,
    *,
    dry_run: bool = False,
    timeout: float | None = None,
    database_url: str | None = None,
    **options: Any,
) -> Records:
    """Annotators label the instances that lack FLASK's metadata (all with ``relabel``;
    ``flask-eval annotate``): one record per labelled instance (instance_id, skills,
    domains, difficulty, ties); ``options``: :class:`AnnotateOptions`."""
    o = _options(AnnotateOptions, options)
    source = jobs.InstanceSource(instances, o.biggen, o.prometheus_set, o.pairwise_set)
    plan, _ = jobs.prepare_annotation(
        source,
        annotators=o.annotators,
        annotators_files=o.annotators_files,
        criteria=o.criteria,
        relabel=o.relabel,
        run_name=o.run_name,
        sampling=Sampling(o.limit, o.sample, o.seed),
    )
    if plan is None:
        return []
    if dry_run:
        return _estimates(plan, database_url)
    with _session(database_url) as (settings, store):
        run = _run(plan, settings, store, "annotate", _Work(o.in_flight, o.max_cost, timeout))
        combined = annotation.combined(store, run)
    return [
        {
            "instance_id": iid,
            "skills": list(c.labels.skills),
            "domains": list(c.labels.domains),
            "difficulty": c.labels.difficulty,
            "ties": list(c.ties),
        }
        for iid, c in combined.items()
    ]


def judge(
    instances: str | None = None,
    responses: Mapping[str, str] | None = None,
    *,
    spec: RunSpec | None = None,
    dry_run: bool = False,
    timeout: float | None = None,
    database_url: str | None = None,
    **options: Any,
) -> Records:
    """Judge each model's responses (``flask-eval run``; ``responses``: model -> FLASK
    model-output file; a data set that carries its responses needs none): the report's
    rows (model, judge, dimension, group, mean, n, ...; a pairwise run's: the pairwise
    report's rows, win rates, ratings, position and controlled figures). The run is
    ``spec`` (:class:`~flask_eval.core.spec.RunSpec`, what ``run --spec`` reads), or the
    spec of ``instances``, ``responses`` and ``options`` (``run``'s flags:
    :meth:`RunSpec.from_flat`)."""
    if spec is None:
        given = {"instances": instances, **options}
        given["responses"] = [f"{m}={p}" for m, p in (responses or {}).items()]
        spec = RunSpec.from_flat(given)
    elif instances is not None or responses is not None or options:
        raise InputError("judge: give a spec or the run's options, not both")
    plan = pipeline.prepare(spec)
    if dry_run:
        return _estimates(plan, database_url)
    work = _Work(spec.options.in_flight, spec.budget.max_cost, timeout)
    with _session(database_url) as (settings, store):
        run = _run(plan, settings, store, "judge", work, spec.options.retry_failed)
        return _rows(store, run)


def _rows(store: Store, run: RunInfo) -> Records:
    if run.config.pairwise is not None:
        return pairwise_report(store, run).rows()
    return [asdict(row) for row in report_rows(store, run)]


def report(run_name: str, *, database_url: str | None = None) -> Records:
    """The rows of a judging run's report, as records."""
    with _session(database_url) as (_settings, store):
        run = store.find_run(run_name)
        if run is None:
            raise InputError(f"no run named {run_name}")
        return _rows(store, run)


def evaluate(
    instances: str,
    *,
    dry_run: bool = False,
    timeout: float | None = None,
    database_url: str | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Generate -> annotate -> judge -> report (``flask-eval eval``): the report's rows
    and the runs of each step; ``dry_run``: each step's estimates (``{"estimates": {step:
    [estimate, ...]}}``), nothing written or sent; ``options``: :class:`EvaluateOptions`."""
    o = _options(EvaluateOptions, options)
    plan = evaluate_use_case.prepare_eval(
        jobs.InstanceSource(instances),
        workers=evaluate_use_case.EvalWorkers(
            o.models, o.models_files, o.judges, o.judges_files, o.annotators, o.annotators_files
        ),
        criteria=o.criteria,
        out_dir=o.out_dir,
        name=o.name,
        mode=o.mode,
        sampling=Sampling(o.limit, o.sample, o.seed),
    )
    if dry_run:
        with _ledger_cache(database_url) as cache:
            estimates = step_estimates(plan, cache)
        return {"estimates": {step: [asdict(e) for e in es] for step, es in estimates.items()}}
    with _session(database_url) as (settings, store):
        check_budget(plan.workers, plan.name, settings.database_url, o.max_cost)
        dispatcher = steps.dispatcher_for(settings, store, plan.workers, o.in_flight)
        result = evaluate_use_case.evaluate(
            plan, store, dispatcher, settings, max_cost=o.max_cost, timeout=timeout
        )
        rows = [asdict(row) for row in report_rows(store, result.steps[-1].run)]
    return {
        "runs": [s.run.name for s in result.steps],
        "rows": rows,
        "report": str(result.report_path),
    }
