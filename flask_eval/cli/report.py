"""`flask-eval report` (intervals, ensembles, comparisons, HTML) and `flask-eval agreement`.

Wire into the command line with :func:`register` (``register(main)`` in ``cli.py``, after
removing its older ``report`` command): it adds both commands to the group.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from flask_eval.app import imports
from flask_eval.app.rater_queue import read_probabilities
from flask_eval.app.report import Extras, agreement_for_run, build_report
from flask_eval.cli.common import RunIncomplete, find_run, handle_errors, open_store
from flask_eval.core.errors import InputError
from flask_eval.report import references, render
from flask_eval.report.bootstrap import DEFAULT_CONFIDENCE, DEFAULT_REPLICATES, DEFAULT_SEED
from flask_eval.report.ensemble import EnsembleSpec

FORMATS = ("table", "json", "csv", "html")
DEFAULT_HTML_DIR = "flask-eval-report"


def parse_ensembles(specs: Sequence[str]) -> list[EnsembleSpec]:
    try:
        return [EnsembleSpec.parse(s) for s in specs]
    except ValueError as exc:
        raise InputError(f"--ensemble: {exc}") from None


def load_references(args: Sequence[str]) -> list[references.Reference]:
    return imports.load_references(tuple(args))


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@click.command("report")
@click.argument("run_name", required=False)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="table",
    show_default=True,
    help="Text tables, JSON, CSV, or a self-contained HTML page with figures.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help=f"Write files into DIR (html: default ./{DEFAULT_HTML_DIR}; csv: one file per table).",
)
@click.option(
    "--ensemble",
    "ensemble_specs",
    multiple=True,
    metavar="METHOD[:QUORUM]",
    help="Add a virtual judge combining the judges: mean, median or majority (the score of "
    "a strict majority of the judges that scored the cell, else their median), with a "
    "quorum (default 1) of successful judges per cell; repeatable. E.g. --ensemble mean:2.",
)
@click.option(
    "--ensemble-judge",
    "ensemble_judges",
    multiple=True,
    metavar="JUDGE",
    help="Judges the ensembles combine (repeatable; default: all judges of the run).",
)
@click.option(
    "--reference",
    "reference_args",
    multiple=True,
    metavar="NAME=PATH",
    help="Reference scores (CSV or JSON Lines: model, instance_id, skill, score; or a "
    "Prometheus eval set's GPT-4 scores, a BiGGen evals file, a FLASK review file) to "
    "compare judges with, e.g. human=labels.csv; repeatable.",
)
@click.option(
    "--bootstrap",
    "replicates",
    type=click.IntRange(min=0),
    default=DEFAULT_REPLICATES,
    show_default=True,
    help="Bootstrap replicates (resampling instances); 0 for no intervals.",
)
@click.option(
    "--seed", type=int, default=DEFAULT_SEED, show_default=True, help="Seed of the bootstrap."
)
@click.option(
    "--confidence",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=DEFAULT_CONFIDENCE,
    show_default=True,
    help="Confidence level of the intervals.",
)
@click.option(
    "--details",
    is_flag=True,
    help="Text: also one block per model and judge, with every interval and count.",
)
@click.option(
    "--calibrate",
    "calibrate",
    metavar="PEOPLE",
    default=None,
    help="Add a section of each judge's scores calibrated to people's labels (PPI++: "
    "what people would say, with valid intervals): PEOPLE is a rater (human/NAME), a "
    "panel of the run, 'people' (every rater) or the NAME of a --reference.",
)
@click.option(
    "--suggest-labels",
    "suggest_labels",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Write a labels template of about N unlabelled cells whose labels would shrink "
    "the calibrated intervals most, drawn with known probabilities (see --labels-file).",
)
@click.option(
    "--labels-file",
    "labels_file",
    type=click.Path(dir_okay=False),
    default="labels-template.csv",
    show_default=True,
    help="Where --suggest-labels writes its template (fill the scores, then read it "
    "back with --reference NAME=FILE).",
)
@click.option(
    "--label-probabilities",
    "label_probabilities",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="With --calibrate human/NAME or a panel: the labels template whose cells were "
    "queued for the raters (`raters queue`); its probabilities weigh their ratings.",
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
@handle_errors
def report_command(**flags: Any) -> None:
    """A leaderboard, then skill, ability, domain and difficulty means per judge (models
    as columns), paired comparisons; intervals in JSON, CSV, HTML and --details.

    A run in progress gets a partial report that says so, and exit code 1."""
    fmt, out_dir, quiet = flags["fmt"], flags["out_dir"], flags["quiet"]
    extras = Extras(
        parse_ensembles(flags["ensemble_specs"]),
        flags["ensemble_judges"],
        load_references(flags["reference_args"]),
        calibrate=flags["calibrate"],
        suggest_labels=flags["suggest_labels"] or 0,
        label_probabilities=(
            read_probabilities(flags["label_probabilities"])
            if flags["label_probabilities"]
            else None
        ),
    )
    store = open_store()
    try:
        run = find_run(store, flags["run_name"])
        result = build_report(
            store,
            run,
            replicates=flags["replicates"],
            seed=flags["seed"],
            confidence=flags["confidence"],
            extras=extras,
            progress=not quiet,
        )
        card = None
        if fmt == "html" and run.config.probes:  # a probe run's page ends with its card
            from flask_eval.app.probe_card import card_inputs
            from flask_eval.report.probe_card import card_of

            card = card_of(card_inputs(store, run), confidence=flags["confidence"])
    finally:
        store.close()
    out = Path(out_dir) if out_dir else None
    if flags["suggest_labels"]:
        from flask_eval.report.calibration_suggest import template_csv

        _write(Path(flags["labels_file"]), template_csv(result.suggestions))
        click.echo(
            f"wrote {len(result.suggestions)} cell(s) to label in {flags['labels_file']}: fill "
            f"the scores, then `--reference NAME={flags['labels_file']}`",
            err=True,
        )
    if fmt != "table" or out:  # a text report on the terminal ends with its notes
        for note in result.notes:
            click.echo(f"warning: {note}", err=True)
    if fmt == "html":
        from flask_eval.report.html import write_report

        target = out or Path(DEFAULT_HTML_DIR)
        page = write_report(result, target, progress=not quiet, card=card)
        click.echo(f"wrote {page}", err=True)
    elif fmt == "json":
        text = render.to_json(result)
        if out:
            _write(out / "report.json", text)
            click.echo(f"wrote {out / 'report.json'}", err=True)
        else:
            click.echo(text, nl=False)
    elif fmt == "csv":
        if out:
            _write(out / "rows.csv", render.rows_csv(result))
            _write(out / "comparisons.csv", render.comparisons_csv(result.comparisons))
            _write(out / "agreement.csv", render.agreement_csv(result.agreement))
            written = ["rows.csv", "comparisons.csv", "agreement.csv"]
            if result.pairwise is not None:
                from flask_eval.report import pairwise_render

                _write(out / "pairwise.csv", pairwise_render.csv(result.pairwise))
                written.append("pairwise.csv")
            click.echo(f"wrote {', '.join(written)} in {out}", err=True)
        else:
            click.echo(render.report_csv(result), nl=False)
    else:
        text = render.to_table(result, details=flags["details"])
        if not text:
            click.echo(
                f"run {result.run}: nothing to report yet (no finished judgments, no ratings)",
                err=True,
            )
        if out:
            _write(out / "report.txt", text)
        else:
            click.echo(text, nl=False)
    if result.progress is not None and result.progress.in_progress:
        name = shlex.quote(result.run)
        raise RunIncomplete(
            f"run {result.run} is in progress: {result.progress.pending:,} of "
            f"{result.progress.total:,} judgments pending, so this report is partial; "
            f"`flask-eval status {name} --watch` follows the run, `flask-eval report {name}` "
            "again once it is finished"
        )


@click.command("agreement")
@click.argument("run_name", required=False)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="A text table or JSON.",
)
@click.option(
    "--reference",
    "reference_args",
    multiple=True,
    metavar="NAME=PATH",
    help="Reference scores (CSV or JSON Lines: model, instance_id, skill, score), compared "
    "like one more judge, e.g. human=labels.csv; repeatable.",
)
@handle_errors
def agreement_command(run_name: str | None, fmt: str, reference_args: tuple[str, ...]) -> None:
    """Agreement between every pair of judges, per skill and over all skills."""
    refs = load_references(reference_args)
    store = open_store()
    try:
        run = find_run(store, run_name)
        rows, notes = agreement_for_run(store, run, refs)
    finally:
        store.close()
    for note in notes:
        click.echo(f"warning: {note}", err=True)
    if fmt == "json":
        click.echo(render.dumps({"rows": [r.as_dict() for r in rows]}), nl=False)
    elif rows:
        click.echo(render.agreement_table(rows), nl=False)
    else:
        click.echo("no pair of judges scored the same judgments", err=True)


def register(main: click.Group) -> None:
    """Add ``report`` (replacing any older one) and ``agreement`` to ``main``."""
    main.add_command(report_command)
    main.add_command(agreement_command)
