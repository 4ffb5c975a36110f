"""Ride out database outages: retry transient errors with backoff instead of dropping work.

A worker holding a paid judge answer must not lose it because PostgreSQL restarted or a
network link blinked; it waits and retries for up to ``FLASK_EVAL_DB_RETRY_SECONDS``
(default 300 s). Errors that are not about the connection are raised at once.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import random
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import ParamSpec, TypeVar

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

P = ParamSpec("P")
T = TypeVar("T")

log = logging.getLogger("flask_eval.storage")


#: a shorter window for the calls made in a ``retrying_within`` block (None: the setting)
_WITHIN: ContextVar[float | None] = ContextVar("flask_eval_retry_within", default=None)


def retry_window() -> float:
    """``FLASK_EVAL_DB_RETRY_SECONDS``, as the settings read and validate it (or less,
    in a :func:`retrying_within` block)."""
    from flask_eval.core import settings

    window = settings.load().db_retry_seconds
    cap = _WITHIN.get()
    return window if cap is None else min(window, cap)


@contextlib.contextmanager
def retrying_within(seconds: float | None) -> Iterator[None]:
    """The calls made in this block retry an outage for at most ``seconds`` (None: as
    long as the setting says): a caller with a deadline of its own (`wait --timeout`)."""
    token = _WITHIN.set(None if seconds is None else max(0.0, seconds))
    try:
        yield
    finally:
        _WITHIN.reset(token)


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, OperationalError | InterfaceError):
        return True
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


def transient_retry(fn: Callable[P, T]) -> Callable[P, T]:
    """Retry ``fn`` on connection errors with capped exponential backoff and jitter."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        deadline = time.monotonic() + retry_window()
        attempt = 0
        while True:
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                if not is_transient(exc) or time.monotonic() > deadline:
                    raise
                attempt += 1
                delay = min(5.0, 0.1 * 2**attempt) * random.uniform(0.5, 1.0)
                if attempt in (1, 10) or attempt % 30 == 0:
                    log.warning(
                        "database unavailable (%s); retrying %s (attempt %d)",
                        type(exc).__name__,
                        fn.__name__,
                        attempt,
                    )
                time.sleep(delay)

    return wrapper
