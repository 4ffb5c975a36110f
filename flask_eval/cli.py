"""The `flask-eval` command line: parse arguments, call the pipeline, print.

Exit codes: 0 when every judgment is done (or nothing was asked to wait); 1 when a run
finished with failures, a judge was halted, or judgments stay pending (``--max-cost``);
2 for bad input, flags or settings (one line, nothing written).
"""

from __future__ import annotations

import csv
import json
import logging
import sys
from typing import Any

import click

from app import pipeline
from core import settings as settings_mod
from core.errors import FailureReason, InputError
from core.redact import install_log_redaction
from flask_eval.cli_common import RunIncomplete, find_run, handle_errors, open_store
from producer.context import RunContext
from producer.dispatch import Dispatched
from producer.estimate import format_estimates
from producer.pairs import describe_plan
from storage import queries
from storage.records import RunInfo
from storage.store import Store

#: environment variables, by the commands that read them
ENV_RUN = {
    "FLASK_EVAL_DATABASE_URL": "the ledger (default sqlite:///./flask-eval.db)",
    "FLASK_EVAL_BROKER_URL": "redis://, rediss:// or amqp:// (unset: judge in-process)",
    "FLASK_EVAL_QUEUE": "the broker queue (default flask_eval)",
    "FLASK_EVAL_CALLS_PER_MESSAGE": "judge calls per message (default 64)",
    "FLASK_EVAL_JUDGE_TIMEOUT": "seconds a judge call may take (in-process; default 120)",
    "FLASK_EVAL_MAX_ATTEMPTS": "attempts per call on 429/5xx/timeouts (in-process; default 6)",
    "FLASK_EVAL_HALT_AFTER": "halt a judge whose first N calls all fail alike (default 5)",
    "OPENAI_API_KEY, ANTHROPIC_API_KEY": "judge keys (in-process; workers need their own)",
    "OPENAI_BASE_URL, ANTHROPIC_BASE_URL": "default base URLs of the providers",
}
ENV_WORKER = {
    "FLASK_EVAL_DATABASE_URL": "the ledger: the same as the producer's",
    "FLASK_EVAL_BROKER_URL": "the broker (required)",
    "FLASK_EVAL_QUEUE": "the queue to take (default flask_eval)",
    "FLASK_EVAL_CALLS_PER_MESSAGE": "calls per message, which sizes the thread pool",
    "FLASK_EVAL_LEASE_SECONDS": "a worker's lease on the rows it judges (default 60)",
    "FLASK_EVAL_VISIBILITY_TIMEOUT": "seconds before an unacked message returns (default 120)",
    "FLASK_EVAL_JUDGE_TIMEOUT": "seconds a judge call may take (default 120)",
    "FLASK_EVAL_MAX_ATTEMPTS": "attempts per call on 429/5xx/timeouts (default 6)",
    "FLASK_EVAL_DB_RETRY_SECONDS": "how long reads wait out a database outage (default 300)",
    "FLASK_EVAL_HALT_AFTER": "halt a judge whose first N calls all fail alike (default 5)",
    "FLASK_EVAL_SPOOL_DIR": "paid answers kept on disk during outages (~/.cache/flask-eval)",
    "FLASK_EVAL_LIMITER_URL": "the Redis holding shared rpm/tpm budgets (default: broker's)",
    "OPENAI_API_KEY, ANTHROPIC_API_KEY": "judge keys",
    "OPENAI_BASE_URL, ANTHROPIC_BASE_URL": "default base URLs of the providers",
}


def _epilog(env: dict[str, str]) -> str:
    lines = ["\b", "Environment:"]
    lines += [f"  {name}: {meaning}" for name, meaning in env.items()]
    return "\n".join(lines)


