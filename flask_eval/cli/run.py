"""`flask-eval run` and `flask-eval resume`: validate, write the run and its ledger,
dispatch, wait, and say how it ended."""

from __future__ import annotations

import click

from flask_eval.app import pipeline
from flask_eval.cli.common import (
    ENV_RUN,
    RunIncomplete,
    epilog,
    find_run,
    handle_errors,
    open_store,
)
from flask_eval.core import settings as settings_mod
from flask_eval.core.errors import FailureReason, InputError
from flask_eval.producer.context import RunContext
from flask_eval.producer.dispatch import Dispatched
from flask_eval.producer.estimate import format_estimates
from flask_eval.producer.pairs import describe_plan
from flask_eval.storage import queries
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store


@click.command(epilog=epilog(ENV_RUN))
@click.option("--instances", default=None, help="FLASK evaluation set (JSON Lines).")
@click.option(
    "--biggen",
    default=None,
    metavar="FILE",
    help="BiGGen Bench instances, each with its own rubric, and their responses (JSON).",
)
@click.option(
    "--biggen-llm-judge",
    is_flag=True,
    help="Also judge BiGGen's 18 llm_judge_* instances, which BiGGen's own pipeline skips "
    "for Prometheus evaluators (left out by default).",
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
    biggen_llm_judge: bool,
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
        biggen_llm_judge=biggen_llm_judge,
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
    from flask_eval.app.report import build_report
    from flask_eval.report.render import run_summary

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


@click.command(epilog=epilog(ENV_RUN))
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


def register(main: click.Group) -> None:
    """Add ``run`` and ``resume`` to ``main``."""
    main.add_command(run)
    main.add_command(resume)
