"""Engines: SQLite (embedded default) and PostgreSQL, with the schema created on open."""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import event, inspect
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError
from sqlmodel import SQLModel, create_engine

from flask_eval.core.errors import ConfigError
from flask_eval.storage import models, tally  # noqa: F401  (registers the tables, triggers)

if TYPE_CHECKING:
    from alembic.config import Config

SQLITE_BUSY_TIMEOUT_MS = 30_000


def normalize_url(url: str) -> str:
    """Accept ``postgresql://`` and ``postgres://``; use the psycopg 3 driver."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    return url


def redact_url(url: str) -> str:
    """The URL with any password hidden (in its userinfo or its query), for messages."""
    from flask_eval.core.redact import redact

    try:
        return redact(make_url(url).render_as_string(hide_password=True))
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


def lacks_store(url: str) -> bool:
    """Whether ``url`` is known to hold no flask-eval store: a SQLite file that does not
    exist, or a database that answers and has no ledger. An unreachable database is not
    known to lack one (opening it says why it cannot be reached). Creates nothing."""
    url = normalize_url(url)
    try:
        parsed = make_url(url)
    except Exception:
        return False  # opening it says what is wrong with the URL
    if parsed.get_backend_name() == "sqlite":
        return not Path(parsed.database or "").is_file() or not has_store(url)
    try:
        engine = create_engine(url, connect_args={"connect_timeout": 5})
    except Exception:
        return False
    try:
        with engine.connect() as conn:
            return "judgment" not in inspect(conn).get_table_names()
    except Exception:  # unreachable: opening it says so
        return False
    finally:
        engine.dispose()


def has_store(url: str) -> bool:
    """Whether ``url`` already holds a flask-eval store, found without creating anything
    (no file, no table): what `run --dry-run` reads the answer cache from."""
    url = normalize_url(url)
    try:
        parsed = make_url(url)
        sqlite = parsed.get_backend_name() == "sqlite"
        if sqlite and not Path(parsed.database or "").is_file():
            return False
        engine = create_engine(url, connect_args={} if sqlite else {"connect_timeout": 5})
    except Exception:
        return False
    try:
        with engine.connect() as conn:
            return "judgment" in inspect(conn).get_table_names()
    except Exception:  # unreachable, or no permission: nothing to read
        return False
    finally:
        engine.dispose()


MIGRATIONS = Path(__file__).resolve().parent / "migrations"
#: the first revision: stores made before migrations existed are at this version
BASELINE = "0001_v1"
#: the newest revision in storage/migrations/versions (tests/storage/test_migrations.py
#: checks that it is alembic's head): a store already at it opens without importing
#: alembic, which costs each process ~0.1 s of start-up
HEAD = "0014_v14"
#: PostgreSQL advisory lock held while the schema is created or migrated
_SCHEMA_LOCK = 7_301_977_001


def _alembic_config(conn: Connection) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = conn
    return config


@functools.cache
def head_revision() -> str:
    """The newest schema revision of storage/migrations, as alembic reads it."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    head = ScriptDirectory.from_config(config).get_current_head()
    assert head is not None
    return head


def _stamped(conn: Connection, tables: set[str]) -> str | None:
    """The one revision alembic's table records (None: no table, or not exactly one)."""
    if "alembic_version" not in tables:
        return None
    rows = conn.exec_driver_sql("SELECT version_num FROM alembic_version").all()
    return str(rows[0][0]) if len(rows) == 1 else None


def create_schema(engine: Engine, attempts: int = 5) -> None:
    """Create a new store at the newest schema, or migrate an older one to it.

    One process at a time (PostgreSQL: an advisory lock; SQLite: ``BEGIN IMMEDIATE``), in
    one transaction, so concurrent openers never see half a migration. A store of
    version 1 (before migrations existed) has tables but no ``alembic_version``.
    """
    for attempt in range(attempts):
        try:
            with engine.begin() as conn:
                if conn.dialect.name == "postgresql":
                    conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_SCHEMA_LOCK})")
                _create_or_migrate(conn)
            return
        except (IntegrityError, ProgrammingError):
            if attempt == attempts - 1:
                raise
            time.sleep(0.2 * (attempt + 1))
        except OperationalError as exc:
            raise ConfigError(
                f"cannot open database {redact_url(str(engine.url))}: {exc.orig}"
            ) from None


def _create_or_migrate(conn: Connection) -> None:
    tables = set(inspect(conn).get_table_names())
    if "judgment" in tables and _stamped(conn, tables) == HEAD:  # the usual case
        SQLModel.metadata.create_all(conn)  # tables added without a revision of their own
        return
    from alembic import command
    from alembic.runtime.migration import MigrationContext

    if "judgment" not in tables:  # a new store
        SQLModel.metadata.create_all(conn)
        command.stamp(_alembic_config(conn), "head")
        return
    current = MigrationContext.configure(conn).get_current_revision()
    if current == head_revision():
        SQLModel.metadata.create_all(conn)
        return
    config = _alembic_config(conn)
    if current is None:
        command.stamp(config, BASELINE)
    command.upgrade(config, "head")
    SQLModel.metadata.create_all(conn)
