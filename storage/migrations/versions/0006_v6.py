"""Schema version 6: a ledger row keeps what a kind of work other than judgment read from
its answer (docs/design/job-kinds.md).

- ``judgment.value`` (text, NULL): a generation row's response, an annotation row's labels
  (JSON text); NULL for a judgment, whose outcome is its ``score``.

Rows of version 5 are judgments: NULL is what they hold.

Revision ID: 0006_v6
Revises: 0005_v5
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_v6"
down_revision = "0005_v5"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("judgment") as batch:
        batch.add_column(sa.Column("value", sa.Text(), nullable=True))
