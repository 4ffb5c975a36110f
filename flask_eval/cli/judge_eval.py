"""`flask-eval judge-eval SPEC`: Prometheus 2's meta-evaluation of a judge (docs/judge-eval.md).

Exit codes: 0 when the table is printed; 1 when a set's run ends with work failed or
pending (``flask-eval resume`` it, then run judge-eval again: done work is not paid
twice); 2 for bad input (one line, nothing written).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import click

from flask_eval.cli.common import SHORT_HELP, handle_errors, open_store, out_option, write_output
from flask_eval.core.errors import InputError
from flask_eval.producer.judge_eval_sets import prometheus_data_dir

FORMATS = ("text", "json")


def _files(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise InputError(f"--file takes NAME=PATH, got {value!r}")
        out[name] = path
    return out


@click.command("judge-eval", short_help=SHORT_HELP["judge-eval"])
@click.argument("spec")
@click.option(
    "--sets",
    "sets",
    default="",
    metavar="A,B",
    help="The sets, comma-separated (default: every set whose file is found).",
)
@click.option(
    "--data",
    "data_dir",
    type=click.Path(file_okay=False),
    default=None,
    metavar="DIR",
    help="prometheus-eval's files (default: FLASK_EVAL_PROMETHEUS_DATA or "
    "../shared/prometheus-data).",
)
@click.option(
    "--file",
    "files",
    multiple=True,
    metavar="NAME=PATH",
    help="A set's file (or recorded predictions: autoj-output, autoj-exchange-output).",
)
@click.option(
    "--limit", type=int, default=None, metavar="N", help="The first N instances of each set."
)
@click.option(
    "--samples",
    type=int,
    default=3,
    show_default=True,
    help="Repetitions per record of an absolute set (the judge's mean is correlated).",
)
@click.option(
    "--replicates", type=int, default=1000, show_default=True, help="Bootstrap resamples."
)
@click.option("--seed", type=int, default=0, show_default=True, help="The bootstrap's seed.")
@click.option(
    "--max-cost", type=float, default=None, metavar="USD", help="Budget of each set's run."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="The table and the cards as text, or as JSON.",
)
@out_option
@handle_errors
def judge_eval_command(**flags: Any) -> None:
    """Meta-evaluate the judge SPEC on Prometheus 2's sets: correlations with GPT-4 on
    absolute sets, accuracy against labels on pairwise ones, with 95% intervals.

    SPEC is a judge (provider/model[@base-url], or NAME=SPEC), asked with the Prometheus
    protocol at prometheus-eval's settings, or recorded answers: recorded:auto-j-13b
    (Auto-J's example predictions, replayed through a run), recorded:gpt-4 (GPT-4's own scores)."""
    from flask_eval.app.judge_eval import JudgeEvalConfig, judge_eval
    from flask_eval.core import settings as settings_mod
    from flask_eval.report.meta_eval import render_text, table_data
    from flask_eval.report.probe_card_render import card_json, card_text
    from flask_eval.report.probe_types import Card

    config = JudgeEvalConfig(
        spec=flags["spec"],
        sets=tuple(s.strip() for s in flags["sets"].split(",") if s.strip()),
        data_dir=Path(flags["data_dir"]) if flags["data_dir"] else prometheus_data_dir(),
        files=_files(flags["files"]),
        limit=flags["limit"],
        samples=flags["samples"],
        replicates=flags["replicates"],
        seed=flags["seed"],
        max_cost=flags["max_cost"],
    )

    def say(line: str) -> None:
        click.echo(line, err=True)

    cards: list[tuple[str, Card]] = []
    with tempfile.TemporaryDirectory(prefix="flask-eval-judge-eval-") as work:
        rows = judge_eval(
            config, settings_mod.load(), lambda: open_store(create=True), Path(work), say, cards
        )
    if flags["fmt"] == "json":
        listed = [{"set": name, **card_json(c)} for name, c in cards]
        data = {"table": table_data(rows), "cards": listed}
        output = json.dumps(data, indent=2, allow_nan=False) + "\n"
    else:
        output = render_text(rows) + "".join(f"\n{name}: {card_text(c)}" for name, c in cards)
    write_output(flags["out"], output)


def register(main: click.Group) -> None:
    """Add ``judge-eval`` to ``main``."""
    main.add_command(judge_eval_command)
