"""Schema version 11: a paid answer whose usage was not trusted says so.

``call.usage_note``: why the provider's token usage was not taken as given (negative or
impossible counts), with the usage as given; the call's counts and cost are then a safe
estimate (workers/usage.py). NULL for every answer stored before. ``ix_call_untrusted``
finds a run's such calls without reading the others (``status``, the report).

Revision ID: 0011_v11
Revises: 0010_v10
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_v11"
down_revision = "0010_v10"
branch_labels = None
depends_on = None

UNTRUSTED = "usage_note IS NOT NULL"


def upgrade() -> None:
    op.add_column("call", sa.Column("usage_note", sa.Text(), nullable=True))
    where = sa.text(UNTRUSTED)
    op.create_index(
        "ix_call_untrusted", "call", ["run_id"], postgresql_where=where, sqlite_where=where
    )


def downgrade() -> None:
    op.drop_index("ix_call_untrusted", "call")
    with op.batch_alter_table("call") as batch:
        batch.drop_column("usage_note")
