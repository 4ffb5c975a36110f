"""The `flask-eval` command line: parse arguments, call the pipeline, print.

Exit codes: 0 when every judgment is done (or nothing was asked to wait); 1 when a run
finished with failures, a judge was halted, or judgments stay pending (``--max-cost``);
2 for bad input, flags or settings (one line, nothing written).
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import click

from flask_eval.cli.common import (
    ENV_WORKER,
    SHORT_HELP,
    EnvHelp,
    handle_errors,
)
from flask_eval.core.errors import InputError
from flask_eval.core.pipes import outlive_readers
from flask_eval.core.redact import install_log_redaction
from flask_eval.simulator.options import OPTIONS, config_of
from flask_eval.simulator.options import description as sim_description


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
        "compare": "flask_eval.cli.compare",
        "judge-eval": "flask_eval.cli.judge_eval",
        "export": "flask_eval.cli.bundle",
        "import": "flask_eval.cli.bundle",
        "view": "flask_eval.cli.view",
        "status": "flask_eval.cli.status",
        "runs": "flask_eval.cli.status",
        "rate": "flask_eval.cli.rate",
        "raters": "flask_eval.cli.raters",
        "probe": "flask_eval.cli.probe",
        "card": "flask_eval.cli.probe",
    }

    @staticmethod
    def kinds() -> dict[str, str]:
        """The commands the kinds' registry makes (rubrics/kinds.py; cli/kind_command.py):
        each kind without a command of its own, by name, with its one-line help."""
        from flask_eval.rubrics.kinds import KINDS

        return {name: k.summary for name, k in KINDS.items() if not k.command}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy, *self.kinds()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name not in self.lazy and cmd_name in self.kinds():
            importlib.import_module("flask_eval.cli.kind_command").register(self, cmd_name)
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
                rows.append((name, SHORT_HELP.get(name) or self.kinds()[name]))
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
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    envvar="FLASK_EVAL_LOG_FORMAT",
    help="Log lines on stderr as text, or one JSON object each (docs/operations.md).",
)
def main(log_format: str) -> None:
    """Fine-grained LLM evaluation (FLASK) with distributed judge workers.

    A judgment is one score of one response on one skill by one judge; a call is one
    request to a judge, which scores one response on all its skills (instance mode) or on
    one (skill mode); requests include retries and format reminders.
    """
    from flask_eval.core.logs import configure

    configure(log_format, logging.WARNING)
    install_log_redaction()


@main.command(cls=EnvHelp, env=ENV_WORKER)
@click.option(
    "--processes",
    type=click.IntRange(1, 1024),
    default=1,
    show_default=True,
    help="Worker processes on this machine.",
)
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
    "--metrics-port",
    type=click.IntRange(1, 65535),
    default=None,
    help="Serve Prometheus metrics on this port (process i of --processes: port + i). "
    "Default: not served.",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    help="Address the metrics are served on.",
)
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


def _simulator_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The simulator's options (simulator/options.py), as `python -m flask_eval.simulator`
    has them."""
    for o in reversed(OPTIONS):
        if o.flag:
            command = click.option(o.name, is_flag=True, help=o.help)(command)
        elif o.repeat:
            command = click.option(o.name, multiple=True, metavar=o.metavar, help=o.help)(command)
        else:
            kind: Any = click.Choice(o.choices) if o.choices else o.type
            if o.low is not None or o.high is not None:
                kind = click.IntRange(o.low, o.high)
            shown = o.default is not None and o.default != ""
            command = click.option(
                o.name, type=kind, default=o.default, show_default=shown, help=o.help
            )(command)
    return command


@main.command(help=sim_description())
@_simulator_options
@handle_errors
def simulate(host: str, port: int, **options: Any) -> None:
    from flask_eval.simulator.serving import run as serve

    try:
        config = config_of(options)
    except (TypeError, ValueError) as exc:
        raise InputError(f"invalid simulator option: {exc}") from None
    serve(config, host, port)


@main.command()
@handle_errors
def demo() -> None:
    """The whole pipeline on shipped example data against a simulated judge."""
    from flask_eval.cli.demo import run_demo

    run_demo()
