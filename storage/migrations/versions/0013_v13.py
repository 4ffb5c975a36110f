"""Schema version 13: people's ratings (docs/design/humans.md).

- ``rating_item``: one row per page a rater rates, the (run, ``human/RATER``, model,
  model_b, instance) whose ledger rows (one per criterion, status ``waiting`` until
  rated) one submit answers; its queue order (``rank``), who was served it until when
  (``holder``, ``lease_until``) and its state (``open``, ``done``, ``flagged``);
- ``rater``: a rater's name, the sha256 of their token, the run it is for, whether they
  may read the read-only pages, and when it was revoked;
- ``rater_session``: a rater signed in (the sha256 of the cookie's value), until when.

Stores of version 12 get the three tables empty: no ledger row of theirs is a person's.

Revision ID: 0013_v13
Revises: 0012_v12
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_v13"
down_revision = "0012_v12"
branch_labels = None
depends_on = None


def _when(name: str, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "rating_item",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("judge", sa.String(300), nullable=False),
        sa.Column("model", sa.String(64), nullable=False),
        sa.Column("model_b", sa.String(64), nullable=False),
        sa.Column("instance_id", sa.String(200), nullable=False),
        sa.Column("swapped", sa.Boolean(), nullable=False),
        sa.Column("rank", sa.Float(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("holder", sa.String(100), nullable=True),
        _when("lease_until", nullable=True),
        _when("served_at", nullable=True),
        sa.Column("skips", sa.Integer(), nullable=False),
        _when("created_at"),
        _when("updated_at"),
        sa.UniqueConstraint(
            "run_id", "judge", "model", "model_b", "instance_id", name="uq_rating_item"
        ),
    )
    op.create_index("ix_rating_item_next", "rating_item", ["judge", "state", "rank", "id"])
    op.create_index(
        "ix_rating_item_run_next", "rating_item", ["judge", "run_id", "state", "rank", "id"]
    )
    op.create_index("ix_rating_item_holder", "rating_item", ["holder"])
    op.create_table(
        "rater",
        sa.Column("name", sa.String(40), primary_key=True),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("may_view", sa.Boolean(), nullable=False),
        _when("created_at"),
        _when("revoked_at", nullable=True),
    )
    op.create_index("ix_rater_token_hash", "rater", ["token_hash"])
    op.create_table(
        "rater_session",
        sa.Column("id_hash", sa.String(64), primary_key=True),
        sa.Column("rater", sa.String(40), nullable=False),
        sa.Column("csrf", sa.String(200), nullable=False),
        _when("created_at"),
        _when("expires_at"),
    )
    op.create_index("ix_rater_session_rater", "rater_session", ["rater"])


def downgrade() -> None:
    op.drop_index("ix_rater_session_rater", "rater_session")
    op.drop_table("rater_session")
    op.drop_index("ix_rater_token_hash", "rater")
    op.drop_table("rater")
    op.drop_index("ix_rating_item_holder", "rating_item")
    op.drop_index("ix_rating_item_run_next", "rating_item")
    op.drop_index("ix_rating_item_next", "rating_item")
    op.drop_table("rating_item")
