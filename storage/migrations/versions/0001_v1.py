"""Schema version 1: the ledger keyed by skill, one call row per cache key.

A marker: stores created before migrations existed are stamped with this revision and
upgraded from it. New stores are created at the newest revision directly.

Revision ID: 0001_v1
Revises:
"""

from __future__ import annotations

revision = "0001_v1"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass
