"""Shared fixtures: real Redis, real PostgreSQL, a real simulator; all isolated per test."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from flask_eval.workers.judge import register_provider

# The in-memory judge is for tests only: users are never offered it.
register_provider("memory", "flask_eval.workers.providers.memory_judge:MemoryJudge")

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "flask_eval" / "examples"
FLASK_DATA = Path(os.environ.get("FLASK_EVAL_FLASK_DATA", REPO.parent / "shared" / "flask-data"))
REDIS_URL = os.environ.get("FLASK_EVAL_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
AMQP_URL = os.environ.get("FLASK_EVAL_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")
POSTGRES_URL = os.environ.get(
    "FLASK_EVAL_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


def _unavailable(what: str, exc: Exception) -> None:
    # In CI the services must be there (.ci/run starts them): fail loudly. Locally, skip.
    if os.environ.get("CI"):
        pytest.fail(f"{what} unavailable in CI: {exc}")
    pytest.skip(f"{what} unavailable: {exc}")


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A real Redis database, flushed before and after the test."""
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except Exception as exc:
        _unavailable("Redis", exc)
    client.flushdb()
    yield REDIS_URL
    client.flushdb()
    client.close()


@pytest.fixture
def amqp_url() -> Iterator[str]:
    """A real RabbitMQ; the queues the test declared are deleted afterwards."""
    from kombu import Connection

    from tests.helpers import QUEUES

    try:
        with Connection(AMQP_URL, connect_timeout=5) as conn:
            conn.ensure_connection(max_retries=1)
    except Exception as exc:
        _unavailable("RabbitMQ", exc)
    before = len(QUEUES)
    yield AMQP_URL
    with Connection(AMQP_URL) as conn:
        channel = conn.channel()
        for queue in QUEUES[before:]:
            with contextlib.suppress(Exception):
                channel.queue_delete(queue)


@pytest.fixture(params=["redis", "rabbitmq"])
def broker_url(request: pytest.FixtureRequest) -> str:
    """Each worker test runs on a Redis broker and on a RabbitMQ broker."""
    return str(request.getfixturevalue("redis_url" if request.param == "redis" else "amqp_url"))


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test, dropped afterwards."""
    import psycopg

    name = f"flask_eval_test_{uuid.uuid4().hex[:12]}"
    try:
        admin = psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=5)
    except Exception as exc:
        _unavailable("PostgreSQL", exc)
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    base = POSTGRES_URL.rsplit("/", 1)[0]
    yield f"{base}/{name}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'flask-eval.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each storage test runs on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'flask-eval.db'}"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def flask_data() -> Path:
    if not (FLASK_DATA / "evaluation_set" / "flask_evaluation.jsonl").exists():
        pytest.skip("FLASK data not available (../shared/flask-data)")
    return FLASK_DATA
