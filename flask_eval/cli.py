"""The `flask-eval` command line."""

from __future__ import annotations

import csv
import json
import logging
import sys
from typing import Any

import click

from flask_eval import pipeline
from flask_eval import settings as settings_mod
from flask_eval.cli_common import find_run, handle_errors, open_store
from flask_eval.exceptions import InputError
from flask_eval.redact import install_log_redaction
from producer.estimate import format_estimates, planned_calls
from producer.plan import batches
from report import render
from storage import queries
from storage.models import FailureReason
from storage.store import Store
from workers.context import RunContext
from workers.judge import create_judge


@click.group()
@click.version_option(package_name="flask-eval")
def main() -> None:
    """Fine-grained LLM evaluation (FLASK) with distributed judge workers."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    install_log_redaction()


@main.command()
@click.option("--instances", required=True, help="FLASK evaluation set (JSON Lines).")
@click.option(
    "--responses",
    "responses",
    multiple=True,
    metavar="NAME=PATH",
    help="A model's responses (JSON Lines); repeat per model.",
)
@click.option(
    "--judge",
    "judges",
    multiple=True,
    metavar="SPEC",
    help="provider/model[@BASE_URL]; repeat per judge.",
)
@click.option(
    "--run", "run_name", default=None, help="Run name; the same name and inputs resume the run."
)
@click.option(
    "--mode",
    type=click.Choice(["instance", "skill"]),
    default="instance",
    show_default=True,
    help="One judge call per instance (all its skills) or per skill.",
)
@click.option(
    "--rubrics", default=None, help="Skill rubrics: our YAML or FLASK's skillset_description.json."
)
@click.option(
    "--in-flight", default=64, show_default=True, help="Judge calls in flight (in-process mode)."
)
@click.option(
    "--judges",
    "judges_files",
    multiple=True,
    metavar="FILE",
    help="YAML list of judges with spec, name, rpm, tpm, max_in_flight, price.",
)
@click.option("--retry-failed", is_flag=True, help="Also judge again what failed before.")
@click.option("--dry-run", is_flag=True, help="Print jobs, calls, tokens and cost; spend nothing.")
@click.option(
    "--max-cost",
    type=click.FloatRange(min=0),
    default=None,
    metavar="USD",
    help="Stop enqueueing when the run's metered plus estimated cost would pass this.",
)
@click.option("--no-wait", is_flag=True, help="Enqueue and return without waiting.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@handle_errors
def run(
    instances: str,
    responses: tuple[str, ...],
    judges: tuple[str, ...],
    run_name: str | None,
    mode: str,
    rubrics: str | None,
    in_flight: int,
    judges_files: tuple[str, ...],
    retry_failed: bool,
    dry_run: bool,
    max_cost: float | None,
    no_wait: bool,
    quiet: bool,
) -> None:
    """Validate inputs, plan one job per (instance, response, skill, judge), and judge them."""
    settings = settings_mod.load()
    plan = pipeline.prepare(
        instances=instances,
        responses=responses,
        judges=judges,
        judges_files=judges_files,
        run_name=run_name,
        mode=mode,
        rubrics=rubrics,
    )
    for model, (answered, total) in plan.inputs.coverage().items():
        click.echo(f"{model}: {answered}/{total} instances answered", err=True)
    if dry_run:
        calls = planned_calls(plan.inputs, plan.judges, plan.mode)
        click.echo(f"dry run of {plan.name} ({plan.mode} mode): nothing is written or sent")
        click.echo(format_estimates(plan.estimator().summarize(calls)))
        return
    if not settings.broker_url:
        pipeline.check_judges_locally(plan)
        if no_wait:
            raise InputError(
                "--no-wait needs a broker (FLASK_EVAL_BROKER_URL); in-process runs must wait"
            )
    pipeline.preflight(settings)
    store = Store(settings.database_url)
    dispatcher = pipeline.make_dispatcher(settings, store, plan.context(), in_flight)
    started = pipeline.start(
        plan, store, dispatcher, settings, retry_failed=retry_failed, max_cost=max_cost
    )
    run_info = started.run
    verb = "created" if started.created else "resumed"
    click.echo(
        f"run {run_info.name} {verb}: {started.dispatched} judge calls dispatched "
        f"(estimated ${started.estimated_cost:.4f})",
        err=True,
    )
    if started.held_back:
        click.echo(
            f"--max-cost {max_cost}: stopped enqueueing; {started.held_back} calls "
            f"({started.held_back_rows} judgments) stay pending; rerun with a higher "
            "--max-cost to continue",
            err=True,
        )
    if no_wait:
        return
    pipeline.wait(
        store, run_info, dispatcher, progress=not quiet, leave_open=started.held_back_rows
    )
    counts = queries.status(store, run_info.id, run_info.name)
    click.echo(render.to_table(pipeline.report_rows(store, run_info)))
    click.echo(
        f"done {counts.done}, failed {counts.failed}, pending {counts.pending} of {counts.total}; "
        f"{counts.calls} calls paid, ${counts.cost:.4f}",
        err=True,
    )


@main.command()
@click.argument("run_name", required=False)
@click.option(
    "--reason",
    "reasons",
    multiple=True,
    type=click.Choice([r.value for r in FailureReason]),
    help="Only failures with this reason (repeatable).",
)
@click.option("--no-wait", is_flag=True)
@click.option("--quiet", is_flag=True)
@click.option("--in-flight", default=64, show_default=True)
@handle_errors
def resume(
    run_name: str | None, reasons: tuple[str, ...], no_wait: bool, quiet: bool, in_flight: int
) -> None:
    """Re-dispatch what is pending, stale or failed (idempotent)."""
    settings = settings_mod.load()
    store = open_store()
    run_info = find_run(store, run_name)
    context = RunContext.from_config(run_info.config)
    if not settings.broker_url:
        for judge in context.judges.values():
            create_judge(judge.spec)  # the keys must be here when we call the judges
    pipeline.preflight(settings)
    dispatcher = pipeline.make_dispatcher(settings, store, context, in_flight)
    reset = store.reset_failed(run_info.id, reasons or None)
    calls = store.open_calls(run_info)
    if calls:
        dispatcher.submit(run_info.id, batches(calls, settings.calls_per_message))
    pipeline.mark_dispatched(store, run_info, dispatcher, complete=True)
    click.echo(
        f"run {run_info.name}: {reset} failed judgments reset, {len(calls)} calls dispatched",
        err=True,
    )
    if not no_wait or not settings.broker_url:
        pipeline.wait(store, run_info, dispatcher, progress=not quiet)


@main.command()
@click.option("--processes", default=1, show_default=True, help="Worker processes.")
@click.option(
    "--in-flight", default=256, show_default=True, help="Judge calls in flight per process."
)
@click.option("--loglevel", default="INFO", show_default=True)
@handle_errors
def worker(processes: int, in_flight: int, loglevel: str) -> None:
    """Start Celery workers on the configured broker."""
    from workers import worker as worker_mod

    sys.exit(worker_mod.run(processes, in_flight, loglevel))


@main.command()
@click.argument("run_name", required=False)
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def status(run_name: str | None, as_json: bool) -> None:
    """Counts of done, failed and pending judgments (latest run by default)."""
    store = open_store()
    run_info = find_run(store, run_name)
    counts = queries.status(store, run_info.id, run_info.name)
    if as_json:
        click.echo(json.dumps(counts.as_dict()))
        return
    click.echo(
        f"run {counts.run}: {counts.done} done, {counts.failed} failed, "
        f"{counts.pending} pending of {counts.total}"
    )
    for reason, n in counts.failed_by_reason.items():
        click.echo(f"  failed ({reason}): {n}")
    click.echo(
        f"  {counts.calls} judge calls, {counts.prompt_tokens} prompt + "
        f"{counts.completion_tokens} completion tokens"
    )


@main.command()
@click.argument("run_name", required=False)
@click.option(
    "--format", "fmt", type=click.Choice(["jsonl", "csv"]), default="jsonl", show_default=True
)
@handle_errors
def export(run_name: str | None, fmt: str) -> None:
    """One row per judgment, with its raw judge output."""
    store = open_store()
    run_info = find_run(store, run_name)
    rows = queries.export_rows(store, run_info.id, run_info.name)
    out = sys.stdout
    if fmt == "csv":
        writer = csv.DictWriter(out, fieldnames=queries.EXPORT_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    else:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8765, show_default=True)
@click.option("--latency-ms", default=0.0, show_default=True)
@click.option(
    "--latency-dist", type=click.Choice(["fixed", "lognormal"]), default="fixed", show_default=True
)
@click.option("--error-rate", default=0.0, show_default=True)
@click.option("--garbage-rate", default=0.0, show_default=True)
@click.option("--rate-limit-rate", default=0.0, show_default=True)
@click.option("--timeout-rate", default=0.0, show_default=True)
@click.option("--rpm", type=int, default=None)
@click.option("--tpm", type=int, default=None)
@click.option("--score", type=click.IntRange(1, 5), default=None)
@click.option("--seed", default=0, show_default=True)
@handle_errors
def simulate(host: str, port: int, **options: Any) -> None:
    """A judge simulator speaking the OpenAI and Anthropic wire formats."""
    from simulator.config import SimConfig
    from simulator.server import run as serve

    try:
        config = SimConfig(**options)
    except (TypeError, ValueError) as exc:
        raise InputError(f"invalid simulator option: {exc}") from None
    serve(config, host, port)


@main.command()
@handle_errors
def demo() -> None:
    """The whole pipeline on shipped example data against the simulator."""
    from flask_eval.demo import run_demo

    run_demo()


from flask_eval.cli_report import register as _register_report  # noqa: E402

_register_report(main)
