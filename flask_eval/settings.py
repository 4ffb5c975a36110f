"""Settings from the environment (never from files that might be committed)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from flask_eval.exceptions import ConfigError

DEFAULT_DB_FILE = "flask-eval.db"


@dataclass(frozen=True)
class Settings:
    database_url: str
    broker_url: str | None
    #: judge calls carried by one Celery message (Celery costs ~0.65 ms per message)
    calls_per_message: int = 8
    #: how long a claimed row is owned by its worker before it may be claimed again
    lease_seconds: float = 900.0
    #: Redis visibility timeout: an unacked message is redelivered after this long
    visibility_timeout: float = 3600.0
    queue: str = "flask_eval"


def _positive(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number") from None
    if value <= 0:
        raise ConfigError(f"{name} must be positive, got {raw!r}")
    return value


def load() -> Settings:
    db = os.environ.get("FLASK_EVAL_DATABASE_URL") or f"sqlite:///{Path.cwd() / DEFAULT_DB_FILE}"
    broker = os.environ.get("FLASK_EVAL_BROKER_URL") or None
    if broker is not None and not broker.startswith(("redis://", "rediss://", "memory://")):
        raise ConfigError(
            f"FLASK_EVAL_BROKER_URL must be a redis:// or rediss:// URL, got {broker.split('://')[0]}://..."
        )
    lease = _positive("FLASK_EVAL_LEASE_SECONDS", 900.0)
    return Settings(
        database_url=db,
        broker_url=broker,
        calls_per_message=int(_positive("FLASK_EVAL_CALLS_PER_MESSAGE", 8)),
        lease_seconds=lease,
        visibility_timeout=_positive("FLASK_EVAL_VISIBILITY_TIMEOUT", max(3600.0, lease * 2)),
        queue=os.environ.get("FLASK_EVAL_QUEUE") or "flask_eval",
    )
