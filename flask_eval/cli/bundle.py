"""`flask-eval export` (a run's judgments as JSON Lines or CSV, or the whole run as a
bundle) and `flask-eval import` (a bundle into the configured store); the use cases are in
``app/exporting.py`` and ``app/bundle.py``.
"""

from __future__ import annotations

import sys

import click

from flask_eval.cli.common import SHORT_HELP, find_run, handle_errors, open_store
from flask_eval.core.errors import InputError


@click.command("export", short_help=SHORT_HELP["export"])
@click.argument("run_name", required=False)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "csv", "fastchat"]),
    default=None,
    help="Output format; fastchat: one judge's judgments as FastChat's MT-Bench judgment "
    "file (JSON Lines that its show_result.py reads).  [default: jsonl]",
)
@click.option(
    "--judge",
    "judge",
    default=None,
    metavar="NAME",
    help="With --format fastchat: the judge whose judgments to write (needed when the run "
    "has several: FastChat's show_result.py pools every line of a file).",
)
@click.option(
    "--bundle",
    "bundle_path",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="PATH",
    help="Write the whole run (inputs, configuration, judgments, paid answers) to PATH, "
    "one file that `flask-eval import` loads into another store.",
)
@handle_errors
def export(
    run_name: str | None, fmt: str | None, judge: str | None, bundle_path: str | None
) -> None:
    """One row per judgment, with its rationale and the judge's raw output (latest run by
    default); or, with --bundle, the whole run as one portable file."""
    if bundle_path is not None and fmt is not None:
        raise InputError("--bundle writes a bundle: drop --format")
    if judge is not None and fmt != "fastchat":
        raise InputError("--judge goes with --format fastchat")
    store = open_store()
    info = find_run(store, run_name)
    if bundle_path is not None:
        from flask_eval.app.bundle import export_bundle

        written = export_bundle(store, info, bundle_path)
        click.echo(
            f"exported run {info.name} to {written.path}: {written.rows['judgment']} "
            f"judgments, {written.rows['call']} paid answers, {written.size:,} bytes "
            f"in {written.seconds:.1f} s",
            err=True,
        )
        return
    from flask_eval.app.exporting import export_rows, fastchat_export
    from flask_eval.report import render

    if fmt == "fastchat":
        render.write_jsonl(sys.stdout, fastchat_export(store, info, judge).rows)
        return
    export = export_rows(store, info)
    if fmt == "csv":
        render.write_csv(sys.stdout, export.fields, export.rows)
    else:
        render.write_jsonl(sys.stdout, export.rows)


@click.command("import", short_help=SHORT_HELP["import"])
@click.argument("path", type=click.Path(dir_okay=True))
@click.option(
    "--as",
    "as_name",
    default=None,
    metavar="NAME",
    help="Name the run NAME in this store (default: its name in the bundle).",
)
@handle_errors
def import_command(path: str, as_name: str | None) -> None:
    """Load a bundle written by `export --bundle` into the configured store, whole or not
    at all."""
    from flask_eval.app.bundle import check_bundle, import_bundle

    bundle = check_bundle(path)  # the whole file, before the store is opened
    loaded = import_bundle(open_store(create=True), bundle, as_name)
    copied = f", {loaded.answers_copied} copied" if loaded.answers_copied else ""
    click.echo(
        f"imported run {loaded.run} from {path}: {loaded.rows.get('judgment', 0)} judgments, "
        f"{loaded.rows.get('call', 0)} paid answers ({loaded.answers_found} already in this "
        f"store{copied}) in {loaded.seconds:.1f} s",
        err=True,
    )


def register(group: click.Group) -> None:
    group.add_command(export)
    group.add_command(import_command)
