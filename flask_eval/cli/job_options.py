"""The options and the doing shared by the commands of work other than judging
(`generate`, `annotate`, `eval`: cli/jobs.py; a kind's own command: cli/kind_command.py).

The use cases and the store are imported where a command runs (start-up: `--help`
imports neither SQLAlchemy nor Celery).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from flask_eval.cli.common import FiniteRange
from flask_eval.cli.wait import quiet_option, timeout_option

if TYPE_CHECKING:
    from flask_eval.app.jobs import InstanceSource
    from flask_eval.app.pipeline import Plan
    from flask_eval.core.settings import Settings
    from flask_eval.core.spec import Sampling
    from flask_eval.storage.records import RunInfo
    from flask_eval.storage.store import Store

F = Callable[..., Any]
T = TypeVar("T")


def _source_options(f: F) -> F:
    for option in reversed(
        (
            click.option(
                "--instances",
                default=None,
                metavar="FILE",
                help="FLASK instances (JSON Lines); metadata optional.",
            ),
            click.option(
                "--biggen",
                default=None,
                metavar="FILE",
                help="BiGGen Bench instances (their system prompts are sent).",
            ),
            click.option(
                "--prometheus-set",
                default=None,
                metavar="FILE",
                help="MT-Bench or Vicuna Bench questions (Prometheus's files).",
            ),
            click.option(
                "--pairwise-set",
                default=None,
                metavar="FILE",
                help="A pairwise set's instructions (Auto-J, HHH).",
            ),
            click.option(
                "--limit",
                type=click.IntRange(min=1),
                default=None,
                help="Only the first N instances.",
            ),
            click.option(
                "--sample",
                type=click.IntRange(min=1),
                default=None,
                help="A random sample of N instances.",
            ),
            click.option(
                "--seed", type=int, default=0, show_default=True, help="Seed of --sample."
            ),
        )
    ):
        f = option(f)
    return f


def _split_hosts(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> tuple[str, ...]:
    return tuple(h.strip() for h in (value or "").split(",") if h.strip())


def image_options(f: F) -> F:
    """How a run reads its instances' images (``producer.images``): a Perception-Bench
    file, fetching image URLs (off by default) and the size limit."""
    for option in reversed(
        (
            click.option(
                "--perception-bench",
                default=None,
                metavar="FILE",
                help="Prometheus-Vision's Perception-Bench (JSON Lines or JSON): an image, "
                "an instruction, its reference and rubric per record; --responses NAME=PATH.",
            ),
            click.option(
                "--fetch-images",
                is_flag=True,
                help="Fetch image URLs of the instances (off: a URL is refused), only from "
                "the hosts of --image-hosts.",
            ),
            click.option(
                "--image-hosts",
                default=None,
                callback=_split_hosts,
                metavar="HOST,...",
                help="The hosts --fetch-images fetches from (exact names; a non-public "
                "address only when named itself, e.g. 127.0.0.1).",
            ),
            click.option(
                "--max-image-mb",
                type=FiniteRange(min=0.001, max=1024),
                default=None,
                metavar="MB",
                help="The largest image read, in MiB (default 20).",
            ),
        )
    ):
        f = option(f)
    return f


def _work_options(f: F) -> F:
    for option in reversed(
        (
            click.option(
                "--in-flight",
                type=click.IntRange(min=1),
                default=64,
                show_default=True,
                help="Calls in flight (in-process).",
            ),
            click.option(
                "--max-cost",
                type=FiniteRange(min=0),
                default=None,
                metavar="USD",
                help="Stop dispatching once this much is spent or reserved.",
            ),
            timeout_option,
            quiet_option,
        )
    ):
        f = option(f)
    return f


def _plan_options(f: F) -> F:
    for option in reversed(
        (
            click.option(
                "--run", "run_name", default=None, help="Run name; the same name and inputs resume."
            ),
            click.option(
                "--dry-run", is_flag=True, help="Estimate calls, tokens and cost; write nothing."
            ),
        )
    ):
        f = option(f)
    return f


def _source(kw: dict[str, Any]) -> InstanceSource:
    from flask_eval.app.jobs import InstanceSource

    return InstanceSource(
        kw.pop("instances"), kw.pop("biggen"), kw.pop("prometheus_set"), kw.pop("pairwise_set")
    )


def _sampling(kw: dict[str, Any]) -> Sampling:
    from flask_eval.core.spec import Sampling

    return Sampling(kw["limit"], kw["sample"], kw["seed"])


def _say(quiet: bool) -> Callable[[str], None]:
    return (lambda _line: None) if quiet else (lambda line: click.echo(line, err=True))


def _execute(
    plan: Plan,
    settings: Settings,
    verb: str,
    kw: dict[str, Any],
    read: Callable[[Store, RunInfo], T],
) -> T:
    """Do ``plan``'s work (StepIncomplete, exit code 1, when some is left), then ``read``
    what its run produced, on the same store."""
    from flask_eval.app import steps
    from flask_eval.app.budget import check_budget
    from flask_eval.storage.store import Store

    check_budget(plan.judges, plan.name, settings.database_url, kw["max_cost"])
    store = Store(settings.database_url)
    try:
        dispatcher = steps.dispatcher_for(settings, store, plan.judges, kw["in_flight"])
        work = steps.StepWork(
            kw["max_cost"],
            progress=not kw["quiet"],
            timeout=kw["timeout"],
            say=_say(kw["quiet"]),
        )
        result = steps.execute(plan, store, dispatcher, settings, verb=verb, work=work)
        return read(store, result.run)
    finally:
        store.close()
