"""Schema version 5: provider batches (docs/design/batches.md).

- ``batch``: a provider batch of one judge of a run, written before it is submitted
  (its ``uid`` is the tag the provider keeps), with the provider's id once recorded;
- ``batch_call``: a judge call of a batch judge from the moment it is parked
  (``planned``) to its collection, with the judgment ids it covers and its request;
- ``lane_lease``: which worker runs the batch lane's sweep, until when.

Stores of version 4 get the three tables empty.

Revision ID: 0005_v5
Revises: 0004_v4
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_v5"
down_revision = "0004_v4"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "batch",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("uid", sa.String(64), nullable=False, unique=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("run.id"), nullable=False),
        sa.Column("judge", sa.String(300), nullable=False),
        sa.Column("provider", sa.String(32), nullable=False),
        sa.Column("provider_id", sa.String(200), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("provider_state", sa.String(40), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("succeeded", sa.Integer(), nullable=False),
        sa.Column("failed", sa.Integer(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=True),
        sa.Column("files", sa.Text(), nullable=False, server_default="{}"),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("submitted_at", sa.DateTime(), nullable=True),
        sa.Column("ended_at", sa.DateTime(), nullable=True),
    )
    op.create_index("ix_batch_run_id", "batch", ["run_id"])
    op.create_index("ix_batch_state", "batch", ["state"])
    op.create_table(
        "batch_call",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("uid", sa.String(64), nullable=False, unique=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("run.id"), nullable=False),
        sa.Column("judge", sa.String(300), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("batch_uid", sa.String(64), nullable=True),
        sa.Column("rows", sa.Text(), nullable=False),
        sa.Column("cache_key", sa.String(64), nullable=False),
        sa.Column("request", sa.Text(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("tries", sa.Integer(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_batch_call_open", "batch_call", ["state", "run_id", "judge"])
    op.create_index("ix_batch_call_batch_uid", "batch_call", ["batch_uid"])
    op.create_table(
        "lane_lease",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("until", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("lane_lease")
    op.drop_index("ix_batch_call_batch_uid", "batch_call")
    op.drop_index("ix_batch_call_open", "batch_call")
    op.drop_table("batch_call")
    op.drop_index("ix_batch_state", "batch")
    op.drop_index("ix_batch_run_id", "batch")
    op.drop_table("batch")
