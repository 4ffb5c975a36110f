"""`flask-eval run` and `flask-eval resume`: validate, write the run and its ledger,
dispatch, then wait and say how it ended (cli/wait.py).

The pipeline and the store are imported where a command runs, not with this module:
`run --help` imports neither SQLAlchemy nor Celery (start-up, docs/design/concurrency.md).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from flask_eval.cli.common import (
    ENV_RUN,
    SHORT_HELP,
    EnvHelp,
    FiniteRange,
    find_run,
    handle_errors,
    open_store,
)
from flask_eval.cli.dry_run import print_dry_run
from flask_eval.cli.job_options import image_options
from flask_eval.cli.wait import check_waiting, quiet_option, timeout_option, wait_and_finish
from flask_eval.core import settings as settings_mod
from flask_eval.core.errors import FailureReason, InputError
from flask_eval.core.probes import is_twin

if TYPE_CHECKING:
    from flask_eval.core.spec import RunSpec
    from flask_eval.producer.dispatch import Dispatched
    from flask_eval.storage.records import RunInfo


@click.command(cls=EnvHelp, env=ENV_RUN, short_help=SHORT_HELP["run"])
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
    "--multifaceted",
    default=None,
    metavar="FILE",
    help="Janus's Multifaceted Bench (JSON Lines or JSON): instances with a system message "
    "and several rubrics each; responses it carries or --responses NAME=PATH.",
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
    "--model",
    "models",
    multiple=True,
    metavar="NAME",
    help="Name the model whose responses a --biggen, --multifaceted or --prometheus-set "
    "file carries "
    "(default: its response_model_name, or the file's name); for --pairwise-set, give it "
    "twice: the first and the second response's model.",
)
@click.option(
    "--criteria",
    default=None,
    metavar="FILE",
    help="Custom criteria (YAML) instead of FLASK's skills; instances may pick theirs "
    "with a 'criteria' field and need only an id and an instruction.",
)
@click.option(
    "--no-reference", is_flag=True, help="Reference-free: judges never see reference answers."
)
@click.option(
    "--reference-answers",
    default=None,
    metavar="FILE",
    help="Reference answers of conversations, one per turn, by question_id (FastChat's "
    "model_answer JSON Lines, e.g. MT-Bench's reference_answer/gpt-4.jsonl).",
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
    help="A judge, provider/model[@BASE_URL], optionally named (gpt=openai/gpt-5.4); "
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
@click.option(
    "--human-first",
    "human_first",
    type=click.Choice(["random", "disagreement"]),
    default="random",
    show_default=True,
    help="The order of people's queues (judges file entries `spec: human/NAME`): random, "
    "or the items the run's judges disagree on most first.",
)
@click.option(
    "--probes",
    "probes",
    default=None,
    callback=lambda _ctx, _param, value: split_names(value),
    metavar="NAMES",
    help="Judge probes, comma-separated: length, style, order, inject, swap, self, or all "
    "(each response's twins judged beside it; the judge card in `flask-eval card`).",
)
@click.option(
    "--family",
    "families",
    multiple=True,
    metavar="NAME=FAMILY",
    help="The family of a model or judge, for the self-preference probe; repeat.",
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
    "--samples",
    type=click.IntRange(1, 20),
    default=1,
    show_default=True,
    help="Ask each judge K times per item (sample k>1 sent with seed k, a paid answer of "
    "its own); the report scores a judge by the mean of its samples and shows their "
    "self-consistency.",
)
@click.option(
    "--in-flight",
    type=click.IntRange(1, 100_000),
    default=64,
    show_default=True,
    help="Judge calls in flight (in-process mode).",
)
@click.option("--retry-failed", is_flag=True, help="Also judge again what failed before.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print jobs, calls, the calls the answer cache answers, tokens and cost (live, "
    "through batch APIs, and batched with shared prompt prefixes cached); spend nothing.",
)
@click.option(
    "--max-cost",
    type=FiniteRange(min=0),
    default=None,
    metavar="USD",
    help="The run's budget: stop dispatching when its metered plus estimated cost would pass "
    "this (kept with the run; resume honours it; a new --max-cost replaces it). Every judge "
    "needs a price.",
)
@click.option(
    "--spec",
    "spec_file",
    default=None,
    metavar="FILE",
    help="Run what a YAML run spec says (`--print-spec` writes one); the flags that say "
    "what to run cannot be given beside it.",
)
@click.option(
    "--print-spec",
    is_flag=True,
    help="Validate, print the run's spec (the YAML that --spec reads) and stop: nothing "
    "is written or sent.",
)
@click.option("--no-wait", is_flag=True, help="Enqueue and return (needs a broker).")
@image_options
@timeout_option
@quiet_option
@handle_errors
def run(**flags: Any) -> None:
    """Validate inputs, plan one judgment per (instance, response, skill, judge), judge them.

    Waits until every judgment is done and exits 0, or 1 with a summary when some failed.
    """
    from flask_eval.app import pipeline
    from flask_eval.app.budget import check_budget
    from flask_eval.core.spec import dump_spec
    from flask_eval.storage.store import Store

    spec = _spec_of(flags)
    dry_run, no_wait, timeout, quiet = (
        flags["dry_run"] or flags["print_spec"],
        flags["no_wait"],
        flags["timeout"],
        flags["quiet"],
    )
    settings = settings_mod.load()
    if not dry_run:
        check_waiting(settings, no_wait, timeout)
    plan = pipeline.prepare(spec)
    if flags["print_spec"]:
        click.echo(dump_spec(spec), nl=False)
        return
    max_cost = spec.budget.max_cost
    check_budget(plan.judges, plan.name, settings.database_url, max_cost)
    for model, (answered, total) in plan.inputs.coverage().items():
        if not is_twin(model):  # a probe's twins: the line below
            click.echo(f"{model}: {answered}/{total} instances answered", err=True)
    if plan.probes:
        variants = plan.probes["variants"]
        click.echo(
            f"probes: {', '.join(plan.probes['probes'])}; {len(variants)} twin(s) of each "
            f"response ({', '.join(variants) or 'none'})",
            err=True,
        )
        for probe, why in plan.probes["left_out"].items():
            click.echo(f"probe {probe} left out: {why}", err=True)
    for model, n in plan.inputs.ignored().items():
        click.echo(
            f"{model}: {n} responses to instances not in the instances file ignored", err=True
        )
    if dry_run:
        print_dry_run(plan, settings)
        return
    if not settings.broker_url:
        pipeline.check_judges_locally(plan.judges)
    pipeline.preflight(settings)
    store = Store(settings.database_url)
    dispatcher = pipeline.make_dispatcher(settings, store, spec.options.in_flight)
    started = pipeline.start(
        plan,
        store,
        dispatcher,
        settings,
        retry_failed=spec.options.retry_failed,
        max_cost=max_cost,
        say=_progress_line(quiet),
    )
    info, sent = started.run, started.dispatched
    for change in started.changed:
        click.echo(f"judge settings updated: {change}", err=True)
    verb = "created" if started.created else "resumed"
    click.echo(
        f"run {info.name} {verb}: {sent.sent} judge calls dispatched{_cost(info, sent)}", err=True
    )
    _say_held_back(info, sent)
    if no_wait:
        return
    wait_and_finish(store, info, dispatcher, settings, sent.held_back_rows, quiet, timeout)


#: `run`'s flags that do not say what is run (how it is waited for, what is printed)
_NOT_SPEC = ("spec_file", "print_spec", "dry_run", "no_wait", "timeout", "quiet")
#: `run`'s flags that say the opposite of the spec's key
_NEGATED = {"no_reference": "reference", "no_swap": "swap"}


def _spec_of(flags: dict[str, Any]) -> RunSpec:
    """The run's spec: of its --spec file, or of its flags (the two are never mixed: a
    flag that says what to run beside --spec is refused in one line)."""
    from flask_eval.core.spec import RunSpec, load_spec

    given = {k: v for k, v in flags.items() if k not in _NOT_SPEC}
    if flags["spec_file"] is not None:
        ctx = click.get_current_context()
        mixed = [
            k for k in given if ctx.get_parameter_source(k) != click.core.ParameterSource.DEFAULT
        ]
        if mixed:
            flag = next(p.opts[0] for p in ctx.command.params if p.name == mixed[0])
            raise InputError(
                f"{flag} is given beside --spec {flags['spec_file']}; put it in the spec "
                "or leave --spec out"
            )
        return load_spec(flags["spec_file"])
    flat = {_NEGATED.get(k, k): (not v if k in _NEGATED else v) for k, v in given.items()}
    return RunSpec.from_flat(flat)


def split_names(value: str | None) -> tuple[str, ...]:
    """``a,b`` as ``("a", "b")`` (none: empty)."""
    return tuple(n.strip() for n in (value or "").split(",") if n.strip())


def _progress_line(quiet: bool) -> Callable[[str], None] | None:
    """How the pipeline says what takes time before the first answer (not with --quiet)."""
    if quiet:
        return None
    return lambda line: click.echo(line, err=True)


def _cost(info: RunInfo, sent: Dispatched) -> str:
    """What the dispatched calls cost: estimated, unknown (a judge without a price), or
    free (the answer cache)."""
    from flask_eval.app.progress import cost_unknown

    unpriced = cost_unknown(info.config)
    parts = [f"{sent.cached} answered from the answer cache"] if sent.cached else []
    if unpriced:
        parts.append("cost unknown: " + "; ".join(f"{j}: {w}" for j, w in unpriced.items()))
    else:
        parts.append(f"estimated ${sent.estimated_cost:.4f}")
    return f" ({'; '.join(parts)})"


def _say_held_back(info: RunInfo, sent: Dispatched) -> None:
    if sent.held_back:
        click.echo(
            f"--max-cost {info.config.max_cost}: stopped dispatching at "
            f"${sent.spent + sent.estimated_cost:.4f}; {sent.held_back} calls "
            f"({sent.held_back_rows} judgments) stay pending; raise it with "
            f"`flask-eval resume {shlex.quote(info.name)} --max-cost USD` to continue",
            err=True,
        )


@click.command(cls=EnvHelp, env=ENV_RUN, short_help=SHORT_HELP["resume"])
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
    type=FiniteRange(min=0),
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
@timeout_option
@quiet_option
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
    timeout: float | None,
    quiet: bool,
    in_flight: int,
) -> None:
    """Judge again what is pending, stale or failed, within the run's budget (idempotent)."""
    from flask_eval.app import pipeline
    from flask_eval.producer.context import RunContext

    settings = settings_mod.load()
    judges = pipeline.load_judges((), judges_files) if judges_files else []
    check_waiting(settings, no_wait, timeout)
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
    if no_wait:
        return
    wait_and_finish(store, info, dispatcher, settings, sent.held_back_rows, quiet, timeout)


def register(main: click.Group) -> None:
    """Add ``run`` and ``resume`` to ``main``."""
    main.add_command(run)
    main.add_command(resume)
