"""Serving the judge simulator (simulator/server.py builds the app): :func:`start` and
:func:`serve` in a running event loop, :func:`run` in the foreground until a signal."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable

from aiohttp import web

from .config import SimConfig
from .server import make_app

SHUTDOWN_TIMEOUT_S = 0.5
LISTEN_BACKLOG = 2048


async def start(
    config: SimConfig, host: str = "127.0.0.1", port: int = 8765
) -> tuple[web.AppRunner, int]:
    """Start serving; returns the runner (call ``await runner.cleanup()``) and the real port."""
    runner = web.AppRunner(
        make_app(config),
        access_log=None,
        handler_cancellation=True,
        shutdown_timeout=SHUTDOWN_TIMEOUT_S,
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=LISTEN_BACKLOG)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    bound = runner.addresses[0][1] if runner.addresses else port
    return runner, int(bound)


async def serve(
    config: SimConfig,
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    stop: asyncio.Event | None = None,
    on_ready: Callable[[int], None] | None = None,
) -> None:
    """Serve until ``stop`` is set (or forever / until cancelled when it is None).

    ``on_ready(port)`` is called once the socket is bound, with the real port.
    """
    runner, bound = await start(config, host, port)
    try:
        if on_ready is not None:
            on_ready(bound)
        if stop is None:
            stop = asyncio.Event()
        await stop.wait()
    finally:
        await runner.cleanup()


def _listening_line(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"simulator listening on http://{shown}:{port}"


def run(config: SimConfig, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve in the foreground until SIGINT/SIGTERM.

    Prints ``simulator listening on http://HOST:PORT`` (flushed) once bound: first, and
    unchanged, since simulator/testing.py parses it. Then the three base URLs, each with
    the variable to set, because they differ: the OpenAI SDK wants ``/v1`` on the URL,
    the Anthropic SDK adds ``/v1`` itself (given ``.../v1`` it would ask ``/v1/v1/...``),
    the google-genai SDK adds ``/v1beta`` (or ``/v1``) itself.
    """

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):  # non-POSIX
                loop.add_signal_handler(sig, stop.set)

        def ready(bound: int) -> None:
            listening = _listening_line(host, bound)
            base = listening.rsplit(" ", 1)[1]  # http://HOST:PORT
            print(
                listening,
                f"OpenAI-compatible base URL: OPENAI_BASE_URL={base}/v1",
                f"Anthropic base URL: ANTHROPIC_BASE_URL={base}",
                f"Gemini base URL: GOOGLE_GEMINI_BASE_URL={base}",
                sep="\n",
                flush=True,
            )

        await serve(config, host, port, stop=stop, on_ready=ready)

    with contextlib.suppress(KeyboardInterrupt):  # the signal handler normally catches it
        asyncio.run(main())
    sys.stdout.flush()
