"""Alembic's entry point: run the migrations on the connection ``storage.db`` passes in.

Migrations run in-process when a store is opened (``storage.db.create_schema``), never from the
``alembic`` command line, so there is no ``alembic.ini``: the caller sets
``config.attributes["connection"]`` and holds the transaction and the lock.
"""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

from flask_eval.storage import models  # noqa: F401  (registers the tables)

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=SQLModel.metadata,
    render_as_batch=True,  # SQLite alters tables by copying them
    transaction_per_migration=False,
)
context.run_migrations()
