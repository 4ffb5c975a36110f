"""Start-up: commands that need no database import no database library, broker or SDK.

`flask-eval --help` cost 1.1 s of CPU (2.1-2.3 s on a busy machine) because listing the
commands imported every command's module, and `--version` imported the store; both now
import click and the CLI's own modules only. What a process has imported can only be
seen in a fresh interpreter: one subprocess runs each command in turn and reports the
heavy packages it found after each.
"""

from __future__ import annotations

import json
import subprocess
import sys

import click
from click.testing import CliRunner

from flask_eval.cli import OneLineErrors, main
from flask_eval.cli.common import SHORT_HELP

HEAVY = (
    "sqlalchemy",
    "sqlmodel",
    "alembic",
    "celery",
    "kombu",
    "redis",
    "openai",
    "anthropic",
    "google",
    "numpy",
    "scipy",
    "tqdm",
    "httpx2",
)

PROBE = f"""
import contextlib, io, json, sys
from flask_eval.cli import main
heavy = {HEAVY!r}
found = {{}}
for args in (["--help"], ["--version"], ["run", "--help"], ["wait", "--help"]):
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            main(args)
        except SystemExit:
            pass
    found[" ".join(args)] = sorted({{m.split(".")[0] for m in sys.modules}} & set(heavy))
print(json.dumps(found))
"""


def test_help_and_version_import_no_database_broker_or_sdk() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found == {
        "--help": [],
        "--version": [],
        "run --help": [],
        "wait --help": [],
    }, found


def test_help_lists_every_command_with_its_own_short_help() -> None:
    """The lazily imported commands are listed by the same line before and after their
    module is loaded (``SHORT_HELP`` is their ``short_help``)."""
    listed = CliRunner().invoke(main, ["--help"])
    assert listed.exit_code == 0, listed.output
    for name in OneLineErrors.lazy:
        assert f"{name}  " in listed.output and SHORT_HELP[name] in listed.output, name
        command = main.get_command(click.Context(main), name)
        assert command is not None and command.get_short_help_str(80) == SHORT_HELP[name]
    assert CliRunner().invoke(main, ["--help"]).output == listed.output
