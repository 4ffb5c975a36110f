"""Schema version 9: the ledger at 10 million judgments (docs/design/ledger-scale.md).

- ``judgment_tally``, ``call_tally``: a run's judgments per (judge, status, reason) and
  its paid calls per judge, kept by statement triggers on PostgreSQL (``storage.tally``;
  filled here from the ledger as it stands); empty on SQLite;
- ``ix_judgment_run_updated`` (run_id, updated_at): what a run finished in the live view's
  last minute, without reading the rest of the run;
- ``ix_judgment_replayed`` (run_id, call_uid) over the judgments answered from the answer
  cache (``requests = 0``, an answer set): `status`'s "answered from the cache";
- ``ix_call_run_created`` (run_id, created_at): a run's calls of the last minute.

Building the indexes reads the ledger once (about a minute for 10M judgments on
PostgreSQL), while writers wait.

Revision ID: 0009_v9
Revises: 0008_v8
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from flask_eval.storage import tally

revision = "0009_v9"
down_revision = "0008_v8"
branch_labels = None
depends_on = None

REPLAYED = "requests = 0 AND call_uid IS NOT NULL"


def upgrade() -> None:
    op.create_table(
        "judgment_tally",
        sa.Column("run_id", sa.Integer(), primary_key=True),
        sa.Column("judge", sa.String(300), primary_key=True),
        sa.Column("status", sa.String(16), primary_key=True),
        sa.Column("reason", sa.String(32), primary_key=True),
        sa.Column("n", sa.Integer(), nullable=False),
    )
    op.create_table(
        "call_tally",
        sa.Column("run_id", sa.Integer(), primary_key=True),
        sa.Column("judge", sa.String(300), primary_key=True),
        *(
            sa.Column(c, sa.Integer(), nullable=False)
            for c in (
                "calls",
                "batch_calls",
                "prompt_tokens",
                "completion_tokens",
                "cached_tokens",
                "cache_write_tokens",
            )
        ),
        sa.Column("cost", sa.Float(), nullable=False),
    )
    op.create_index("ix_judgment_run_updated", "judgment", ["run_id", "updated_at"])
    op.create_index(
        "ix_judgment_replayed",
        "judgment",
        ["run_id", "call_uid"],
        postgresql_where=sa.text(REPLAYED),
        sqlite_where=sa.text(REPLAYED),
    )
    op.create_index("ix_call_run_created", "call", ["run_id", "created_at"])
    tally.install(op.get_bind(), backfill=True)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        for table in ("judgment", "call"):
            for action in ("insert", "update", "delete"):
                name = f"flask_eval_{table}_tally_{action}"
                bind.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name} ON {table}")
                bind.exec_driver_sql(f"DROP FUNCTION IF EXISTS {name}()")
    op.drop_index("ix_call_run_created", "call")
    op.drop_index("ix_judgment_replayed", "judgment")
    op.drop_index("ix_judgment_run_updated", "judgment")
    op.drop_table("call_tally")
    op.drop_table("judgment_tally")
