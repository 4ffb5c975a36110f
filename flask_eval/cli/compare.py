"""`flask-eval compare BASE NEW`: a paired comparison of two runs, and a CI gate.

Exit codes: 0 when the comparison ran (and, with ``--gate``, no significant regression);
1 with ``--gate`` when a drop of at least ``--min-effect`` is significant; 2 for bad
input (one line, nothing written).
"""

from __future__ import annotations

from typing import Any

import click

from flask_eval.cli.common import (
    SHORT_HELP,
    FiniteRange,
    confidence_option,
    correction_option,
    handle_errors,
    open_store,
    out_option,
    write_output,
)
from flask_eval.core.errors import FlaskEvalError

FORMATS = ("text", "json", "junit", "markdown")


class RegressionFound(FlaskEvalError):
    """``--gate``: a significant regression (exit code 1)."""

    exit_code = 1


@click.command("compare", short_help=SHORT_HELP["compare"])
@click.argument("base")
@click.argument("new")
@click.option(
    "--model",
    "models",
    multiple=True,
    metavar="M",
    help="Compare this model of both runs (repeatable; default: every model both have).",
)
@click.option(
    "--judge",
    "judges",
    multiple=True,
    metavar="J",
    help="Compare this judge's scores only (repeatable; default: every judge both have).",
)
@click.option("--gate", is_flag=True, help="Exit 1 when a regression is significant.")
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="The family's error rate (Holm: family-wise; BH: false discovery rate).",
)
@click.option(
    "--min-effect",
    type=FiniteRange(min=0),
    default=0.0,
    show_default=True,
    metavar="D",
    help="A regression is a drop of at least D points (H0: the drop is smaller than D).",
)
@correction_option("Across every test of the comparison")
@confidence_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="A text table, JSON, JUnit XML (CI test reports) or Markdown (CI summaries).",
)
@out_option
@handle_errors
def compare_command(**flags: Any) -> None:
    """NEW against BASE, paired on the judgments both scored: each run's mean per
    instance, a paired t-test per skill, ability, domain, difficulty... and Holm's (or
    BH's) correction across all of them.

    BASE and NEW are RUN or RUN:MODEL (`compare nightly:model-a nightly:model-b`).
    Failed, pending and N/A judgments are left out and counted, never scored."""
    from flask_eval.app.compare import compare_runs
    from flask_eval.report.compare import CompareSettings
    from flask_eval.report.compare_render import render

    settings = CompareSettings(
        alpha=flags["alpha"],
        min_effect=flags["min_effect"],
        correction=flags["correction"],
        confidence=flags["confidence"],
        judges=tuple(flags["judges"]),
    )
    store = open_store()
    try:
        result = compare_runs(store, flags["base"], flags["new"], settings, flags["models"])
    finally:
        store.close()
    write_output(flags["out"], render(result, flags["fmt"]), result.headline)
    if flags["gate"] and result.gate_failed:
        raise RegressionFound(
            f"--gate: {len(result.regressions)} significant regression(s) "
            f"(alpha {settings.alpha:g}, {settings.correction})"
        )


def register(main: click.Group) -> None:
    """Add ``compare`` to ``main``."""
    main.add_command(compare_command)
