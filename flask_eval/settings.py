"""Settings from the environment (never from files that might be committed)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from flask_eval.exceptions import ConfigError

if TYPE_CHECKING:
    from workers.runner import ExecutorConfig

DEFAULT_DB_FILE = "flask-eval.db"


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


def executor_config(settings: Settings, in_flight: int) -> ExecutorConfig:
    """The executor settings of a worker process or an in-process run."""
    from workers.judge import GenerateConfig
    from workers.runner import ExecutorConfig

    return ExecutorConfig(
        in_flight=in_flight,
        lease_seconds=settings.lease_seconds,
        generate=GenerateConfig(timeout=settings.judge_timeout),
        max_attempts=settings.max_attempts,
    )


def load() -> Settings:
    db = os.environ.get("FLASK_EVAL_DATABASE_URL") or f"sqlite:///{Path.cwd() / DEFAULT_DB_FILE}"
    broker = os.environ.get("FLASK_EVAL_BROKER_URL") or None
    if broker is not None and not broker.startswith(("redis://", "rediss://", "memory://")):
        raise ConfigError(
            f"FLASK_EVAL_BROKER_URL must be a redis:// or rediss:// URL, got {broker.split('://')[0]}://..."
        )
    lease = _positive("FLASK_EVAL_LEASE_SECONDS", 60.0)
    visibility = _positive("FLASK_EVAL_VISIBILITY_TIMEOUT", max(120.0, lease * 2))
    if visibility <= lease:
        raise ConfigError(
            "FLASK_EVAL_VISIBILITY_TIMEOUT must be longer than FLASK_EVAL_LEASE_SECONDS, "
            "or a redelivered message would find its rows still leased and skip them"
        )
    return Settings(
        database_url=db,
        broker_url=broker,
        calls_per_message=int(_positive("FLASK_EVAL_CALLS_PER_MESSAGE", 64)),
        lease_seconds=lease,
        visibility_timeout=visibility,
        queue=os.environ.get("FLASK_EVAL_QUEUE") or "flask_eval",
        judge_timeout=_positive("FLASK_EVAL_JUDGE_TIMEOUT", 120.0),
        max_attempts=int(_positive("FLASK_EVAL_MAX_ATTEMPTS", 6)),
    )
