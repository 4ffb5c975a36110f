"""`flask-eval demo`: the whole pipeline on shipped example data and the simulator.

Runs in-process on the embedded default (SQLite in the working directory, or
FLASK_EVAL_DATABASE_URL), with two simulated judges: one through the OpenAI SDK and one
through the Anthropic SDK.
"""

from __future__ import annotations

import os
import textwrap
from dataclasses import replace
from importlib import resources

import click

from flask_eval.app import pipeline
from flask_eval.app.report import build_report
from flask_eval.app.summary import call_count_lines, coverage_line
from flask_eval.core import settings as settings_mod
from flask_eval.core.spec import run_spec
from flask_eval.report import render
from flask_eval.report.textcolumns import overview
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage import queries
from flask_eval.storage.store import Store

JUDGES = ("openai/sim-judge-gpt", "anthropic/sim-judge-claude")


INTRO = """\
flask-eval demo: 2 models' responses to 27 FLASK-style instances, each judged on its
3 skills by 2 simulated judges (a local server speaking the OpenAI and Anthropic APIs;
no real model, no key, no cost). Scores run from 1 (poor) to 5 (excellent). FLASK's point
is the breakdown: each score belongs to a skill (12, in 4 abilities), each instance to
domains and a difficulty level, so the report says where a model is weak, not only how much.

Terms, once: a judgment is one score of one response on one skill by one judge; a call is
one request to a judge, scoring one response on all its skills; requests include the
retries after simulated errors and the format reminders after malformed answers.
"""


def run_demo() -> None:
    examples = resources.files("flask_eval").joinpath("examples")
    instances = str(examples.joinpath("instances.jsonl"))
    responses = [f"{m}={examples.joinpath(m + '.jsonl')}" for m in ("model_a", "model_b")]
    click.echo(INTRO)
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
            run_spec(instances=instances, responses=responses, judges=JUDGES, run_name="demo")
        )
        store = Store(settings.database_url)
        dispatcher = pipeline.make_dispatcher(settings, store, in_flight=32)
        started = pipeline.start(plan, store, dispatcher, settings)
        run = started.run
        verb = "created" if started.created else "resumed"
        click.echo(f"run {run.name} {verb}: {started.dispatched.sent} judge calls dispatched")
        pipeline.wait(store, run, dispatcher)
        stats = handle.stats()
    counts = queries.status(store, run.id, run.name)
    report = build_report(store, run, progress=False)
    click.echo("")
    click.echo(render.run_summary(report, counts.failed_by_reason, more=overview(report)))
    answered = {rs.model: set(rs.instance_ids()) for rs in plan.inputs.response_sets}
    judgments = {
        model: len(plan.judges) * sum(len(i.skills) for i in plan.inputs.instances if i.id in ids)
        for model, ids in answered.items()
    }
    planned = len(plan.judges) * sum(len(ids) for ids in answered.values())
    click.echo(textwrap.fill(f"{counts.done} judgments done and {counts.failed} failed.", 100))
    lines = [
        coverage_line(plan.inputs.coverage(), judgments),
        *call_count_lines(planned, started.dispatched.sent, counts.calls, stats["requests"]),
    ]
    for line in lines:
        click.echo(textwrap.fill(line, 100, subsequent_indent="  "))
    click.echo(f"database: {settings.database_url}")
