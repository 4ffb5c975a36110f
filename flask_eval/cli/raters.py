"""`flask-eval raters`: the people who rate a run's items (add, revoke, list) and their
ratings as files (import, export); thin adapters over app/raters.py."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click

from flask_eval.cli.common import SHORT_HELP, find_run, handle_errors, open_store
from flask_eval.core.people import RATE_PORT

if TYPE_CHECKING:
    from flask_eval.storage.store import Store

F = TypeVar("F", bound=Callable[..., Any])

#: the one-line help of the group


def db_option(command: F) -> F:
    return click.option(
        "--db",
        "db",
        default=None,
        metavar="URL",
        help="The store (default: the configured one, FLASK_EVAL_DATABASE_URL).",
    )(command)


def store_at(db: str | None, *, create: bool = False) -> Store:
    """The store at ``db`` (else the configured one): ``common.open_store``."""
    return open_store(create=create, url=db)


@click.group(short_help=SHORT_HELP["raters"])
def raters() -> None:
    """The people who rate a run's items in the rating pages: add one (a sign-in link
    with a new token), revoke one, list them; import ratings made elsewhere, export the
    ratings of a run."""


@raters.command("add", short_help="Add a rater, or give one a new token (printed once).")
@click.argument("name")
@click.option(
    "--run",
    "run_name",
    default=None,
    metavar="RUN",
    help="The token signs in for this run only (default: every run).",
)
@click.option("--may-view", is_flag=True, help="The rater may also read the read-only pages.")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="The host of the printed link."
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=RATE_PORT,
    show_default=True,
    help="The port of the printed link.",
)
@db_option
@handle_errors
def add(
    name: str, run_name: str | None, may_view: bool, host: str, port: int, db: str | None
) -> None:
    """Add rater NAME with a new sign-in token, printed once (only its hash is stored);
    a rater added before gets a new token and their old one stops working."""
    from flask_eval.app.raters import add_rater, signin_link, valid_name

    valid_name(name)  # before the store is opened
    store = store_at(db, create=run_name is None)
    run = None if run_name is None else find_run(store, run_name)
    new = add_rater(store, name, run, may_view)
    scope = f"run {new.run}" if new.run is not None else "every run"
    if new.replaced:
        click.echo(f"rater {new.name}: new token for {scope}; the old one no longer signs in")
    else:
        click.echo(f"rater {new.name} added, for {scope}")
    click.echo(f"token (shown once, only its hash is stored): {new.token}")
    click.echo(f"sign-in link: {signin_link(new.token, host, port)}")


@raters.command("revoke", short_help="Revoke a rater's token; their ratings stay.")
@click.argument("name")
@db_option
@handle_errors
def revoke(name: str, db: str | None) -> None:
    """Revoke rater NAME's token and end their sessions (their ratings stay)."""
    from flask_eval.app.raters import revoke_rater

    revoke_rater(store_at(db), name)
    click.echo(f"rater {name} revoked")


@raters.command("list", short_help="The raters (never a token).")
@db_option
@handle_errors
def list_command(db: str | None) -> None:
    """The raters: name, run, whether they may view, added, revoked (never a token)."""
    from flask_eval.app.raters import rater_lines

    lines = rater_lines(store_at(db))
    if not lines:
        click.echo("no raters yet; add one with `flask-eval raters add NAME`", err=True)
        return
    click.echo(f"{'name':<40} {'run':<28} {'view':<4} {'created (UTC)':<16} revoked (UTC)")
    for r in lines:
        run = (r.run or "(every run)")[:28]
        view = "yes" if r.may_view else "no"
        line = f"{r.name:<40} {run:<28} {view:<4} {_utc(r.created_at):<16} {_utc(r.revoked_at)}"
        click.echo(line)


def _utc(moment: datetime | None) -> str:
    """A moment in UTC, to the minute ("-": none); SQLite's come without their zone."""
    if moment is None:
        return "-"
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M")


@raters.command("import", short_help="Store a run's ratings from a CSV or JSON Lines file.")
@click.argument("path", metavar="FILE", type=click.Path(dir_okay=False))
@click.option("--run", "run_name", required=True, metavar="RUN", help="The run rated.")
@db_option
@handle_errors
def import_command(path: str, run_name: str, db: str | None) -> None:
    """Store ratings made elsewhere (CSV or JSON Lines: model, instance, criterion, score,
    rater[, rationale][, model_b]) as the ratings of their raters, each once. The whole
    file is checked first: a bad line is an error at FILE:LINE and nothing is written."""
    from flask_eval.app.raters import import_ratings

    store = store_at(db)
    run = find_run(store, run_name)
    done = import_ratings(store, run, path)
    click.echo(
        f"imported {path} into run {run.name}: {done.lines} ratings, {done.stored} stored, "
        f"{done.already} already in the ledger",
        err=True,
    )


@raters.command("export", short_help="A run's ratings in the import format.")
@click.option("--run", "run_name", required=True, metavar="RUN", help="The run rated.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["csv", "jsonl"]),
    default="csv",
    show_default=True,
    help="Output format.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    metavar="FILE",
    help="Write to FILE (whole or not at all) instead of standard output.",
)
@click.option(
    "--flagged",
    is_flag=True,
    help="List the items the raters flagged (could not judge) and why, instead of the "
    "ratings (a flag is no rating: this list is not an import file).",
)
@db_option
@handle_errors
def export(run_name: str, fmt: str, output: str | None, flagged: bool, db: str | None) -> None:
    """The people's ratings of a run in the import format, sorted by rater, model,
    instance and criterion: imported into a copy of the run, they give it the same
    ratings."""
    from flask_eval.app.raters import rating_rows
    from flask_eval.core.files import replaced_whole

    store = store_at(db)
    rows = rating_rows(store, find_run(store, run_name), flagged=flagged)
    if output is None:
        # a reader that goes away (`| head`) ends nothing: the CLI's standard streams
        # take a closed pipe in their stride (core/pipes.py); a stream that is not the
        # CLI's own may still raise, and the export then stops, quietly
        try:
            rows.write(sys.stdout, fmt)
            sys.stdout.flush()
        except BrokenPipeError:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, sys.stdout.fileno())  # what is left goes nowhere, quietly
            os.close(null)
        return
    with replaced_whole(output) as out:
        rows.write(out, fmt)
    click.echo(f"wrote {len(rows.rows)} rows to {output}", err=True)


@raters.command("queue", short_help="Plan a labels template's cells into a rater's queue.")
@click.argument("run_name", metavar="RUN")
@click.argument("path", metavar="FILE", type=click.Path(dir_okay=False))
@click.option("--rater", required=True, metavar="NAME", help="The rater whose queue it is.")
@db_option
@handle_errors
def queue(run_name: str, path: str, rater: str, db: str | None) -> None:
    """Plan the cells of FILE (a labels template, `report --suggest-labels`: model,
    instance_id, skill, score, probability) into the rater's queue in the rating
    workspace, in the file's order. Calibrate with `report --calibrate human/NAME
    --label-probabilities FILE` so that the probabilities weigh the ratings."""
    from flask_eval.app.rater_queue import queue_labels

    store = store_at(db)
    run = find_run(store, run_name)
    done = queue_labels(store, run, rater, path)
    click.echo(
        f"queued {done.cells} cells of {path} for {rater} in run {run.name}: {done.items} "
        f"items, {done.new} new",
        err=True,
    )


def register(group: click.Group) -> None:
    group.add_command(raters)
