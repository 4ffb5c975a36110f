"""`flask-eval view`: the browser viewer over a store (docs/design/viewer.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from flask_eval.cli.common import SHORT_HELP, epilog, handle_errors, open_store
from flask_eval.cli.rate import bind, lease_option, options, tls_option, warn_if_exposed
from flask_eval.core.errors import InputError

if TYPE_CHECKING:
    from flask_eval.storage.store import Store
    from flask_eval.viewer.server import Refresher

#: runs whose run page is computed ahead at start (newest first)
WARM_RUNS = 5


def warm(refresher: Refresher, store: Store, names: list[str]) -> None:
    """Have the run pages of ``names`` (their snapshots) computed in the background."""
    from flask_eval.app import browse

    for name in names:
        try:
            refresher.ask(browse.find_run(store, name))
        except Exception:  # a run deleted since it was listed
            continue


@click.command(
    epilog=epilog({"FLASK_EVAL_DATABASE_URL": "the store to browse"}), short_help=SHORT_HELP["view"]
)
@click.argument("run_name", required=False)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8686,
    show_default=True,
    help="Port to listen on (0: any free port).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (another than 127.0.0.1 shows the store to others).",
)
@click.option("--no-warm", is_flag=True, help="Do not compute the newest runs' pages at start.")
@click.option(
    "--rate",
    "rate",
    is_flag=True,
    help="Serve the rating workspace at /rate too (docs/rating.md); the viewer's pages are "
    "then refused unless --with-results.",
)
@click.option(
    "--with-results",
    is_flag=True,
    help="With --rate: show the viewer's pages to signed-in raters allowed to view results "
    "(their may_view), and to no one else.",
)
@lease_option
@tls_option
@handle_errors
def view(
    run_name: str | None,
    port: int,
    host: str,
    no_warm: bool,
    rate: bool,
    with_results: bool,
    lease: float,
    behind_tls: bool,
) -> None:
    """Browse the store's runs in a web browser: leaderboards with intervals, the report's
    figures, the judgments behind any cell (prompt, rationale, raw output), two models side
    by side. Read-only; serves until Ctrl-C. With --rate, also the rating workspace."""
    from aiohttp import web

    from flask_eval.app import browse
    from flask_eval.rubrics import kinds
    from flask_eval.viewer.body import run_url
    from flask_eval.viewer.server import Refresher, make_app

    if with_results and not rate:
        raise InputError("--with-results is for --rate: the viewer alone shows every page")
    store = open_store()
    path = "/rate" if rate else "/"
    if run_name is not None and not rate:
        path = run_url(browse.find_run(store, run_name).name)
    sock = bind(host, port)
    refresher = Refresher(store)
    if not no_warm and (with_results or not rate):
        names = [
            r.name for r in browse.list_runs(store)[:WARM_RUNS] if kinds.of(r.config.kind).scores
        ]
        warm(refresher, store, names)
    shown = f"http://{host}:{sock.getsockname()[1]}{path}"
    served = options(lease, behind_tls, with_results) if rate else None
    if rate:
        warn_if_exposed(host, behind_tls)
    click.echo(f"flask-eval view: listening on {shown} (Ctrl-C to stop)", err=True)
    web.run_app(make_app(store, refresher, served), sock=sock, print=None, access_log=None)


def register(main: click.Group) -> None:
    """Add ``view`` to ``main``."""
    main.add_command(view)
