"""What every command shares: the error contract and finding the store and the run."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from core import settings as settings_mod
from core.errors import FlaskEvalError, InputError
from core.redact import redact
from storage.records import RunInfo
from storage.store import Store

F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(fn: F) -> F:
    """Print a FlaskEvalError as one line on stderr and exit with its code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except FlaskEvalError as exc:
            click.echo(f"error: {redact(str(exc))}", err=True)
            sys.exit(exc.exit_code)

    return wrapper  # type: ignore[return-value]


class RunIncomplete(FlaskEvalError):
    """A run ended with judgments failed or still pending (exit code 1)."""


def open_store() -> Store:
    return Store(settings_mod.load().database_url)


def find_run(store: Store, name: str | None) -> RunInfo:
    """The run called ``name``, or the latest run; InputError if there is none."""
    run = store.find_run(name)
    if run is None:
        what = f"no run named {name!r}" if name else "no runs yet"
        raise InputError(f"{what} in the database; start one with `flask-eval run`")
    return run
