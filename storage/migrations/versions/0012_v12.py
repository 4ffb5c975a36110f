"""Schema version 12: a row about an instance alone has no stand-in response.

The rows of a generation or an annotation run are about an instance alone: their model
is none (``''``, as ``model_b`` is for absolute grading) and no response is stored for
them. Stores written before kept, for each such run, one stand-in model ``''`` with an
empty response to every instance (``response`` rows), and named it in the run's
configuration (``responses``, ``models``, ``coverage``). This removes those rows and
names, and the 1-5 rubric a generation run's ``response`` criterion carried though
nothing scores it (the stored ``skills``); the ledger's rows, the calls and the
fingerprints are unchanged. The tables are
not changed. The kinds are named as they were when this was written: a migration does
not follow the code's registry of kinds.

Revision ID: 0012_v12
Revises: 0011_v11
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0012_v12"
down_revision = "0011_v11"
branch_labels = None
depends_on = None

#: the kinds whose rows are about an instance alone
INSTANCE_KINDS = ("generation", "annotation")
#: the stand-in model of their rows
NO_MODEL = ""
#: the criterion of a generation run, and the text of each level of the rubric it carried
RESPONSE = "response"
NOT_SCORED = "not scored: a generated response is kept as text"

RUN = sa.table("run", sa.column("id", sa.Integer), sa.column("config", sa.Text))
RESPONSES = sa.table(
    "response",
    sa.column("run_id", sa.Integer),
    sa.column("model", sa.String),
    sa.column("instance_id", sa.String),
    sa.column("text", sa.Text),
)


def _without_stand_in(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` without the stand-in model in its responses, models and coverage."""
    changed = dict(config)
    for key in ("responses", "coverage"):
        if isinstance(changed.get(key), dict):
            changed[key] = {m: v for m, v in changed[key].items() if m != NO_MODEL}
    if isinstance(changed.get("models"), list):
        changed["models"] = [m for m in changed["models"] if m != NO_MODEL]
    if changed.get("kind") == "generation" and isinstance(changed.get("skills"), list):
        changed["skills"] = [
            {**s, "rubric": {}} if isinstance(s, dict) and s.get("name") == RESPONSE else s
            for s in changed["skills"]
        ]
    return changed


def upgrade() -> None:
    conn = op.get_bind()
    for run_id, text in conn.execute(sa.select(RUN.c.id, RUN.c.config)).all():
        try:
            config = json.loads(text or "{}")
        except ValueError:
            continue  # not a configuration this code wrote: left as it is
        if not isinstance(config, dict) or config.get("kind") not in INSTANCE_KINDS:
            continue
        conn.execute(
            sa.delete(RESPONSES).where(RESPONSES.c.run_id == run_id, RESPONSES.c.model == NO_MODEL)
        )
        changed = _without_stand_in(config)
        if changed != config:
            conn.execute(
                sa.update(RUN)
                .where(RUN.c.id == run_id)
                .values(config=json.dumps(changed, sort_keys=True))
            )


def downgrade() -> None:
    """The stand-in back: an empty response of the model ``''`` to every instance of a
    generation or annotation run, named in its configuration."""
    conn = op.get_bind()
    instance = sa.table("instance", sa.column("run_id", sa.Integer), sa.column("instance_id"))
    for run_id, text in conn.execute(sa.select(RUN.c.id, RUN.c.config)).all():
        try:
            config = json.loads(text or "{}")
        except ValueError:
            continue
        if not isinstance(config, dict) or config.get("kind") not in INSTANCE_KINDS:
            continue
        ids = [
            r[0]
            for r in conn.execute(
                sa.select(instance.c.instance_id).where(instance.c.run_id == run_id)
            )
        ]
        if ids:
            conn.execute(
                sa.insert(RESPONSES),
                [{"run_id": run_id, "model": NO_MODEL, "instance_id": i, "text": ""} for i in ids],
            )
        total = len(ids)
        if config["kind"] == "generation" and isinstance(config.get("skills"), list):
            rubric = {str(n): NOT_SCORED for n in range(1, 6)}
            config["skills"] = [
                {**s, "rubric": rubric} if isinstance(s, dict) and s.get("name") == RESPONSE else s
                for s in config["skills"]
            ]
        config |= {
            "responses": {NO_MODEL: ""},
            "models": [NO_MODEL],
            "coverage": {NO_MODEL: [total, total]},
        }
        conn.execute(
            sa.update(RUN)
            .where(RUN.c.id == run_id)
            .values(config=json.dumps(config, sort_keys=True))
        )
