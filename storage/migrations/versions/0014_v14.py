"""Schema version 14: conversations and images (docs/design/conversations.md, images.md).

- ``instance.turn`` (the turn's number, NULL: a one-shot instruction), ``conversation``
  (the conversation's id), ``history`` (JSON: the user's earlier turns with their
  references) and ``images`` (JSON: the instruction's images by digest);
- ``response.history`` (JSON: the model's answers to the conversation's earlier turns);
- ``image``: each image of a run once, by SHA-256: its checked media type, size in
  pixels and its bytes.

Stores of version 13 hold one-shot text instances: their new columns read as before
(NULL, ``[]``) and their runs have no image.

Revision ID: 0014_v14
Revises: 0013_v13
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_v14"
down_revision = "0013_v13"
branch_labels = None
depends_on = None


def _json(name: str) -> sa.Column[object]:
    return sa.Column(name, sa.Text(), nullable=False, server_default="[]")


def upgrade() -> None:
    with op.batch_alter_table("instance") as batch:
        batch.add_column(sa.Column("turn", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("conversation", sa.String(200), nullable=True))
        batch.add_column(_json("history"))
        batch.add_column(_json("images"))
    with op.batch_alter_table("response") as batch:
        batch.add_column(_json("history"))
    op.create_table(
        "image",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("media_type", sa.String(32), nullable=False),
        sa.Column("width", sa.Integer(), nullable=False),
        sa.Column("height", sa.Integer(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "sha256"),
    )


def downgrade() -> None:
    op.drop_table("image")
    with op.batch_alter_table("response") as batch:
        batch.drop_column("history")
    with op.batch_alter_table("instance") as batch:
        batch.drop_column("images")
        batch.drop_column("history")
        batch.drop_column("conversation")
        batch.drop_column("turn")
