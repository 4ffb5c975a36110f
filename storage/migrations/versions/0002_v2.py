"""Schema version 2: generic ledger keys and one row per paid call.

- ``judgment.skill`` becomes ``criterion``; ``model_b`` ('' for absolute grading) makes
  room for the second response of a pairwise comparison; the unique key includes it.
- ``judgment.attempts`` (times claimed) becomes ``claims``; ``asks`` and ``requests``
  count the answers asked for and the HTTP requests sent.
- ``call`` keeps every paid answer as its own row: ``uid`` is its identity (for rows of
  version 1, their cache key, which was unique), ``cache_key`` is no longer unique, and
  ``finish`` records why the provider stopped. ``judgment.call_key`` becomes
  ``call_uid``, with the same values.

Revision ID: 0002_v2
Revises: 0001_v1
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_v2"
down_revision = "0001_v1"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("call") as batch:
        batch.add_column(sa.Column("uid", sa.String(64), nullable=True))
        batch.add_column(sa.Column("finish", sa.String(16), nullable=False, server_default="stop"))
    op.execute("UPDATE call SET uid = cache_key")
    # SQLite's unique constraint on cache_key has no name: reflection names it by this
    # convention so that batch mode can drop it (alembic's documented recipe)
    convention = {"uq": "uq_%(table_name)s_%(column_0_name)s"}
    with op.batch_alter_table("call", naming_convention=convention) as batch:
        batch.alter_column("uid", existing_type=sa.String(64), nullable=False)
        batch.alter_column("run_id", existing_type=sa.Integer(), nullable=True)
        batch.drop_constraint(_unique_name("call", "cache_key"), type_="unique")
        batch.create_unique_constraint("uq_call_uid", ["uid"])
        batch.create_index("ix_call_cache_key", ["cache_key"])

    with op.batch_alter_table("judgment") as batch:
        batch.alter_column("skill", new_column_name="criterion", existing_type=sa.String(100))
        batch.alter_column("attempts", new_column_name="claims", existing_type=sa.Integer())
        batch.alter_column("call_key", new_column_name="call_uid", existing_type=sa.String(64))
        batch.add_column(sa.Column("model_b", sa.String(100), nullable=False, server_default=""))
        batch.add_column(sa.Column("asks", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("requests", sa.Integer(), nullable=False, server_default="0"))
        batch.drop_constraint("uq_judgment", type_="unique")
    with op.batch_alter_table("judgment") as batch:  # SQLite: after the drop, in a copy of its own
        batch.create_unique_constraint(
            "uq_judgment", ["run_id", "model", "model_b", "instance_id", "criterion", "judge"]
        )
    # a finished judgment of version 1 was asked of its judge at least once
    op.execute(
        "UPDATE judgment SET asks = 1 WHERE call_uid IS NOT NULL AND status IN ('done', 'failed')"
    )


def _unique_name(table: str, column: str) -> str:
    """The name the database gave the unique constraint of ``table.column``."""
    bind = op.get_bind()
    for constraint in sa.inspect(bind).get_unique_constraints(table):
        if constraint["column_names"] == [column] and constraint["name"]:
            return str(constraint["name"])
    if bind.dialect.name == "sqlite":
        # SQLite's unnamed constraints: batch mode recreates the table from reflection,
        # where the unique flag lives on the column; name it through the naming convention
        return f"uq_{table}_{column}"
    raise RuntimeError(f"no unique constraint on {table}.{column}")
