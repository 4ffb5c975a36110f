"""Engines: SQLite (embedded default) and PostgreSQL, with the schema created on open."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError
from sqlmodel import SQLModel, create_engine

from flask_eval.exceptions import ConfigError
from storage import models  # noqa: F401  (registers the tables)

SQLITE_BUSY_TIMEOUT_MS = 30_000


def normalize_url(url: str) -> str:
    """Accept ``postgresql://`` and ``postgres://``; use the psycopg 3 driver."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    return url


def redact_url(url: str) -> str:
    """The URL with any password hidden, for messages and logs."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparseable database URL>"


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # Let SQLAlchemy's "begin" event issue BEGIN IMMEDIATE: writers queue on the
    # busy timeout instead of failing with "database is locked" on lock upgrade.
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def _sqlite_begin(conn: Any) -> None:
    conn.exec_driver_sql("BEGIN IMMEDIATE")


def make_engine(url: str) -> Engine:
    """An engine for ``url`` with the schema created (idempotent, safe to race)."""
    url = normalize_url(url)
    try:
        parsed = make_url(url)
    except Exception as exc:
        raise ConfigError(f"invalid database URL {redact_url(url)!r}: {exc}") from None
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
    elif parsed.get_backend_name() == "postgresql":
        engine = create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)
    else:
        raise ConfigError(
            f"unsupported database {parsed.get_backend_name()!r}; use sqlite:/// or postgresql://"
        )
    create_schema(engine)
    return engine


def create_schema(engine: Engine, attempts: int = 5) -> None:
    """Create missing tables; concurrent creators on PostgreSQL may collide, so retry."""
    for attempt in range(attempts):
        try:
            SQLModel.metadata.create_all(engine)
            return
        except (IntegrityError, ProgrammingError):
            if attempt == attempts - 1:
                raise
            time.sleep(0.2 * (attempt + 1))
        except OperationalError as exc:
            raise ConfigError(
                f"cannot open database {redact_url(str(engine.url))}: {exc.orig}"
            ) from None