class OneLineErrors(click.Group):
    """Usage errors (a bad flag or value) as one line, ``error: ...``, exit code 2, like
    every other bad input; click would print a usage block."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            result = super().main(*args, **kwargs)
        except click.exceptions.Abort:
            click.echo("error: aborted", err=True)
            sys.exit(1)
        except click.ClickException as exc:
            click.echo(f"error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        sys.exit(result if isinstance(result, int) else 0)


@click.group(cls=OneLineErrors)
@click.version_option(package_name="flask-eval")
def main() -> None:
    """Fine-grained LLM evaluation (FLASK) with distributed judge workers.

    A judgment is one score of one response on one skill by one judge; a call is one
    request to a judge, which scores one response on all its skills (instance mode) or on
    one (skill mode); requests include retries and format reminders.
    """
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    install_log_redaction()


@main.command(epilog=_epilog(ENV_RUN))
@click.option("--instances", default=None, help="FLASK evaluation set (JSON Lines).")
@click.option(
    "--biggen",
    default=None,
    metavar="FILE",
    help="BiGGen Bench instances, each with its own rubric, and their responses (JSON).",
)
@click.option(
    "--prometheus-set",
    default=None,
    metavar="FILE",
    help="A Prometheus eval set (MT-Bench, Vicuna Bench: filled prompts with responses).",
)
@click.option(
    "--pairwise-set",
    default=None,
    metavar="FILE",
    help="A labelled pairwise set (Auto-J's JSON Lines, HHH Alignment's JSON): judged "
    "pairwise, with accuracy against its labels in the report.",
)
@click.option(
    "--criteria",
    default=None,
    metavar="FILE",
    help="Custom criteria (YAML) instead of FLASK's skills; instances may pick theirs "
    "with a 'criteria' field.",
)
@click.option(
    "--no-reference", is_flag=True, help="Reference-free: judges never see reference answers."
)
@click.option(
    "--pairwise",
    default=None,
    metavar="all|baseline:NAME",
    help="Compare responses two by two: every pair of models, or each against NAME.",
)
@click.option(
    "--no-swap", is_flag=True, help="Pairwise: judge each pair in one order only (no A-B/B-A)."
)
@click.option(
    "--per-criterion",
    is_flag=True,
    help="Pairwise: one verdict per criterion of the instance instead of one overall.",
)
@click.option(
    "--responses",
    "responses",
    multiple=True,
    metavar="NAME=PATH",
    help="A model's responses (JSON Lines: question_id, text); repeat per model.",
)
@click.option(
    "--judge",
    "judges",
    multiple=True,
    metavar="[NAME=]SPEC",
    help="A judge, provider/model[@BASE_URL], optionally named (gpt4o=openai/gpt-4o); "
    "repeat per judge.",
)
@click.option(
    "--judges",
    "judges_files",
    multiple=True,
    metavar="FILE",
    help="YAML list of judges: spec, name, rpm, tpm, max_in_flight, price, max_tokens, "
    "temperature, retry_max_tokens, protocol (flask-eval, prometheus, flask), structured.",
)
@click.option("--run", "run_name", default=None, help="Run name; the same name and inputs resume.")
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
    "--limit", type=click.IntRange(min=1), default=None, help="Judge only the first N instances."
)
@click.option(
    "--sample", type=click.IntRange(min=1), default=None, help="Judge N instances drawn at random."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --sample.")
@click.option(
    "--in-flight",
    type=click.IntRange(1, 100_000),
    default=64,
    show_default=True,
    help="Judge calls in flight (in-process mode).",
)
@click.option("--retry-failed", is_flag=True, help="Also judge again what failed before.")
@click.option("--dry-run", is_flag=True, help="Print jobs, calls, tokens and cost; spend nothing.")
@click.option(
    "--max-cost",
    type=click.FloatRange(min=0),
    default=None,
    metavar="USD",
    help="The run's budget: stop dispatching when its metered plus estimated cost would pass "
    "this (kept with the run; resume honours it; a new --max-cost replaces it).",
)
@click.option("--no-wait", is_flag=True, help="Enqueue and return (needs a broker).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@handle_errors
def run(
    instances: str | None,
    biggen: str | None,
    prometheus_set: str | None,
    pairwise_set: str | None,
    criteria: str | None,
    no_reference: bool,
    pairwise: str | None,
    no_swap: bool,
    per_criterion: bool,
    responses: tuple[str, ...],
    judges: tuple[str, ...],
    judges_files: tuple[str, ...],
    run_name: str | None,
    mode: str,
    rubrics: str | None,
    limit: int | None,
    sample: int | None,
    seed: int,
    in_flight: int,
    retry_failed: bool,
    dry_run: bool,
    max_cost: float | None,
    no_wait: bool,
    quiet: bool,
) -> None:
    """Validate inputs, plan one judgment per (instance, response, skill, judge), judge them.

    Waits until every judgment is done and exits 0, or 1 with a summary when some failed.
    """
    settings = settings_mod.load()
    plan = pipeline.prepare(
        instances=instances,
        responses=responses,
        judges=judges,
        judges_files=judges_files,
        run_name=run_name,
        mode=mode,
        rubrics=rubrics,
        limit=limit,
        sample=sample,
        seed=seed,
        biggen=biggen,
        prometheus_set=prometheus_set,
        criteria=criteria,
        reference=not no_reference,
        pairwise=pairwise,
        swap=not no_swap,
        per_criterion=per_criterion,
        pairwise_set=pairwise_set,
    )
    for model, (answered, total) in plan.inputs.coverage().items():
        click.echo(f"{model}: {answered}/{total} instances answered", err=True)
    if dry_run:
        calls = plan.planned_calls()
        click.echo(f"dry run of {plan.name} ({plan.mode} mode): nothing is written or sent")
        if plan.pairwise is not None and plan.pairs is not None:
            models = [rs.model for rs in plan.inputs.response_sets]
            click.echo(describe_plan(models, plan.pairwise, plan.pairs))
        click.echo(format_estimates(plan.estimator().summarize(calls)))
        return
    if not settings.broker_url:
        pipeline.check_judges_locally(plan.judges)
        if no_wait:
            raise InputError(
                "--no-wait needs a broker (FLASK_EVAL_BROKER_URL); in-process runs must wait"
            )
    pipeline.preflight(settings)
    store = Store(settings.database_url)
    dispatcher = pipeline.make_dispatcher(settings, store, in_flight)
    started = pipeline.start(
        plan, store, dispatcher, settings, retry_failed=retry_failed, max_cost=max_cost
    )
    info, sent = started.run, started.dispatched
    for change in started.changed:
        click.echo(f"judge settings updated: {change}", err=True)
    verb = "created" if started.created else "resumed"
    click.echo(
        f"run {info.name} {verb}: {sent.sent} judge calls dispatched "
        f"(estimated ${sent.estimated_cost:.4f})",
        err=True,
    )
    _say_held_back(info, sent)
    if no_wait:
        return
    pipeline.wait(store, info, dispatcher, progress=not quiet, leave_open=sent.held_back_rows,
                  quiet_after=settings.stall_seconds)  # fmt: skip
    _finish(store, info, sent.held_back_rows)


def _say_held_back(info: RunInfo, sent: Dispatched) -> None:
    if sent.held_back:
        click.echo(
            f"--max-cost {info.config.get('max_cost')}: stopped dispatching at "
            f"${sent.spent + sent.estimated_cost:.4f}; {sent.held_back} calls "
            f"({sent.held_back_rows} judgments) stay pending; raise it with "
            f"`flask-eval resume {info.name} --max-cost USD` to continue",
            err=True,
        )


def _finish(store: Store, info: RunInfo, held_back: int) -> None:
    """Print the run's summary; raise RunIncomplete (exit 1) unless every judgment is done."""
    from app.report import build_report
    from report.render import run_summary

    counts = queries.status(store, info.id, info.name)
    report = build_report(store, info, progress=False)
    click.echo(run_summary(report, counts.failed_by_reason), nl=False)
    if counts.failed or counts.pending:
        parts = []
        if counts.failed:
            reasons = ", ".join(f"{r}: {n}" for r, n in counts.failed_by_reason.items())
            parts.append(f"{counts.failed} of {counts.total} judgments failed ({reasons})")
        if counts.pending:
            why = " (held back by --max-cost)" if held_back else ""
            parts.append(f"{counts.pending} of {counts.total} pending{why}")
        raise RunIncomplete(
            f"run {info.name}: {'; '.join(parts)}; see `flask-eval export {info.name}`, then "
            f"`flask-eval resume {info.name}` to judge them again"
        )


