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
the providers' keys); ``database_url`` overrides the store.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, replace
from typing import Any

from flask_eval.app import annotation, generation, jobs, pipeline, steps
from flask_eval.app import evaluate as evaluate_use_case
from flask_eval.app.pipeline import Plan
from flask_eval.app.report import report_rows
from flask_eval.core import settings as settings_mod
from flask_eval.core.errors import InputError
from flask_eval.core.settings import Settings
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store

Records = list[dict[str, Any]]

__all__ = ["annotate", "evaluate", "generate", "judge", "report"]


#: a step ended with work failed or pending (the message says how to go on)
Incomplete = steps.StepIncomplete


@contextmanager
def _session(database_url: str | None) -> Iterator[tuple[Settings, Store]]:
    settings = settings_mod.load()
    if database_url is not None:
        settings = replace(settings, database_url=database_url)
    store = Store(settings.database_url)
    try:
        yield settings, store
    finally:
        store.close()


def _run(plan: Plan, settings: Settings, store: Store, verb: str, in_flight: int) -> RunInfo:
    dispatcher = steps.dispatcher_for(settings, store, plan.judges, in_flight)
    return steps.execute(plan, store, dispatcher, settings, verb=verb).run


def generate(
    instances: str,
    *,
    models: Sequence[str] = (),
    models_files: Sequence[str] = (),
    limit: int | None = None,
    run_name: str | None = None,
    database_url: str | None = None,
    in_flight: int = 64,
) -> Records:
    """The models under test answer the FLASK instances of ``instances``: one record per
    response (model, instance_id, text, finish, cut_off, tokens, cost)."""
    source = jobs.InstanceSource(instances)
    plan = jobs.prepare_generation(
        source, models=models, models_files=models_files, limit=limit, run_name=run_name
    )
    with _session(database_url) as (settings, store):
        run = _run(plan, settings, store, "generate", in_flight)
        produced = generation.generated(store, run)
    return [{**asdict(g), "cut_off": g.cut_off} for items in produced.values() for g in items]


def annotate(
    instances: str,
    *,
    annotators: Sequence[str] = (),
    annotators_files: Sequence[str] = (),
    relabel: bool = False,
    limit: int | None = None,
    run_name: str | None = None,
    database_url: str | None = None,
    in_flight: int = 64,
) -> Records:
    """Annotators label the instances that lack FLASK's metadata (all with ``relabel``):
    one record per labelled instance (instance_id, skills, domains, difficulty, ties)."""
    plan, _ = jobs.prepare_annotation(jobs.InstanceSource(instances), annotators=annotators,
                                      annotators_files=annotators_files, relabel=relabel,
                                      limit=limit, run_name=run_name)  # fmt: skip
    if plan is None:
        return []
    with _session(database_url) as (settings, store):
        run = _run(plan, settings, store, "annotate", in_flight)
        combined = annotation.combined(store, run)
    return [
        {"instance_id": iid, "skills": list(c.labels.skills), "domains": list(c.labels.domains),
         "difficulty": c.labels.difficulty, "ties": list(c.ties)}
        for iid, c in combined.items()
    ]  # fmt: skip


def judge(
    instances: str,
    responses: Mapping[str, str],
    *,
    judges: Sequence[str] = (),
    judges_files: Sequence[str] = (),
    mode: str = "instance",
    run_name: str | None = None,
    database_url: str | None = None,
    in_flight: int = 64,
) -> Records:
    """Judge each model's responses (``responses``: model -> FLASK model-output file):
    the report's rows (model, judge, dimension, group, mean, n, ...)."""
    plan = pipeline.prepare(instances=instances,
                            responses=[f"{m}={p}" for m, p in responses.items()],
                            judges=judges, judges_files=judges_files, mode=mode,
                            run_name=run_name)  # fmt: skip
    with _session(database_url) as (settings, store):
        run = _run(plan, settings, store, "judge", in_flight)
        return [asdict(row) for row in report_rows(store, run)]


def report(run_name: str, *, database_url: str | None = None) -> Records:
    """The rows of a judging run's report, as records."""
    with _session(database_url) as (_settings, store):
        run = store.find_run(run_name)
        if run is None:
            raise InputError(f"no run named {run_name}")
        return [asdict(row) for row in report_rows(store, run)]


def evaluate(
    instances: str,
    *,
    models: Sequence[str] = (),
    models_files: Sequence[str] = (),
    judges: Sequence[str] = (),
    judges_files: Sequence[str] = (),
    annotators: Sequence[str] = (),
    out_dir: str = "flask-eval-out",
    name: str = "eval",
    limit: int | None = None,
    database_url: str | None = None,
    in_flight: int = 64,
) -> dict[str, Any]:
    """Generate -> annotate -> judge -> report (``flask-eval eval``): the report's rows
    and the runs of each step."""
    plan = evaluate_use_case.prepare_eval(
        jobs.InstanceSource(instances), models=models, models_files=models_files,
        judges=judges, judges_files=judges_files, annotators=annotators, out_dir=out_dir,
        name=name, limit=limit,
    )  # fmt: skip
    with _session(database_url) as (settings, store):
        dispatcher = steps.dispatcher_for(settings, store, plan.workers, in_flight)
        result = evaluate_use_case.evaluate(plan, store, dispatcher, settings)
        rows = [asdict(row) for row in report_rows(store, result.steps[-1].run)]
    return {
        "runs": [s.run.name for s in result.steps],
        "rows": rows,
        "report": str(result.report_path),
    }
