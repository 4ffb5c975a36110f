"""Settings from the environment (never from files that might be committed), read here only.

Every variable is validated in :func:`load`, before anything is written: a value out of
range is a :class:`ConfigError` naming the variable (exit code 2), not a run that is
written and then crashes.

=================================  ==========  ===========================================
variable                           default     accepted
=================================  ==========  ===========================================
``FLASK_EVAL_DATABASE_URL``        ./flask-    ``sqlite:///PATH`` (a file: an in-memory
                                   eval.db     database vanishes with the command and no
                                               worker could see it) or ``postgresql://...``
``FLASK_EVAL_BROKER_URL``          (none)      ``redis://``, ``rediss://``, ``amqp://``,
                                               ``amqps://`` (``memory://`` for tests)
``FLASK_EVAL_QUEUE``               flask_eval  1-200 of letters, digits, ``. _ : -``
``FLASK_EVAL_CALLS_PER_MESSAGE``   64          a whole number, 1 .. 10,000
``FLASK_EVAL_LEASE_SECONDS``       60          seconds, 1 .. 86,400 (one day)
``FLASK_EVAL_VISIBILITY_TIMEOUT``  120         seconds, 1 .. 604,800 (a week), > the lease
``FLASK_EVAL_JUDGE_TIMEOUT``       120         seconds, 0.1 .. 3,600
``FLASK_EVAL_MAX_ATTEMPTS``        6           a whole number, 1 .. 100
``FLASK_EVAL_DB_RETRY_SECONDS``    300         seconds, 0 .. 86,400
``FLASK_EVAL_HALT_AFTER``          5           a whole number of calls, 0 .. 1,000,000
                                               (0: never halt a failing judge)
``FLASK_EVAL_ADAPTIVE``            1           1: a judge's calls in flight fall on timeouts
                                               and 429s and climb back (workers/adaptive.py);
                                               0: always its max_in_flight
``FLASK_EVAL_BATCH_POLL_SECONDS``  30          seconds between two looks at the open provider
                                               batches, 0.05 .. 3,600 (docs/design/batches.md)
``FLASK_EVAL_SPOOL_DIR``           ~/.cache/   a directory for paid answers while the
                                   flask-eval/ database is away
                                   spool
=================================  ==========  ===========================================

An empty variable means its default.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl

from flask_eval.core.errors import ConfigError
from flask_eval.core.redact import redact
from flask_eval.core.text import clip

DEFAULT_DB_FILE = "flask-eval.db"

BROKER_SCHEMES = ("redis", "rediss", "redis+socket", "amqp", "amqps", "memory")
_QUEUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
_DIGITS = re.compile(r"[0-9]{1,15}")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]{0,30})://")
_SQLITE = re.compile(r"sqlite(\+[a-z0-9_]+)?://", re.IGNORECASE)
_POSTGRES = re.compile(r"(postgres|postgresql)(\+[a-z0-9_]+)?://", re.IGNORECASE)


@dataclass(frozen=True)
class Settings:
    database_url: str
    broker_url: str | None
    #: judge calls carried by one Celery message (Celery costs ~0.65 ms per message)
    calls_per_message: int = 64
    #: a claimed row is owned by its worker for this long, renewed by a heartbeat
    lease_seconds: float = 60.0
    #: Redis visibility timeout: an unacked message is redelivered after this long. Short
    #: on purpose: a redelivery of a message still running claims nothing (its rows are
    #: leased), while a killed worker's messages come back within minutes.
    visibility_timeout: float = 120.0
    queue: str = "flask_eval"
    #: seconds a judge call may take before it counts as a timeout
    judge_timeout: float = 120.0
    #: attempts per judge call for retryable errors (rate limits, 5xx, timeouts)
    max_attempts: int = 6
    #: how long a worker rides out a database outage before giving up (storage/retry.py)
    db_retry_seconds: float = 300.0
    #: a judge whose first calls in a run all fail alike is halted after this many (0: never)
    halt_after: int = 5
    #: adapt each judge's calls in flight to its timeouts and 429s (workers/adaptive.py)
    adaptive: bool = True
    #: where workers keep paid answers on disk while the database is away
    spool_dir: Path = field(default_factory=lambda: default_spool_dir())
    #: seconds without progress before `run` checks whether workers are alive
    stall_seconds: float = 15.0
    #: the Redis holding the shared rpm/tpm budgets (None: the broker's, if Redis)
    limiter_url: str | None = None
    #: seconds between two looks at the open provider batches (workers/batch_lane.py)
    batch_poll_seconds: float = 30.0


def _raw(name: str) -> str | None:
    raw = os.environ.get(name)
    return None if raw is None or not raw.strip() else raw.strip()


def _whole(name: str, default: int, low: int, high: int, unit: str) -> int:
    """A whole-number setting in ``low..high``: ``0.5`` or ``nan`` is an error, not 0."""
    raw = _raw(name)
    if raw is None:
        return default
    rule = f"use a whole number of {unit} from {low:,} to {high:,}"
    if _DIGITS.fullmatch(raw) is None:
        if raw.isascii() and raw.isdigit():  # only too many digits
            raise ConfigError(f"{name}={clip(raw)} is out of range; {rule}")
        raise ConfigError(f"{name}={clip(raw)} is not a whole number; {rule}")
    value = int(raw)
    if not low <= value <= high:
        raise ConfigError(f"{name}={value} is out of range; {rule}")
    return value


def _switch(name: str, default: bool) -> bool:
    """A setting that is on (``1``) or off (``0``)."""
    raw = _raw(name)
    if raw is None:
        return default
    if raw not in ("0", "1"):
        raise ConfigError(f"{name}={clip(raw)} is neither 1 (on) nor 0 (off)")
    return raw == "1"


def _seconds(name: str, default: float, low: float, high: float) -> float:
    """A finite number of seconds in ``low..high`` (``nan``, ``inf`` and ``1e12`` are not)."""
    raw = _raw(name)
    if raw is None:
        return default
    rule = f"use a number of seconds from {low:,g} to {high:,g}"
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={clip(raw)} is not a number; {rule}") from None
    if not math.isfinite(value):
        raise ConfigError(f"{name}={clip(raw)} is not a finite number; {rule}")
    if not low <= value <= high:
        raise ConfigError(f"{name}={clip(raw)} is out of range; {rule}")
    return value


def _scheme(url: str) -> str:
    found = _SCHEME.match(url)
    return f"{found.group(1)}://..." if found else "a value without a scheme://"


def check_database_url(url: str) -> str:
    """``url`` if it names a database workers can share; ConfigError otherwise.

    An in-memory SQLite database (``sqlite://``, ``sqlite:///:memory:``,
    ``?mode=memory``) is refused: it vanishes when the command ends, and workers in other
    processes could never see it. The message never shows more than the scheme (a URL
    may carry a password).
    """
    name = "FLASK_EVAL_DATABASE_URL"
    sqlite = _SQLITE.match(url)
    if sqlite is not None:
        rest = url[sqlite.end() :]
        path, _, query = rest.partition("?")
        memory = dict(parse_qsl(query)).get("mode") == "memory"
        if not path.startswith("/") and path:
            raise ConfigError(
                f"{name}: a SQLite URL is sqlite:///PATH (three slashes), got sqlite://{clip(path)}"
            )
        if path in ("", "/", "/:memory:") or memory or path.startswith("/file::memory:"):
            raise ConfigError(
                f"{name}: an in-memory SQLite database is not supported (it vanishes when "
                "the command ends and workers cannot see it); use sqlite:///PATH to a file"
            )
        return url
    if _POSTGRES.match(url) is not None:
        return url
    raise ConfigError(f"{name} must be sqlite:///PATH or postgresql://..., got {_scheme(url)}")


def check_broker_url(url: str) -> str:
    """``url`` if Celery can use it as our broker; ConfigError otherwise (scheme only)."""
    found = _SCHEME.match(url)
    if found is None or found.group(1).lower() not in BROKER_SCHEMES:
        raise ConfigError(
            "FLASK_EVAL_BROKER_URL must be a redis://, rediss://, amqp:// or amqps:// URL, "
            f"got {_scheme(url)}"
        )
    return url


def default_spool_dir() -> Path:
    """``$XDG_CACHE_HOME/flask-eval/spool`` (``~/.cache/flask-eval/spool``)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "flask-eval" / "spool"


