"""`flask-eval status [--watch]` and `flask-eval runs`: thin adapters over app/progress.py."""

from __future__ import annotations

import itertools
import json
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

from flask_eval.cli.common import SHORT_HELP, find_run, handle_errors, open_store

if TYPE_CHECKING:
    from flask_eval.storage.records import RunInfo


def batch_line(judge: str, states: dict[str, dict[str, int]]) -> str:
    """One line of a batch judge's batches and calls by state."""

    def by_state(counts: dict[str, int]) -> str:
        return ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "none"

    return (
        f"judge {judge} through its provider's batch API: batches {by_state(states['batches'])}"
        f"; calls {by_state(states['calls'])}"
    )


@click.command(short_help=SHORT_HELP["status"])
@click.argument("run_name", required=False)
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")
@click.option(
    "--watch",
    is_flag=True,
    help="A live view of every unfinished run (or RUN_NAME) and the live workers, until "
    "they finish (waiting for a run to start, or for RUN_NAME to be created, while there "
    "is none); with --json, one JSON object per refresh.",
)
@click.option(
    "--interval",
    type=click.FloatRange(0.1, 3600),
    default=2.0,
    show_default=True,
    help="Seconds between two refreshes of --watch.",
)
@handle_errors
def status(run_name: str | None, as_json: bool, watch: bool, interval: float) -> None:
    """Counts of done, failed and pending judgments, paid calls and cost (latest run by
    default); --watch: live, per judge, with the workers."""
    if watch:
        sys.exit(watch_runs(run_name, as_json, interval))
    from flask_eval.app.batches import duplicate_note
    from flask_eval.app.progress import run_status
    from flask_eval.report.document import cost_text

    store = open_store()
    info = find_run(store, run_name)
    st = run_status(store, info)
    if as_json:
        click.echo(json.dumps(st.as_dict()))
        return
    counts = st.counts
    click.echo(
        f"run {counts.run}: {counts.done} done, {counts.failed} failed, "
        f"{counts.pending} pending of {counts.total}"
    )
    for reason, n in counts.failed_by_reason.items():
        click.echo(f"  failed ({reason}): {n}")
    for detail in st.halts:
        click.echo(f"  {detail}")
    # an unpriced judge's calls are metered at $0: never shown as their cost
    cost = cost_text(counts.cost, st.unpriced)
    click.echo(
        f"  {counts.calls} judge calls paid ({cost}), {counts.prompt_tokens} prompt "
        f"+ {counts.completion_tokens} completion tokens"
    )
    if counts.cached_tokens or counts.cache_write_tokens or counts.batch_calls:
        click.echo(
            f"  of the prompt tokens, {counts.cached_tokens} read from the providers' prompt "
            f"caches and {counts.cache_write_tokens} written to them (at the judges' cache "
            f"prices); {counts.batch_calls} calls made through a batch API"
        )
    if counts.untrusted:
        click.echo(
            f"  {counts.untrusted} judge calls with a usage not trusted (impossible token "
            "counts): kept, counted at a safe estimate (their usage_note holds the usage as given)"
        )
    for judge, states in st.batches.items():
        click.echo(f"  {batch_line(judge, states)}")
    for judge, n in sorted(st.duplicates.items()):
        click.echo(f"  {duplicate_note(judge, n)}")
    if st.cache_answered:
        click.echo(f"  {st.cache_answered} judge calls answered from the answer cache (free)")
    from flask_eval.app.people import people_lines

    for line in people_lines(info, counts.rated, counts.flagged, counts.waiting):
        click.echo(line)


def watch_runs(run_name: str | None, as_json: bool, interval: float) -> int:
    """Draw the live view every ``interval`` s until its runs are finished (0; 1 if one
    was deleted meanwhile), or until Ctrl-C (130), SIGTERM or SIGHUP (128 + N); with
    ``as_json``, one JSON object per refresh on stdout. While there is no run to show
    (none unfinished, or ``run_name`` not created yet) it waits for one, saying so."""
    from flask_eval.app.progress import live_view, watched_runs
    from flask_eval.cli import live as render
    from flask_eval.core import settings as settings_mod

    store = open_store()
    queue = settings_mod.load().queue
    runs: dict[int, RunInfo] = {}
    screen = None if as_json else render.Screen()
    try:
        with render.ended_by_signals():
            for _ in refreshes(interval):
                # the named run once it exists; else every unfinished run, those started
                # since included (a watched run deleted meanwhile stays, shown deleted)
                runs.update({r.id: r for r in watched_runs(store, run_name)})
                view = live_view(store, list(runs.values()), queue)
                if screen is None:
                    click.echo(json.dumps(view.as_dict()))
                    sys.stdout.flush()
                else:
                    screen.draw(render.view(view, interval, run_name))
                if view.finished:
                    return 1 if any(r.deleted for r in view.runs) else 0
    except KeyboardInterrupt:
        return 130
    except render.Ended as ended:
        return 128 + ended.signum
    finally:
        if screen is not None:
            screen.close()
    raise AssertionError("unreachable: refreshes() never ends")


def refreshes(interval: float) -> Iterator[int]:
    """Count refreshes ``interval`` s apart from the first (at once): a slow refresh
    shortens the wait before the next, never piling up a lag."""
    due = time.monotonic()
    for n in itertools.count():
        yield n
        due += interval
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        else:
            due = time.monotonic()


@click.group(invoke_without_command=True, short_help=SHORT_HELP["runs"])
@click.pass_context
@handle_errors
def runs(ctx: click.Context) -> None:
    """The runs in the database: name, created, models, judges, progress and cost."""
    if ctx.invoked_subcommand is not None:
        return
    from flask_eval.app.progress import runs_overview
    from flask_eval.report.document import cost_text

    rows: list[dict[str, Any]] = runs_overview(open_store())
    if not rows:
        click.echo("no runs yet; start one with `flask-eval run`", err=True)
        return
    head = (
        f"{'name':<28} {'created':<16} {'models':>6} {'judges':>6} "
        f"{'done/failed/total':>22} {'cache read/write tok':>22} {'cost':>10}"
    )
    click.echo(head)
    for r in rows:
        progress = f"{r['done']}/{r['failed']}/{r['total']}"
        cache = f"{r['cached_tokens']}/{r['cache_write_tokens']}"
        click.echo(
            f"{r['name'][:28]:<28} {r['created']:<16} {r['models']:>6} {r['judges']:>6} "
            f"{progress:>22} {cache:>22} {cost_text(r['cost'], r['unpriced']):>10}"
        )


@runs.command("delete")
@click.argument("run_name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@handle_errors
def runs_delete(run_name: str, yes: bool) -> None:
    """Delete a run: its inputs, ledger and the paid answers no other run uses. Its
    messages still queued are dropped by the workers."""
    from flask_eval.storage import queries

    store = open_store()
    info = find_run(store, run_name)
    counts = queries.status(store, info.id, info.name)
    if not yes:
        click.confirm(
            f"delete run {info.name} ({counts.total} judgments, {counts.calls} paid calls)?",
            abort=True,
            err=True,
        )
    from flask_eval.app.batches import cancel_open_batches

    for line in cancel_open_batches(store, info):  # before the rows naming them go
        click.echo(line, err=True)
    store.delete_run(info.id)
    click.echo(f"deleted run {info.name}", err=True)


def register(main: click.Group) -> None:
    main.add_command(status)
    main.add_command(runs)
