"""A run page's cached views (docs/design/viewer.md): the ledger's cheap fingerprint of a
run, and the views stored in ``report_snapshot`` with the fingerprint they are of."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import delete, func, select
from sqlalchemy.engine import Connection

from flask_eval.storage import tally
from flask_eval.storage.models import CALL, JUDGMENT, REPORT_SNAPSHOT, RUN, utcnow
from flask_eval.storage.store import Store

J, C, RN, SNAP = JUDGMENT.c, CALL.c, RUN.c, REPORT_SNAPSHOT.c


def status_counts(conn: Connection, run_id: int) -> dict[str, int]:
    """The run's judgments by status (PostgreSQL: its tally; SQLite: index-only on
    ``ix_judgment_run_status``)."""
    return tally.status_totals(conn, run_id)


@dataclass(frozen=True)
class Fingerprint:
    """What the ledger's state of a run is, cheaply: when the run was made, its judgments
    by status and the newest answer it paid for."""

    created_at: datetime | None
    counts: dict[str, int]
    last_call: int


def fingerprint(store: Store, run_id: int) -> Fingerprint:
    """The run's :class:`Fingerprint`: ``ix_judgment_run_status`` (index-only) and
    ``max(call.id)`` on ``ix_call_run_id``."""
    with store.engine.connect() as conn:
        created = conn.execute(select(RN.created_at).where(RN.id == run_id)).scalar()
        counts = status_counts(conn, run_id)
        last = conn.execute(select(func.max(C.id)).where(C.run_id == run_id)).scalar()
    return Fingerprint(created, counts, int(last or 0))


class Snapshot(NamedTuple):
    """A run's cached view: the ledger state it is of, its data and when it was made."""

    token: str
    body: Any
    made_at: str  # ISO, UTC, to the second


def snapshot(store: Store, run_id: int, name: str) -> Snapshot | None:
    """The run's cached view ``name``, or None."""
    with store.engine.connect() as conn:
        row = conn.execute(
            select(SNAP.token, SNAP.body, SNAP.created_at).where(
                SNAP.run_id == run_id, SNAP.name == name
            )
        ).first()
    if row is None:
        return None
    try:
        body = json.loads(gzip.decompress(base64.b64decode(row[1])))
    except (ValueError, OSError):
        return None  # unreadable: recomputed and replaced
    made = row[2].isoformat(timespec="seconds") if row[2] is not None else ""
    return Snapshot(str(row[0]), body, made)


def put_snapshots(store: Store, run_id: int, token: str, parts: Mapping[str, Any]) -> None:
    """Replace the run's cached views ``parts`` (name -> JSON data), all valid for
    ``token``, in one transaction (readers see all of the old ones or all of the new)."""
    rows = [
        {
            "run_id": run_id,
            "name": name,
            "token": token,
            "created_at": utcnow(),
            "body": base64.b64encode(gzip.compress(json.dumps(body).encode(), 6)).decode(),
        }
        for name, body in parts.items()
    ]
    with store.engine.begin() as conn:
        conn.execute(
            delete(REPORT_SNAPSHOT).where(SNAP.run_id == run_id, SNAP.name.in_(list(parts)))
        )
        if rows:
            conn.execute(REPORT_SNAPSHOT.insert(), rows)
