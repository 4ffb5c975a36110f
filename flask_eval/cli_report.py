"""`flask-eval report` (intervals, ensembles, comparisons, HTML) and `flask-eval agreement`.

Wire into the command line with :func:`register` (``register(main)`` in ``cli.py``, after
removing its older ``report`` command): it adds both commands to the group.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click
from tqdm import tqdm

from flask_eval.cli_common import find_run, handle_errors, open_store
from flask_eval.exceptions import InputError
from flask_eval.pipeline import run_table
from flask_eval.redact import redact
from producer.schema import DOMAINS
from report import references, render
from report.agreement import Agreement, agreement_rows
from report.bootstrap import (
    DEFAULT_CONFIDENCE,
    DEFAULT_REPLICATES,
    DEFAULT_SEED,
    instance_weights,
)
from report.breakdown import Aggregation, flask_breakdown
from report.document import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_TEMPERATURE,
    JudgeSettings,
    Report,
    ranked_models,
    with_intervals,
)
from report.ensemble import EnsembleSpec, add_ensembles
from report.intervals import cell_intervals, comparisons
from report.scores import ScoreTable
from rubrics import codec
from storage import queries
from storage.records import RunInfo
from storage.store import Store

FORMATS = ("table", "json", "csv", "html")
DEFAULT_HTML_DIR = "flask-eval-report"


def parse_ensembles(specs: Sequence[str]) -> list[EnsembleSpec]:
    try:
        return [EnsembleSpec.parse(s) for s in specs]
    except ValueError as exc:
        raise InputError(f"--ensemble: {exc}") from None


def load_references(args: Sequence[str]) -> list[references.Reference]:
    return [references.load(*references.parse_arg(a)) for a in args]


def _with_references(
    table: ScoreTable, refs: Sequence[references.Reference]
) -> tuple[ScoreTable, list[str]]:
    table, unmatched = references.attach(table, refs)
    notes = [
        f"reference {ref.name}: {missed} of {len(ref.scores)} scores match no judged "
        "(model, instance, skill) of the run and are left out"
        for ref, missed in zip(refs, unmatched, strict=True)
        if missed
    ]
    return table, notes


def judge_settings(config: Mapping[str, Any]) -> list[JudgeSettings]:
    """How each judge of a run was sampled, from its config (``JudgeConfig.to_data()``
    entries, or bare names in older runs); unset values are the defaults a call uses,
    Anthropic specs have the provider's default temperature; text is redacted."""
    settings = []
    for entry in config.get("judges") or ():
        data = entry if isinstance(entry, Mapping) else {"name": entry}
        name = str(data.get("name") or data.get("spec") or "")
        if not name:
            continue
        spec = str(data.get("spec") or name)
        max_tokens = data.get("max_tokens")
        temperature = data.get("temperature")
        if spec.split("/", 1)[0].strip().lower() == "anthropic":
            temperature = None  # the Anthropic SDK call takes no temperature
        elif temperature is None:
            temperature = DEFAULT_TEMPERATURE
        settings.append(
            JudgeSettings(
                name=redact(name),
                spec=redact(spec),
                max_tokens=int(max_tokens) if max_tokens is not None else DEFAULT_MAX_TOKENS,
                temperature=None if temperature is None else float(temperature),
            )
        )
    return settings


def build_report(
    store: Store,
    run: RunInfo,
    *,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
    ensembles: Sequence[EnsembleSpec] = (),
    ensemble_judges: Sequence[str] = (),
    refs: Sequence[references.Reference] = (),
    progress: bool = True,
    timings: dict[str, float] | None = None,
) -> Report:
    """All breakdowns of a run with bootstrap intervals, paired comparisons and agreement.

    ``replicates=0`` skips the bootstrap (no intervals). ``timings``, when given, receives
    the seconds spent in each phase.
    """
    skillset = codec.from_data(run.config["skills"])
    ability_of = {s.name: s.ability for s in skillset}
    breakdown = flask_breakdown(
        ability_of,
        skill_order=skillset.names,
        ability_order=tuple(skillset.abilities),
        domain_order=DOMAINS,
    )
    clock = [time.perf_counter()]

    def lap(name: str) -> None:
        now = time.perf_counter()
        if timings is not None:
            timings[name] = round(now - clock[0], 4)
        clock[0] = now

    bar = tqdm(
        total=1,
        desc=f"report {run.name}",
        unit="step",
        disable=not progress,
        file=sys.stderr,
        dynamic_ncols=True,
    )
    try:
        base = run_table(store, run)
        bar.update(1)
        lap("query")
        try:
            table = add_ensembles(base, ensembles, ensemble_judges)
        except ValueError as exc:
            raise InputError(f"--ensemble: {exc}") from None
        aggregation = Aggregation(table, breakdown)
        bar.total = 1 + aggregation.steps + 2
        rows = aggregation.rows()
        lap("means")
        weights = instance_weights(len(table.instances), replicates, seed)
        intervals = cell_intervals(aggregation, weights, confidence, progress=bar.update)
        lap("intervals")
        ranking = ranked_models(rows, table.models)
        pairs = comparisons(table, weights, confidence, model_order=ranking)
        bar.update(1)
        lap("comparisons")
        rated, notes = _with_references(base, refs)
        agreement = agreement_rows(rated, skill_order=skillset.names)
        bar.update(1)
        lap("agreement")
    finally:
        bar.close()
    coverage = queries.coverage(store, run.id)
    report_rows = with_intervals(rows, intervals)
    lap("rows")
    return Report(
        run=run.name,
        rows=report_rows,
        comparisons=pairs,
        agreement=agreement,
        bootstrap={
            "replicates": replicates,
            "seed": seed,
            "confidence": confidence,
            "unit": "instance",
            "method": "percentile",
            "instances": len(table.instances),
        },
        coverage=coverage,
        models=list(table.models),
        judges=list(table.judges),
        skills=list(skillset.names),
        abilities=list(skillset.abilities),
        ability_of=ability_of,
        domains=list(table.domains),
        notes=notes,
        judge_settings=judge_settings(run.config),
    )


def agreement_for_run(
    store: Store, run: RunInfo, refs: Sequence[references.Reference] = ()
) -> tuple[list[Agreement], list[str]]:
    skillset = codec.from_data(run.config["skills"])
    table, notes = _with_references(run_table(store, run), refs)
    return agreement_rows(table, skill_order=skillset.names), notes


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
    help="Reference scores (CSV or JSON Lines: model, instance_id, skill, score) to compare "
    "judges with, e.g. human=labels.csv; repeatable.",
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
@click.option("--quiet", is_flag=True, help="No progress bar.")
@handle_errors
def report_command(
    run_name: str | None,
    fmt: str,
    out_dir: str | None,
    ensemble_specs: tuple[str, ...],
    ensemble_judges: tuple[str, ...],
    reference_args: tuple[str, ...],
    replicates: int,
    seed: int,
    confidence: float,
    quiet: bool,
) -> None:
    """Per model x judge: overall, skill, ability, domain, difficulty, with 95% intervals."""
    ensembles = parse_ensembles(ensemble_specs)
    refs = load_references(reference_args)
    store = open_store()
    try:
        run = find_run(store, run_name)
        result = build_report(
            store,
            run,
            replicates=replicates,
            seed=seed,
            confidence=confidence,
            ensembles=ensembles,
            ensemble_judges=ensemble_judges,
            refs=refs,
            progress=not quiet,
        )
    finally:
        store.close()
    for note in result.notes:
        click.echo(f"warning: {note}", err=True)
    out = Path(out_dir) if out_dir else None
    if fmt == "html":
        from report.html import write_report

        target = out or Path(DEFAULT_HTML_DIR)
        page = write_report(result, target, progress=not quiet)
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
            _write(out / "rows.csv", render.rows_csv(result.rows))
            _write(out / "comparisons.csv", render.comparisons_csv(result.comparisons))
            _write(out / "agreement.csv", render.agreement_csv(result.agreement))
            click.echo(f"wrote rows.csv, comparisons.csv, agreement.csv in {out}", err=True)
        else:
            click.echo(render.rows_csv(result.rows), nl=False)
    else:
        text = render.to_table(result)
        if out:
            _write(out / "report.txt", text)
        else:
            click.echo(text, nl=False)


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
