"""`flask-eval rate`: the rating workspace, where people rate a run's responses in a web
browser (docs/rating.md)."""

from __future__ import annotations

import errno
import ipaddress
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from flask_eval.cli.common import SHORT_HELP, handle_errors
from flask_eval.core.errors import InputError
from flask_eval.core.people import DEFAULT_LEASE, RATE_PORT

if TYPE_CHECKING:
    from flask_eval.storage.store import Store
    from flask_eval.viewer.rate_security import RateOptions

F = TypeVar("F", bound=Callable[..., Any])


def lease_option(command: F) -> F:
    return click.option(
        "--lease",
        type=click.FloatRange(10, 7 * 24 * 3600),
        default=DEFAULT_LEASE,
        show_default=True,
        help="Seconds a rater holds an item before it goes back to their queue.",
    )(command)


def tls_option(command: F) -> F:
    return click.option(
        "--behind-tls",
        is_flag=True,
        help="Clients reach the server over HTTPS through a reverse proxy on this machine: "
        "cookies are Secure, and the client address is the proxy's X-Forwarded-For.",
    )(command)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``; InputError when it is taken or not ours."""
    try:
        return socket.create_server((host, port), reuse_port=False)
    except OSError as exc:
        why = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc.strerror})"
        raise InputError(f"--port {port}: {host}:{port} {why}") from None


def open_db(url: str | None) -> Store:
    """The store at ``url`` (else the configured one); InputError when there is none."""
    from flask_eval.cli.common import open_store

    return open_store(url=url)


def warn_if_exposed(host: str, behind_tls: bool) -> None:
    """A warning when raters' tokens and sessions would cross a network in clear text."""
    try:
        local = ipaddress.ip_address(host).is_loopback
    except ValueError:
        local = host == "localhost"
    if not local and not behind_tls:
        click.echo(
            f"warning: serving on {host} without TLS: sign-in tokens and session cookies "
            "cross the network in clear text; put a TLS reverse proxy in front "
            "(docs/rating.md) and pass --behind-tls",
            err=True,
        )


def options(lease: float, behind_tls: bool, with_results: bool = False) -> RateOptions:
    from flask_eval.viewer.rate_security import RateOptions

    return RateOptions(lease=lease, behind_tls=behind_tls, with_results=with_results)


@click.command(short_help=SHORT_HELP["rate"])
@click.option(
    "--db", "db", default=None, metavar="URL", help="The store (default: the configured one)."
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (another than 127.0.0.1 exposes the workspace to others).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=RATE_PORT,
    show_default=True,
    help="Port to listen on (0: any free port).",
)
@lease_option
@tls_option
@handle_errors
def rate(db: str | None, host: str, port: int, lease: float, behind_tls: bool) -> None:
    """Serve the rating workspace: each rater signs in with the link `flask-eval raters add`
    printed and rates their own items, one page at a time. Prints `listening on URL` once
    it accepts connections; serves until Ctrl-C."""
    from aiohttp import web

    from flask_eval.viewer.rate_server import make_app

    store = open_db(db)
    sock = bind(host, port)
    warn_if_exposed(host, behind_tls)
    app = make_app(store, options(lease, behind_tls))
    url = f"http://{host}:{sock.getsockname()[1]}/rate"

    async def announce(_: web.Application) -> None:
        click.echo(f"flask-eval rate: listening on {url} (Ctrl-C to stop)", err=True)

    app.on_startup.append(announce)
    web.run_app(app, sock=sock, print=None, access_log=None)


def register(main: click.Group) -> None:
    """Add ``rate`` to ``main``."""
    main.add_command(rate)