def load() -> Settings:
    """The settings of this process, every variable validated (ConfigError naming it)."""
    db = _raw("FLASK_EVAL_DATABASE_URL") or f"sqlite:///{Path.cwd() / DEFAULT_DB_FILE}"
    broker = _raw("FLASK_EVAL_BROKER_URL")
    queue = _raw("FLASK_EVAL_QUEUE") or "flask_eval"
    if _QUEUE.fullmatch(queue) is None:
        raise ConfigError(
            f"FLASK_EVAL_QUEUE={clip(queue)} is not a queue name; use 1-200 letters, "
            "digits, '.', '_', ':' or '-', starting with a letter or digit"
        )
    lease = _seconds("FLASK_EVAL_LEASE_SECONDS", 60.0, 1.0, 86_400.0)
    visibility = _seconds("FLASK_EVAL_VISIBILITY_TIMEOUT", max(120.0, lease * 2), 1.0, 7 * 86_400.0)
    if visibility <= lease:
        raise ConfigError(
            "FLASK_EVAL_VISIBILITY_TIMEOUT must be longer than FLASK_EVAL_LEASE_SECONDS, "
            "or a redelivered message would find its rows still leased and skip them"
        )
    return Settings(
        database_url=check_database_url(db),
        broker_url=None if broker is None else check_broker_url(broker),
        calls_per_message=_whole("FLASK_EVAL_CALLS_PER_MESSAGE", 64, 1, 10_000, "calls"),
        lease_seconds=lease,
        visibility_timeout=visibility,
        queue=queue,
        judge_timeout=_seconds("FLASK_EVAL_JUDGE_TIMEOUT", 120.0, 0.1, 3_600.0),
        max_attempts=_whole("FLASK_EVAL_MAX_ATTEMPTS", 6, 1, 100, "attempts"),
        db_retry_seconds=_seconds("FLASK_EVAL_DB_RETRY_SECONDS", 300.0, 0.0, 86_400.0),
        halt_after=_whole("FLASK_EVAL_HALT_AFTER", 5, 0, 1_000_000, "calls"),
        adaptive=_switch("FLASK_EVAL_ADAPTIVE", True),
        spool_dir=Path(_raw("FLASK_EVAL_SPOOL_DIR") or default_spool_dir()),
        stall_seconds=_seconds("FLASK_EVAL_STALL_SECONDS", 15.0, 0.5, 3_600.0),
        limiter_url=_limiter_url(_raw("FLASK_EVAL_LIMITER_URL")),
        batch_poll_seconds=_seconds("FLASK_EVAL_BATCH_POLL_SECONDS", 30.0, 0.05, 3_600.0),
    )


def _limiter_url(url: str | None) -> str | None:
    if url is not None and not url.lower().startswith(("redis://", "rediss://")):
        raise ConfigError(
            f"FLASK_EVAL_LIMITER_URL must be a redis:// or rediss:// URL, got {clip(redact(url))}"
        )
    return url
