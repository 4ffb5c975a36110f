"""`flask-eval probe` (a run of judge probes) and `flask-eval card RUN` (its judge card).

`probe` takes `run`'s options, with every probe that applies (``--probes all``) on a
sample of 1,000 instances unless told otherwise; it prints the card when the run is done.
`card` exit codes: 0, or 1 with ``--gate`` when an effect at least its threshold is
significant; 2 for bad input (one line, nothing written).
"""

from __future__ import annotations

import copy
from typing import Any

import click

from flask_eval.cli.common import (
    SHORT_HELP,
    confidence_option,
    correction_option,
    handle_errors,
    open_store,
    out_option,
    write_output,
)
from flask_eval.core.errors import FlaskEvalError, InputError

#: instances `probe` samples when neither --sample nor --limit is given
DEFAULT_SAMPLE = 1000
FORMATS = ("text", "json", "html")


class BiasFound(FlaskEvalError):
    """``card --gate``: an effect over its threshold (exit code 1)."""

    exit_code = 1


def _probe_command() -> click.Command:
    """`run`'s command with probing on: ``--probes all`` and a sample by default."""
    from flask_eval.cli.run import run as run_command

    params = []
    for param in run_command.params:
        param = copy.copy(param)
        if param.name == "probes":
            param.default = "all"
            param.help = (param.help or "") + " [default: all]"
        elif param.name == "sample":
            param.help = f"Probe a random sample of N instances (default {DEFAULT_SAMPLE})."
        params.append(param)
    callback = run_command.callback
    assert callback is not None

    def probe(**flags: Any) -> None:
        if flags["sample"] is None and flags["limit"] is None and flags["spec_file"] is None:
            flags["sample"] = DEFAULT_SAMPLE
        callback(**flags)

    return click.Command(
        "probe",
        callback=probe,
        params=params,
        short_help=SHORT_HELP["probe"],
        help="Judge probes: of a sample of the responses, counterfactual twins (padded, "
        "restyled, criteria reordered, an injection appended) judged beside the originals, "
        "pairwise comparisons in both orders, and self-preference when families are "
        "declared; then the judge card (`flask-eval card RUN`). Takes `run`'s options.",
    )


@click.command("card", short_help=SHORT_HELP["card"])
@click.argument("run_name", metavar="RUN")
@click.option(
    "--gate",
    default=None,
    metavar="PROBE=T,...",
    help="Thresholds (length, style, order, inject, swap, self): exit 1 when an effect of "
    "at least T is significant.",
)
@correction_option("Across each judge's effects")
@confidence_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="A text table, JSON, or an HTML page.",
)
@out_option
@handle_errors
def card_command(run_name: str, gate: str | None, fmt: str, out: str | None, **kw: Any) -> None:
    """The judge card of RUN: per judge, each probe's effect with its interval, the order
    swap's consistency, unreadable and refused answers, latency and cost per judgment,
    and agreement with the run's people."""
    from flask_eval.app.probe_card import load_card
    from flask_eval.report.probe_card import parse_gate
    from flask_eval.report.probe_card_render import card_json, card_text

    try:
        thresholds = parse_gate(gate) if gate else None
    except ValueError as exc:
        raise InputError(f"--gate: {str(exc).removeprefix('gate: ')}") from None
    store = open_store()
    try:
        card = load_card(
            store,
            run_name,
            gate=thresholds,
            correction=kw["correction"],
            confidence=kw["confidence"],
        )
    finally:
        store.close()
    if fmt == "json":
        import json

        output = json.dumps(card_json(card), indent=2, allow_nan=False) + "\n"
    elif fmt == "html":
        from flask_eval.report.html import card_page

        output = card_page(card)
    else:
        output = card_text(card)
    write_output(out, output)
    if card.failed:
        raise BiasFound(
            f"--gate: {len(card.failed)} effect(s) at or over their threshold: "
            + ", ".join(f"{e.judge} {e.probe}" for e in card.failed)
        )


def register(main: click.Group) -> None:
    """Add ``probe`` and ``card`` to ``main``."""
    main.add_command(_probe_command())
    main.add_command(card_command)
