"""What every command shares: the error contract and finding the store and the run."""

from __future__ import annotations

import functools
import math
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from flask_eval.core import settings as settings_mod
from flask_eval.core.errors import FlaskEvalError, InputError
from flask_eval.core.redact import redact

if TYPE_CHECKING:  # the store imports SQLAlchemy: only commands that open it pay for it
    from flask_eval.storage.records import RunInfo
    from flask_eval.storage.store import Store

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


class FiniteRange(click.FloatRange):
    """A number in a range, never ``nan`` or ``inf`` (click's FloatRange lets ``nan``
    through: every comparison with it is false, so a budget of ``nan`` would hold
    nothing back)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


class RunIncomplete(FlaskEvalError):
    """A run ended with judgments failed or still pending (exit code 1)."""


def open_store(*, create: bool = False, url: str | None = None) -> Store:
    """The store at ``url`` (a command's ``--db``), else the configured one. A command
    that only reads (``create=False``) refuses a store that does not exist, with one
    line and exit 2, rather than create an empty one."""
    from flask_eval.storage.db import lacks_store, redact_url
    from flask_eval.storage.store import Store

    if url is not None:
        if not create and lacks_store(url):
            raise InputError(f"--db: no flask-eval store at {redact_url(url)}")
        return Store(url)
    url = settings_mod.load().database_url
    if not create and lacks_store(url):
        raise InputError(
            f"no flask-eval store at {redact_url(url)} (FLASK_EVAL_DATABASE_URL); "
            "`flask-eval run` makes one"
        )
    return Store(url)


def find_run(store: Store, name: str | None) -> RunInfo:
    """The run called ``name``, or the latest run; InputError if there is none."""
    run = store.find_run(name)
    if run is None:
        what = f"no run named {name!r}" if name else "no runs yet"
        raise InputError(f"{what} in the database; start one with `flask-eval run`")
    return run


#: the one-line help of the commands in other modules: `flask-eval --help` lists them
#: without importing those modules (cli.OneLineErrors.lazy), and each command uses it
SHORT_HELP = {
    "run": "Validate inputs, plan the judgments and judge them.",
    "resume": "Judge again what is pending, stale or failed.",
    "wait": "Wait for the judgments workers are judging.",
    "report": "Scores per model and judge, by every dimension.",
    "agreement": "Agreement between every pair of judges.",
    "compare": "Paired comparison of two runs; --gate: exit 1 on a regression.",
    "judge-eval": "Meta-evaluate a judge on Prometheus 2's sets, with intervals.",
    "generate": "The models under test answer the instances.",
    "annotate": "Label instances with FLASK's skills, domains, difficulty.",
    "eval": "Generate, annotate, judge and report in one command.",
    "export": "Judgments as JSON Lines or CSV, or the whole run as a bundle.",
    "import": "Load a run's bundle (export --bundle) into this store.",
    "view": "Browse runs, scores and judgments in a web browser.",
    "status": "Progress of a run; --watch: live, with the workers.",
    "runs": "The runs in the database: progress and cost.",
    "rate": "Serve the rating workspace to people in a browser.",
    "raters": "Raters: sign-in tokens, and their ratings in and out as files.",
    "probe": "Probe judges for biases: twins of each response judged beside it.",
    "card": "A run's judge card: each probe's effect; --gate: exit 1 on a bias.",
}

#: in an environment list (:func:`epilog`): the providers' key and base-URL variables
PROVIDER_KEYS, PROVIDER_URLS = "<provider keys>", "<provider base URLs>"
#: environment variables, by the commands that read them
ENV_RUN = {
    "FLASK_EVAL_DATABASE_URL": "the ledger (default sqlite:///./flask-eval.db)",
    "FLASK_EVAL_BROKER_URL": "redis://, rediss:// or amqp:// (unset: judge in-process)",
    "FLASK_EVAL_QUEUE": "the broker queue (default flask_eval)",
    "FLASK_EVAL_CALLS_PER_MESSAGE": "judge calls per message (default 64)",
    "FLASK_EVAL_JUDGE_TIMEOUT": "seconds a judge call may take (in-process; default 120)",
    "FLASK_EVAL_MAX_ATTEMPTS": "attempts per call on 429/5xx/timeouts (in-process; default 6)",
    "FLASK_EVAL_HALT_AFTER": "halt a judge whose first N calls all fail alike (default 5)",
    PROVIDER_KEYS: "judge keys (in-process; workers need their own)",
    PROVIDER_URLS: "default base URLs of the providers",
}
ENV_WORKER = {
    "FLASK_EVAL_DATABASE_URL": "the ledger: the same as the producer's",
    "FLASK_EVAL_BROKER_URL": "the broker (required)",
    "FLASK_EVAL_QUEUE": "the queue to take (default flask_eval)",
    "FLASK_EVAL_CALLS_PER_MESSAGE": "calls per message, which sizes the thread pool",
    "FLASK_EVAL_LEASE_SECONDS": "a worker's lease on the rows it judges (default 60)",
    "FLASK_EVAL_VISIBILITY_TIMEOUT": "seconds before an unacked message returns (default 120)",
    "FLASK_EVAL_JUDGE_TIMEOUT": "seconds a judge call may take (default 120)",
    "FLASK_EVAL_MAX_ATTEMPTS": "attempts per call on 429/5xx/timeouts (default 6)",
    "FLASK_EVAL_DB_RETRY_SECONDS": "how long reads wait out a database outage (default 300)",
    "FLASK_EVAL_HALT_AFTER": "halt a judge whose first N calls all fail alike (default 5)",
    "FLASK_EVAL_SPOOL_DIR": "paid answers kept on disk during outages (~/.cache/flask-eval)",
    "FLASK_EVAL_LIMITER_URL": "the Redis holding shared rpm/tpm budgets (default: broker's)",
    PROVIDER_KEYS: "judge keys",
    PROVIDER_URLS: "default base URLs of the providers",
}


def epilog(env: dict[str, str]) -> str:
    """The help's list of the environment variables ``env`` names (name -> meaning);
    :data:`PROVIDER_KEYS` and :data:`PROVIDER_URLS` stand for the provider registry's
    variables (:func:`provider_variables`)."""
    lines = ["\b", "Environment:"]
    for name, meaning in env.items():
        if name in (PROVIDER_KEYS, PROVIDER_URLS):
            names = provider_variables()[name == PROVIDER_URLS]
            lines += textwrap.wrap(
                f"{meaning}: {', '.join(names)}",
                88,
                initial_indent="  ",
                subsequent_indent="    ",
                break_on_hyphens=False,
            )
        else:
            lines.append(f"  {name}: {meaning}")
    return "\n".join(lines)


def provider_variables() -> tuple[list[str], list[str]]:
    """The variables of every provider a judge spec may name (``workers.judge``'s
    registry): their API keys, and their base URLs where one is read."""
    from flask_eval.workers.judge import judge_class, known_providers

    classes = [judge_class(p) for p in known_providers()]
    keys = [c.key_env for c in classes if c.key_env]
    urls = [c.base_url_env for c in classes if c.base_url_env]
    return list(dict.fromkeys(keys)), list(dict.fromkeys(urls))


class EnvHelp(click.Command):
    """A command whose help ends with the environment variables it reads (``env``: see
    :func:`epilog`), listed when the help is shown: the provider registry is imported
    then, never at start-up."""

    def __init__(self, *args: Any, env: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.env = env

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self.epilog = epilog(self.env)
        super().format_epilog(ctx, formatter)


def correction_option(across: str) -> Callable[[F], F]:
    """``--correction holm|bh``: the multiplicity correction ``across`` a family of tests
    (the names are ``report.paired.METHODS``; numpy is not loaded for ``--help``)."""
    return click.option(
        "--correction",
        type=click.Choice(["holm", "bh"]),
        default="holm",
        show_default=True,
        help=f"{across}: Holm (family-wise error) or Benjamini-Hochberg (false discovery rate).",
    )


#: ``--confidence``: the confidence level of the intervals a command prints
confidence_option = click.option(
    "--confidence",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.95,
    show_default=True,
    help="Confidence level of the effects' intervals.",
)

#: ``--out FILE``: where a command writes its output instead of standard output
out_option = click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="Write the output to FILE instead of standard output.",
)


def write_output(out: str | None, output: str, headline: str | None = None) -> None:
    """``output`` into the file ``out`` (its folder made; ``headline`` and where it went
    on stderr), or on stdout when ``out`` is None; InputError (exit 2) when it cannot be
    written."""
    if not out:
        click.echo(output, nl=False)
        return
    path = Path(out)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(output, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"--out: cannot write {out}: {exc.strerror}") from None
    if headline:
        click.echo(headline, err=True)
    click.echo(f"wrote {out}", err=True)
