"""Schema version 8: the read side's cached views of a run (docs/design/viewer.md).

- ``report_snapshot``: (run, name) -> the ledger fingerprint it was computed at
  (``token``) and the view (``body``, JSON gzip+base64), which `flask-eval view`'s run
  page serves while the fingerprint is unchanged.

Stores of an older version get the table empty.

Revision ID: 0008_v8
Revises: 0006_v6
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_v8"
down_revision = "0006_v6"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "report_snapshot",
        sa.Column("run_id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("token", sa.String(64), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("report_snapshot")
