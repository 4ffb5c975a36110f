"""Schema version 3: instances carry their system prompt, own rubrics, capability and task.

- ``instance.system_prompt`` (text, ``''`` when the model under test was told nothing);
- ``instance.rubrics`` (text, a JSON object criterion -> ``InstanceRubric.to_data()``,
  ``'{}'`` when the instance has none of its own);
- ``instance.capability`` and ``instance.task`` (text, NULL: unknown), BiGGen Bench's
  grouping of instances, which reports break down by.

Rows of version 2 get the defaults: no system prompt, no rubrics, no capability or task,
which is what they were judged with.

Revision ID: 0003_v3
Revises: 0002_v2
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_v3"
down_revision = "0002_v2"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("instance") as batch:
        batch.add_column(sa.Column("system_prompt", sa.Text(), nullable=False, server_default=""))
        batch.add_column(sa.Column("rubrics", sa.Text(), nullable=False, server_default="{}"))
        batch.add_column(sa.Column("capability", sa.Text(), nullable=True))
        batch.add_column(sa.Column("task", sa.Text(), nullable=True))
