"""The command of a kind of work that has no command of its own: made from its registry
row (``rubrics.kinds.PLUGINS``, its words and subject), named after the kind. It plans
the run (app/jobs.py ``prepare_kind``), does the work through the same workers as
judging, and writes the run's records as the kind's export makes them (JSON Lines).

Imported when such a command is named or listed in full (start-up: `--help` of the group
imports neither SQLAlchemy nor Celery).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from flask_eval.cli.common import ENV_RUN, EnvHelp, handle_errors
from flask_eval.cli.dry_run import print_dry_run
from flask_eval.cli.job_options import (
    _execute,
    _plan_options,
    _source,
    _source_options,
    _work_options,
)
from flask_eval.cli.wait import check_waiting
from flask_eval.core import settings as settings_mod
from flask_eval.rubrics import kinds
from flask_eval.rubrics.kind import RESPONSE, Kind

if TYPE_CHECKING:
    from flask_eval.storage.records import RunInfo
    from flask_eval.storage.store import Store


def generic(name: str) -> bool:
    """Whether the kind ``name`` is run by the command this module makes of it."""
    return name in kinds.KINDS and not kinds.KINDS[name].command


def kind_command(name: str) -> click.Command:
    """The command named after the kind ``name``: its workers as ``--<worker>`` specs and
    ``--<worker>s`` files, ``--responses NAME=PATH`` when its rows are about responses."""
    kind = kinds.kind(name)
    worker, holds = kind.words.worker, kind.words.holds

    def command(**kw: Any) -> None:
        _do(kind, kw)

    options = [
        _source_options,
        click.option(
            f"--{worker}",
            "workers",
            multiple=True,
            metavar="[NAME=]SPEC",
            help=f"A {worker}, provider/model[@BASE_URL]; repeatable.",
        ),
        click.option(
            f"--{worker}s",
            "workers_files",
            multiple=True,
            metavar="FILE",
            help=f"{worker.capitalize()}s file (the judges file's format).",
        ),
        click.option(
            "--out",
            "out_path",
            default=f"{holds}.jsonl",
            show_default=True,
            metavar="FILE",
            help=f"The {holds}, one record a line (as `export` writes them).",
        ),
        _plan_options,
        _work_options,
    ]
    if kind.subject == RESPONSE:
        options.insert(
            1,
            click.option(
                "--responses",
                multiple=True,
                metavar="NAME=PATH",
                help="A model's responses (FLASK's model-output JSON Lines); repeatable.",
            ),
        )
    decorated: Any = handle_errors(command)
    for option in reversed(options):
        decorated = option(decorated)
    return click.command(
        name,
        cls=EnvHelp,
        env=ENV_RUN,
        short_help=kind.summary,
        help=f"{kind.summary} The {holds} are written as JSON Lines (--out).",
    )(decorated)


def _do(kind: Kind, kw: dict[str, Any]) -> None:
    from flask_eval.app import jobs
    from flask_eval.core.spec import Sampling

    settings = settings_mod.load()
    check_waiting(settings, False, kw["timeout"])
    plan = jobs.prepare_kind(
        kind.name,
        _source(kw),
        workers=kw["workers"],
        workers_files=kw["workers_files"],
        responses=kw.get("responses") or (),
        run_name=kw["run_name"],
        sampling=Sampling(limit=kw["limit"], sample=kw["sample"], seed=kw["seed"]),
    )
    if kw["dry_run"]:
        print_dry_run(plan, settings)
        return

    def write(store: Store, run: RunInfo) -> int:
        from flask_eval.app.exporting import export_rows
        from flask_eval.core.files import replaced_whole
        from flask_eval.report import render

        records = list(export_rows(store, run).rows)
        with replaced_whole(kw["out_path"]) as handle:
            render.write_jsonl(handle, records)
        return sum(r.get("status") == "done" for r in records)

    done = _execute(plan, settings, kind.name, kw, write)
    n = len(plan.judges)
    who = kind.words.worker if n == 1 else kind.words.workers
    click.echo(f"{done} {kind.words.holds} by {n} {who} -> {kw['out_path']}")


def register(main: click.Group, name: str) -> None:
    main.add_command(kind_command(name))
