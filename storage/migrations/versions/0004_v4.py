"""Schema version 4: a paid call records its cached and cache-written prompt tokens, and
whether it was made through a provider's batch API.

- ``call.cached_tokens`` (integer, 0): of its prompt tokens, those read from the
  provider's prompt cache (OpenAI's ``usage.prompt_tokens_details.cached_tokens``,
  Anthropic's ``cache_read_input_tokens``, Gemini's ``cached_content_token_count``);
- ``call.cache_write_tokens`` (integer, 0): those written to it (Anthropic's
  ``cache_creation_input_tokens``);
- ``call.batch`` (boolean, false): made through the provider's batch API (billed at the
  judge's batch multiplier).

Calls of version 3 get the defaults: no cached or cache-written tokens, not batched,
which is how they were billed (their ``cost`` stays as it was metered).

Revision ID: 0004_v4
Revises: 0003_v3
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_v4"
down_revision = "0003_v3"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("call") as batch:
        batch.add_column(
            sa.Column("cached_tokens", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(
            sa.Column("cache_write_tokens", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(
            sa.Column("batch", sa.Boolean(), nullable=False, server_default=sa.false())
        )
