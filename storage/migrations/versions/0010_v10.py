"""Schema version 10: the ledger's rows no longer name their run through a foreign key.

``judgment.run_id`` referenced ``run.id``: PostgreSQL checked that reference with a
trigger query per inserted row, 3 to 5 s of a million-judgment run's 15 s load
(docs/design/producer-scale.md, "Creating a run, the fourth round"). What the key guarded holds by
construction: a run's ledger is written only in the transaction that writes the run,
and deleting a run removes its ledger before the run's own row (``storage.deletion``),
so no ledger row outlives its run; a run id is never reused while its rows exist. The
run's other tables keep their foreign keys (they take a row per response, not per
judgment).

SQLite's key has no name: batch mode copies the table without it, naming it on
reflection by a convention (alembic's documented recipe).

Revision ID: 0010_v10
Revises: 0009_v9
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_v10"
down_revision = "0009_v9"
branch_labels = None
depends_on = None

_CONVENTION = {"fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s"}


def _run_key() -> str:
    """The name the database gave the ledger's foreign key to its run."""
    for key in sa.inspect(op.get_bind()).get_foreign_keys("judgment"):
        if key["referred_table"] == "run" and key["constrained_columns"] == ["run_id"]:
            return str(key["name"] or "fk_judgment_run_id_run")
    return ""


def upgrade() -> None:
    name = _run_key()
    if not name:
        return
    with op.batch_alter_table("judgment", naming_convention=_CONVENTION) as batch:
        batch.drop_constraint(name, type_="foreignkey")


def downgrade() -> None:
    with op.batch_alter_table("judgment", naming_convention=_CONVENTION) as batch:
        batch.create_foreign_key("judgment_run_id_fkey", "run", ["run_id"], ["id"])
