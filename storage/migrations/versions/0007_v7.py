"""Schema version 7: a worker's heartbeat says more, for the live view (`flask-eval
status --watch`, docs/operations.md).

- ``worker.host``, ``worker.pid``: where the worker process runs;
- ``worker.in_flight``: its judge requests in flight at its last beat;
- ``worker.calls``: judge calls it has answered since it started (paid, cached, batch);
- ``worker.metrics_url``: where its Prometheus metrics are served (NULL: not served).

Workers of version 6 beat without them: the defaults are what they hold. A store whose
``worker`` table does not exist yet (it has no revision of its own) gets it whole from
``storage.db.create_schema``, after the migrations.

Revision ID: 0007_v7
Revises: 0006_v6
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_v7"
down_revision = "0006_v6"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if "worker" not in sa.inspect(op.get_bind()).get_table_names():
        return
    with op.batch_alter_table("worker") as batch:
        batch.add_column(sa.Column("host", sa.String(200), nullable=False, server_default=""))
        batch.add_column(sa.Column("pid", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("in_flight", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("calls", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("metrics_url", sa.String(300), nullable=True))