@main.command(epilog=_epilog(ENV_RUN))
@click.argument("run_name", required=False)
@click.option(
    "--reason",
    "reasons",
    multiple=True,
    type=click.Choice([r.value for r in FailureReason]),
    help="Judge again only failures with this reason (repeatable; default: every failure).",
)
@click.option(
    "--max-cost",
    type=click.FloatRange(min=0),
    default=None,
    metavar="USD",
    help="Replace the run's stored budget (e.g. raise it to continue).",
)
@click.option(
    "--judges",
    "judges_files",
    multiple=True,
    metavar="FILE",
    help="Judges file with new budgets (rpm, tpm), concurrency or prices for the run's judges.",
)
@click.option("--no-wait", is_flag=True, help="Enqueue and return (needs a broker).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option(
    "--in-flight",
    type=click.IntRange(1, 100_000),
    default=64,
    show_default=True,
    help="Judge calls in flight (in-process mode).",
)
@handle_errors
def resume(
    run_name: str | None,
    reasons: tuple[str, ...],
    max_cost: float | None,
    judges_files: tuple[str, ...],
    no_wait: bool,
    quiet: bool,
    in_flight: int,
) -> None:
    """Judge again what is pending, stale or failed, within the run's budget (idempotent)."""
    settings = settings_mod.load()
    judges = pipeline.load_judges((), judges_files) if judges_files else []
    store = open_store()
    info = find_run(store, run_name)
    if not settings.broker_url:
        pipeline.check_judges_locally(list(RunContext.from_config(info.config).judges.values()))
    pipeline.preflight(settings)
    dispatcher = pipeline.make_dispatcher(settings, store, in_flight)
    reset, sent, changed = pipeline.resume(
        store, info, dispatcher, settings, reasons=reasons, max_cost=max_cost, judges=judges
    )
    for change in changed:
        click.echo(f"judge settings updated: {change}", err=True)
    click.echo(
        f"run {info.name}: {reset} failed judgments reset, {sent.sent} calls dispatched",
        err=True,
    )
    info = store.run_by_id(info.id)
    _say_held_back(info, sent)
    if no_wait and settings.broker_url:
        return
    pipeline.wait(store, info, dispatcher, progress=not quiet, leave_open=sent.held_back_rows,
                  quiet_after=settings.stall_seconds)  # fmt: skip
    _finish(store, info, sent.held_back_rows)


