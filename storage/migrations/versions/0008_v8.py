"""Schema version 8: the read side's cached views of a run (docs/design/viewer.md).

- ``report_snapshot``: (run, name) -> the ledger fingerprint it was computed at
  (``token``) and the view (``body``, JSON gzip+base64), which `flask-eval view`'s run
  page serves while the fingerprint is unchanged;
- ``ix_judgment_cell`` (run_id, model, judge, id): a page of one cell's judgments reads
  that cell's rows in id order and stops after a page, wherever the cell sits in the run.

Stores of an older version get the table empty.

Revision ID: 0008_v8
Revises: 0006_v6
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_v8"
down_revision = "0007_v7"
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
    op.create_index("ix_judgment_cell", "judgment", ["run_id", "model", "judge", "id"])


def downgrade() -> None:
    op.drop_index("ix_judgment_cell", "judgment")
    op.drop_table("report_snapshot")
