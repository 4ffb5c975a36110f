"""`flask-eval demo`: the whole pipeline on shipped example data and the simulator.

Runs in-process on the embedded default (SQLite in the working directory, or
FLASK_EVAL_DATABASE_URL), with two simulated judges: one through the OpenAI SDK and one
through the Anthropic SDK.
"""

from __future__ import annotations

import os
from dataclasses import replace
from importlib import resources

import click

from flask_eval import pipeline
from flask_eval import settings as settings_mod
from producer.schema import DOMAINS
from report import render
from simulator.config import SimConfig
from simulator.testing import running_simulator
from storage import queries
from storage.store import Store

JUDGES = ("openai/sim-judge-gpt", "anthropic/sim-judge-claude")


def run_demo() -> None:
    examples = resources.files("flask_eval").joinpath("examples")
    instances = str(examples.joinpath("instances.jsonl"))
    responses = [f"{m}={examples.joinpath(m + '.jsonl')}" for m in ("model_a", "model_b")]
    # A little realism: some latency, a few garbage answers and 5xx errors to recover from.
    sim = SimConfig(
        latency_ms=40, latency_dist="lognormal", garbage_rate=0.05, error_rate=0.02, seed=7
    )
    settings = replace(settings_mod.load(), broker_url=None)  # the demo always runs in-process
    with running_simulator(sim) as handle:
        os.environ["OPENAI_BASE_URL"] = handle.openai_base_url
        os.environ["ANTHROPIC_BASE_URL"] = handle.anthropic_base_url
        os.environ.setdefault("OPENAI_API_KEY", "sk-demo-simulator")
        os.environ.setdefault("ANTHROPIC_API_KEY", "sk-demo-simulator")
        plan = pipeline.prepare(
            instances=instances, responses=responses, judges=JUDGES, run_name="demo"
        )
        for model, (answered, total) in plan.inputs.coverage().items():
            click.echo(f"coverage {model}: {answered}/{total} instances answered")
        store = Store(settings.database_url)
        dispatcher = pipeline.make_dispatcher(settings, store, plan.context(), in_flight=32)
        started = pipeline.start(plan, store, dispatcher, settings)
        run = started.run
        verb = "created" if started.created else "resumed"
        click.echo(f"run {run.name} {verb}: {started.dispatched} judge calls dispatched")
        pipeline.wait(store, run, dispatcher)
        stats = handle.stats()
    counts = queries.status(store, run.id, run.name)
    rows = pipeline.report_rows(store, run)
    orders = {
        "overall": (),
        "ability": tuple(plan.skillset.abilities),
        "skill": plan.skillset.names,
        "domain": DOMAINS,
        "difficulty": (),
    }
    for dimension, order in orders.items():
        click.echo(f"\n== {dimension} ==")
        click.echo(render.comparison_table(rows, dimension, key_order=order))
    click.echo(
        f"\n{counts.done} judgments done, {counts.failed} failed "
        f"({', '.join(f'{k}: {v}' for k, v in counts.failed_by_reason.items()) or 'none'}); "
        f"simulator saw {stats['requests']} requests this time"
    )
    click.echo(
        f"database: {settings.database_url}; "
        "try `flask-eval report demo` or `flask-eval export demo`"
    )