@main.command(epilog=_epilog(ENV_WORKER))
@click.option(
    "--processes", type=click.IntRange(1, 1024), default=1, show_default=True,
    help="Worker processes on this machine.",
)  # fmt: skip
@click.option(
    "--in-flight",
    type=click.IntRange(1, 100_000),
    default=256,
    show_default=True,
    help="Judge calls in flight per process.",
)
@click.option(
    "--loglevel",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="INFO",
    show_default=True,
    help="Log level; per-request lines only at DEBUG.",
)
@handle_errors
def worker(processes: int, in_flight: int, loglevel: str) -> None:
    """Start Celery workers on the configured broker."""
    from workers import worker as worker_mod

    sys.exit(worker_mod.run(processes, in_flight, loglevel.upper()))


@main.command()
@click.argument("run_name", required=False)
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")
@handle_errors
def status(run_name: str | None, as_json: bool) -> None:
    """Counts of done, failed and pending judgments, paid calls and cost (latest run by
    default)."""
    store = open_store()
    info = find_run(store, run_name)
    counts = queries.status(store, info.id, info.name)
    if as_json:
        click.echo(json.dumps(counts.as_dict()))
        return
    click.echo(
        f"run {counts.run}: {counts.done} done, {counts.failed} failed, "
        f"{counts.pending} pending of {counts.total}"
    )
    for reason, n in counts.failed_by_reason.items():
        click.echo(f"  failed ({reason}): {n}")
    for halt in store.halts(info.id).values():
        click.echo(f"  {halt.detail}")
    click.echo(
        f"  {counts.calls} judge calls paid (${counts.cost:.4f}), {counts.prompt_tokens} prompt "
        f"+ {counts.completion_tokens} completion tokens"
    )


