"""`flask-eval wait`, and how `run` and `resume` wait: the progress bar, `--timeout`,
Ctrl-C while workers judge, and the summary a run ends with.

The pipeline and the store are imported where a command runs (start-up: `wait --help`
imports neither SQLAlchemy nor Celery).
"""

from __future__ import annotations

import shlex
import sys
from typing import TYPE_CHECKING

import click

from flask_eval.cli.common import (
    ENV_RUN,
    SHORT_HELP,
    EnvHelp,
    FiniteRange,
    RunIncomplete,
    find_run,
    handle_errors,
    open_store,
)
from flask_eval.core import settings as settings_mod
from flask_eval.core.errors import InputError

if TYPE_CHECKING:
    from flask_eval.core.settings import Settings
    from flask_eval.producer.dispatch import Transport
    from flask_eval.storage.records import RunInfo
    from flask_eval.storage.store import Store

#: the longest --timeout: a week
MAX_TIMEOUT = 7 * 86_400.0

timeout_option = click.option(
    "--timeout",
    type=FiniteRange(min=0, min_open=True, max=MAX_TIMEOUT),
    default=None,
    metavar="SECONDS",
    help="Stop waiting after SECONDS (needs a broker: the workers keep judging, and "
    "`flask-eval wait RUN` waits again); exit code 1 if judgments are still open.",
)
quiet_option = click.option("--quiet", is_flag=True, help="No progress bar and no progress lines.")


def check_waiting(settings: Settings, no_wait: bool, timeout: float | None) -> None:
    """--no-wait and --timeout leave a run to workers: without a broker, this process
    judges it and must wait (before anything is written)."""
    if settings.broker_url:
        if no_wait and timeout is not None:
            raise InputError("--no-wait does not wait, so --timeout has nothing to bound")
        return
    if no_wait:
        raise InputError(
            "--no-wait needs a broker (FLASK_EVAL_BROKER_URL); in-process runs must wait"
        )
    if timeout is not None:
        raise InputError(
            "--timeout needs a broker (FLASK_EVAL_BROKER_URL): it stops waiting for workers; "
            "an in-process run judges here (stop it with Ctrl-C and rerun to resume)"
        )


def wait_and_finish(
    store: Store,
    info: RunInfo,
    dispatcher: Transport,
    settings: Settings,
    held_back: int,
    quiet: bool,
    timeout: float | None,
) -> None:
    """Wait for the run's open judgments, then say how it ended; on Ctrl-C or
    ``timeout`` (with a broker), say how to go on and exit 1."""
    from flask_eval.app import pipeline
    from flask_eval.app.waiting import StoppedWaiting

    try:
        halts = pipeline.wait(
            store,
            info,
            dispatcher,
            progress=not quiet,
            leave_open=held_back,
            quiet_after=settings.stall_seconds,
            timeout=timeout,
        )
    except StoppedWaiting as stopped:
        for line in stopped.lines():
            click.echo(line, err=True)
        sys.exit(stopped.exit_code)
    _finish(store, info, held_back, settings, sorted(halts))


def _finish(
    store: Store, info: RunInfo, held_back: int, settings: Settings, halted: list[str]
) -> None:
    """Print the run's summary; raise RunIncomplete (exit 1) unless every judgment is done."""
    from flask_eval.app.people import order_queues, people_lines
    from flask_eval.app.report import build_report
    from flask_eval.app.summary import ending_lines
    from flask_eval.report.render import run_summary
    from flask_eval.storage import queries

    order_queues(store, info)  # the judges answered: people's queues by their disagreement
    counts = queries.status(store, info.id, info.name)
    report = build_report(store, info, progress=False)
    click.echo(run_summary(report, counts.failed_by_reason), nl=False)
    for line in ending_lines(store, info, settings.judge_timeout, halted):
        click.echo(line)
    for line in people_lines(info, counts.rated, counts.flagged, counts.waiting):
        click.echo(line)
    if info.config.probes:  # a probe run: its judge card
        from flask_eval.app.probe_card import card_inputs
        from flask_eval.report.probe_card import card_of
        from flask_eval.report.probe_card_render import card_text

        click.echo(card_text(card_of(card_inputs(store, info))), nl=False)
    if counts.failed or counts.pending:
        parts = []
        if counts.failed:
            reasons = ", ".join(f"{r}: {n}" for r, n in counts.failed_by_reason.items())
            parts.append(f"{counts.failed} of {counts.total} judgments failed ({reasons})")
        if counts.pending:
            why = " (held back by --max-cost)" if held_back else ""
            parts.append(f"{counts.pending} of {counts.total} pending{why}")
        name = shlex.quote(info.name)
        # held back by the budget: resuming needs a larger one
        budget = " --max-cost USD" if held_back and counts.pending else ""
        raise RunIncomplete(
            f"run {info.name}: {'; '.join(parts)}; see `flask-eval export {name}`, then "
            f"`flask-eval resume {name}{budget}` to judge them again"
            + (f" (a budget above the ${info.config.max_cost} kept)" if budget else "")
        )


@click.command(cls=EnvHelp, env=ENV_RUN, short_help=SHORT_HELP["wait"])
@click.argument("run_name", required=False)
@timeout_option
@quiet_option
@handle_errors
def wait(run_name: str | None, timeout: float | None, quiet: bool) -> None:
    """Wait for the judgments of a run that workers are judging (after `run --no-wait`,
    Ctrl-C or `--timeout`), then print its summary; sends nothing (latest run by default).

    Exits 0 when every judgment is done, 1 when some failed or are still open.
    """
    from flask_eval.app import pipeline
    from flask_eval.producer.dispatch import MemoryTransport, dispatch_open

    settings = settings_mod.load()
    if not settings.broker_url:
        raise InputError(
            "wait follows a run that workers judge (FLASK_EVAL_BROKER_URL); without a broker "
            "nothing judges a run but `flask-eval resume RUN`"
        )
    pipeline.preflight(settings)
    store = open_store()
    info = find_run(store, run_name)
    dispatcher = pipeline.make_dispatcher(settings, store, 1)
    held_back = 0
    if info.config.dispatched != dispatcher.queue and info.config.max_cost is not None:
        # the run's budget held calls back: they stay pending (MemoryTransport sends nothing)
        held_back = dispatch_open(store, info, MemoryTransport(), 1).held_back_rows
        if held_back:
            click.echo(
                f"{held_back} judgments stay pending, held back by --max-cost "
                f"{info.config.max_cost}",
                err=True,
            )
    wait_and_finish(store, info, dispatcher, settings, held_back, quiet, timeout)


def register(main: click.Group) -> None:
    """Add ``wait`` to ``main``."""
    main.add_command(wait)
