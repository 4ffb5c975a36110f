"""The `flask-eval` command line: parse arguments, call the pipeline, print.

Exit codes: 0 when every judgment is done (or nothing was asked to wait); 1 when a run
finished with failures, a judge was halted, or judgments stay pending (``--max-cost``);
2 for bad input, flags or settings (one line, nothing written).
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Mapping
from typing import Any, ClassVar

import click

from flask_eval.cli.common import (
    ENV_WORKER,
    SHORT_HELP,
    epilog,
    handle_errors,
)
from flask_eval.core.errors import InputError
from flask_eval.core.pipes import outlive_readers
from flask_eval.core.redact import install_log_redaction


class OneLineErrors(click.Group):
    """Usage errors (a bad flag or value) as one line, ``error: ...``, exit code 2, like
    every other bad input; click would print a usage block.

    The commands of other modules are imported only when they are named: `flask-eval
    worker` does not import the producer's pipeline nor the report, `run` not the report,
    and ``--help`` lists them from :attr:`lazy` without importing any (start-up,
    docs/design/concurrency.md). No module of this file imports SQLAlchemy, Celery or an
    SDK at import time: `--help`, `--version` and a command's `--help` stay cheap."""

    #: command name -> the module whose ``register(group)`` adds it (its one-line help
    #: is ``SHORT_HELP[name]``, which the command itself uses too)
    lazy: ClassVar[Mapping[str, str]] = {
        "run": "flask_eval.cli.run",
        "resume": "flask_eval.cli.run",
        "wait": "flask_eval.cli.wait",
        "generate": "flask_eval.cli.jobs",
        "annotate": "flask_eval.cli.jobs",
        "eval": "flask_eval.cli.jobs",
        "report": "flask_eval.cli.report",
        "agreement": "flask_eval.cli.report",
        "export": "flask_eval.cli.bundle",
        "import": "flask_eval.cli.bundle",
        "view": "flask_eval.cli.view",
        "status": "flask_eval.cli.status",
        "runs": "flask_eval.cli.status",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            importlib.import_module(self.lazy[cmd_name]).register(self)
            for name in self.lazy:  # listed alike, loaded or not
                command = self.commands.get(name)
                if command is not None and command.short_help is None:
                    command.short_help = SHORT_HELP[name]
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help``: loaded commands by their own help, the others
        by :attr:`lazy`, so that listing them imports nothing."""
        limit = formatter.width - 6 - max(len(name) for name in self.list_commands(ctx))
        rows = []
        for name in self.list_commands(ctx):
            command = self.commands.get(name)
            if command is None:
                rows.append((name, SHORT_HELP[name]))
            elif not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        outlive_readers()  # a reader that goes away (`| tee`, Ctrl-C) ends no drain
        try:
            result = super().main(*args, **kwargs)
        except click.exceptions.Abort:
            click.echo("error: aborted", err=True)
            sys.exit(1)
        except click.ClickException as exc:
            click.echo(f"error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        sys.exit(result if isinstance(result, int) else 0)


@click.group(cls=OneLineErrors)
@click.version_option(package_name="flask-eval")
@click.option(
    "--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True,
    envvar="FLASK_EVAL_LOG_FORMAT",
    help="Log lines on stderr as text, or one JSON object each (docs/operations.md).",
)  # fmt: skip
def main(log_format: str) -> None:
    """Fine-grained LLM evaluation (FLASK) with distributed judge workers.

    A judgment is one score of one response on one skill by one judge; a call is one
    request to a judge, which scores one response on all its skills (instance mode) or on
    one (skill mode); requests include retries and format reminders.
    """
    from flask_eval.core.logs import configure

    configure(log_format, logging.WARNING)
    install_log_redaction()


@main.command(epilog=epilog(ENV_WORKER))
@click.option(
    "--processes", type=click.IntRange(1, 1024), default=1, show_default=True,
    help="Worker processes on this machine.",
)  # fmt: skip
@click.option(
    "--in-flight",
    type=click.IntRange(1, 100_000),
    default=256,
    show_default=True,
    help="Judge calls in flight per process.",
)
@click.option(
    "--loglevel",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="INFO",
    show_default=True,
    help="Log level; per-request lines only at DEBUG.",
)
@click.option(
    "--metrics-port", type=click.IntRange(1, 65535), default=None,
    help="Serve Prometheus metrics on this port (process i of --processes: port + i). "
    "Default: not served.",
)  # fmt: skip
@click.option(
    "--metrics-host", default="127.0.0.1", show_default=True,
    help="Address the metrics are served on.",
)  # fmt: skip
@click.pass_context
@handle_errors
def worker(
    ctx: click.Context,
    processes: int,
    in_flight: int,
    loglevel: str,
    metrics_port: int | None,
    metrics_host: str,
) -> None:
    """Start Celery workers on the configured broker."""
    from flask_eval.workers import worker as worker_mod

    serving = worker_mod.Serving(metrics_host, metrics_port) if metrics_port else None
    log_format = ctx.find_root().params.get("log_format", "text")
    sys.exit(worker_mod.run(processes, in_flight, loglevel.upper(), serving, log_format))


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8765, show_default=True, help="Port (0: any free port).")
@click.option("--latency-ms", default=0.0, show_default=True, help="Latency of an answer (ms).")
@click.option(
    "--latency-dist",
    type=click.Choice(["fixed", "lognormal"]),
    default="fixed",
    show_default=True,
    help="Fixed latency, or log-normal with --latency-ms as its median.",
)
@click.option("--sigma", default=0.5, show_default=True, help="Spread of the log-normal latency.")
@click.option("--error-rate", default=0.0, show_default=True, help="Share of 5xx answers.")
@click.option("--garbage-rate", default=0.0, show_default=True, help="Share of malformed answers.")
@click.option("--rate-limit-rate", default=0.0, show_default=True, help="Share of 429 answers.")
@click.option("--timeout-rate", default=0.0, show_default=True, help="Share of requests that hang.")
@click.option("--rpm", type=int, default=None, help="Requests per minute before 429s.")
@click.option("--tpm", type=int, default=None, help="Prompt tokens per minute before 429s.")
@click.option("--score", type=click.IntRange(1, 5), default=None, help="Give every score this.")
@click.option("--na-rate", default=0.0, show_default=True, help="Share of skills scored N/A.")
@click.option("--refusal-rate", default=0.0, show_default=True, help="Share of refusals.")
@click.option("--html-rate", default=0.0, show_default=True, help="Share of HTML error pages.")
@click.option("--quote-response", is_flag=True, help="Judges quote the response they judge.")
@click.option(
    "--position-bias", default=0.0, show_default=True,
    help="Share of pairwise judgments that pick the response shown first, whatever it says.",
)  # fmt: skip
@click.option(
    "--min-max-tokens", type=int, default=None,
    help="Cut off answers to requests allowing fewer completion tokens than this.",
)  # fmt: skip
@click.option("--require-key", default=None, help="Answer 401 to requests without this key.")
@click.option("--seed", default=0, show_default=True, help="Seed of the answers and faults.")
@handle_errors
def simulate(host: str, port: int, **options: Any) -> None:
    """A judge simulator speaking the OpenAI and Anthropic wire formats (no real model)."""
    from flask_eval.simulator.config import SimConfig
    from flask_eval.simulator.server import run as serve

    try:
        config = SimConfig(**options)
    except (TypeError, ValueError) as exc:
        raise InputError(f"invalid simulator option: {exc}") from None
    serve(config, host, port)


@main.command()
@handle_errors
def demo() -> None:
    """The whole pipeline on shipped example data against a simulated judge."""
    from flask_eval.cli.demo import run_demo

    run_demo()