@main.command()
@click.argument("run_name", required=False)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "csv"]),
    default="jsonl",
    show_default=True,
    help="Output format.",
)
@handle_errors
def export(run_name: str | None, fmt: str) -> None:
    """One row per judgment, with its rationale and the judge's raw output."""
    store = open_store()
    info = find_run(store, run_name)
    rows = queries.export_rows(store, info.id, info.name)
    out = sys.stdout
    if fmt == "csv":
        writer = csv.DictWriter(out, fieldnames=queries.export_fields(store, info.id))
        writer.writeheader()
        writer.writerows(rows)
    else:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


@main.group(invoke_without_command=True)
@click.pass_context
@handle_errors
def runs(ctx: click.Context) -> None:
    """The runs in the database: name, created, models, judges, progress and cost."""
    if ctx.invoked_subcommand is not None:
        return
    store = open_store()
    rows = queries.runs_overview(store)
    if not rows:
        click.echo("no runs yet; start one with `flask-eval run`", err=True)
        return
    head = (
        f"{'name':<28} {'created':<16} {'models':>6} {'judges':>6} "
        f"{'done/failed/total':>22} {'cost':>10}"
    )
    click.echo(head)
    for r in rows:
        progress = f"{r['done']}/{r['failed']}/{r['total']}"
        click.echo(
            f"{r['name'][:28]:<28} {r['created']:<16} {r['models']:>6} {r['judges']:>6} "
            f"{progress:>22} {r['cost']:>10.4f}"
        )


@runs.command("delete")
@click.argument("run_name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@handle_errors
def runs_delete(run_name: str, yes: bool) -> None:
    """Delete a run: its inputs, ledger and the paid answers no other run uses. Its
    messages still queued are dropped by the workers."""
    store = open_store()
    info = find_run(store, run_name)
    counts = queries.status(store, info.id, info.name)
    if not yes:
        click.confirm(
            f"delete run {info.name} ({counts.total} judgments, {counts.calls} paid calls)?",
            abort=True,
            err=True,
        )
    store.delete_run(info.id)
    click.echo(f"deleted run {info.name}", err=True)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8765, show_default=True, help="Port (0: any free port).")
@click.option("--latency-ms", default=0.0, show_default=True, help="Latency of an answer (ms).")
@click.option(
    "--latency-dist",
    type=click.Choice(["fixed", "lognormal"]),
    default="fixed",
    show_default=True,
    help="Fixed latency, or log-normal with --latency-ms as its median.",
)
@click.option("--sigma", default=0.5, show_default=True, help="Spread of the log-normal latency.")
@click.option("--error-rate", default=0.0, show_default=True, help="Share of 5xx answers.")
@click.option("--garbage-rate", default=0.0, show_default=True, help="Share of malformed answers.")
@click.option("--rate-limit-rate", default=0.0, show_default=True, help="Share of 429 answers.")
@click.option("--timeout-rate", default=0.0, show_default=True, help="Share of requests that hang.")
@click.option("--rpm", type=int, default=None, help="Requests per minute before 429s.")
@click.option("--tpm", type=int, default=None, help="Prompt tokens per minute before 429s.")
@click.option("--score", type=click.IntRange(1, 5), default=None, help="Give every score this.")
@click.option("--na-rate", default=0.0, show_default=True, help="Share of skills scored N/A.")
@click.option("--refusal-rate", default=0.0, show_default=True, help="Share of refusals.")
@click.option("--html-rate", default=0.0, show_default=True, help="Share of HTML error pages.")
@click.option("--quote-response", is_flag=True, help="Judges quote the response they judge.")
@click.option(
    "--position-bias", default=0.0, show_default=True,
    help="Share of pairwise judgments that pick the response shown first, whatever it says.",
)  # fmt: skip
@click.option(
    "--min-max-tokens", type=int, default=None,
    help="Cut off answers to requests allowing fewer completion tokens than this.",
)  # fmt: skip
@click.option("--require-key", default=None, help="Answer 401 to requests without this key.")
@click.option("--seed", default=0, show_default=True, help="Seed of the answers and faults.")
@handle_errors
def simulate(host: str, port: int, **options: Any) -> None:
    """A judge simulator speaking the OpenAI and Anthropic wire formats (no real model)."""
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
    """The whole pipeline on shipped example data against a simulated judge."""
    from flask_eval.demo import run_demo

    run_demo()


from flask_eval.cli_report import register as _register_report  # noqa: E402

_register_report(main)
