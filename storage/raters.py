"""Raters and their sessions (schema version 13; ``storage.ratings`` re-exports this API).

A rater is known by name (without the ``human/`` prefix of their ledger rows) and signs
in with a token of which only the sha256 is kept; a session is kept as the sha256 of its
cookie's value, with its form token and the moment it ends. Revoking a rater, or giving
them a new token, ends their sessions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from flask_eval.core.people import check_rater_name
from flask_eval.storage.models import RATER, RATER_SESSION, utcnow
from flask_eval.storage.retry import transient_retry
from flask_eval.storage.store import Store

RA, SE = RATER.c, RATER_SESSION.c

__all__ = [
    "Rater",
    "Session",
    "add_rater",
    "create_session",
    "delete_expired_sessions",
    "delete_session",
    "get_session",
    "list_raters",
    "rater_by_token",
    "revoke_rater",
]


@dataclass(frozen=True)
class Rater:
    """A rater: ``token_hash`` is the sha256 hex of their token; ``run_id`` the only run
    the token is for (None: any run); ``may_view``: may read the read-only pages."""

    name: str
    token_hash: str
    run_id: int | None
    may_view: bool
    revoked: bool


@dataclass(frozen=True)
class Session:
    """A rater signed in: ``id_hash`` is the sha256 hex of the session cookie's value."""

    id_hash: str
    rater: str
    csrf: str
    expires_at: datetime


def aware(moment: datetime) -> datetime:
    """SQLite hands timestamps back without their zone (they were stored in UTC)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _rater(row: Any) -> Rater:
    return Rater(
        str(row.name),
        str(row.token_hash),
        None if row.run_id is None else int(row.run_id),
        bool(row.may_view),
        row.revoked_at is not None,
    )


_COLUMNS = (RA.name, RA.token_hash, RA.run_id, RA.may_view, RA.revoked_at)


def _end_sessions(conn: Connection, name: str) -> None:
    conn.execute(delete(RATER_SESSION).where(SE.rater == name))


@transient_retry
def add_rater(store: Store, name: str, token_hash: str, run_id: int | None, may_view: bool) -> None:
    """Add the rater ``name``, or give them a new token and rights (and un-revoke them);
    either way their sessions end. ValueError (``RaterNameError``) for a name that is
    not a rater's."""
    check_rater_name(name)
    values = {"token_hash": token_hash, "run_id": run_id, "may_view": may_view}
    dialect = postgresql if store.dialect == "postgresql" else sqlite
    stmt = dialect.insert(RATER).values(name=name, created_at=utcnow(), **values)
    stmt = stmt.on_conflict_do_update(index_elements=[RA.name], set_={**values, "revoked_at": None})
    with store.engine.begin() as conn:
        conn.execute(stmt)
        _end_sessions(conn, name)


@transient_retry
def revoke_rater(store: Store, name: str) -> bool:
    """Revoke ``name``'s token (the first revocation's time is kept) and end their
    sessions; False if there is no such rater."""
    with store.engine.begin() as conn:
        known = conn.execute(select(RA.revoked_at).where(RA.name == name)).first()
        if known is None:
            return False
        if known[0] is None:
            conn.execute(update(RATER).where(RA.name == name).values(revoked_at=utcnow()))
        _end_sessions(conn, name)
    return True


@transient_retry
def rater_by_token(store: Store, token_hash: str) -> Rater | None:
    """The rater whose token has this sha256 (revoked or not: see ``Rater.revoked``)."""
    stmt = (
        select(*_COLUMNS)
        .where(RA.token_hash == token_hash)
        .order_by(RA.revoked_at.is_not(None), RA.name)
        .limit(1)
    )
    with store.engine.connect() as conn:
        row = conn.execute(stmt).first()
    return None if row is None else _rater(row)


@transient_retry
@transient_retry
def rater_by_name(store: Store, name: str) -> Rater | None:
    """The rater called ``name`` (revoked or not), or None."""
    with store.engine.connect() as conn:
        row = conn.execute(select(*_COLUMNS).where(RA.name == name)).first()
    return None if row is None else _rater(row)


def list_raters(store: Store) -> list[Rater]:
    """Every rater, by name."""
    with store.engine.connect() as conn:
        return [_rater(r) for r in conn.execute(select(*_COLUMNS).order_by(RA.name))]


@transient_retry
def create_session(store: Store, session: Session) -> None:
    """Keep ``session`` (its id_hash new: a random cookie value's sha256)."""
    with store.engine.begin() as conn:
        conn.execute(
            RATER_SESSION.insert().values(
                id_hash=session.id_hash,
                rater=session.rater,
                csrf=session.csrf,
                created_at=utcnow(),
                expires_at=session.expires_at,
            )
        )


@transient_retry
def get_session(store: Store, id_hash: str) -> Session | None:
    """The session whose cookie value has this sha256, unless it has ended."""
    stmt = select(SE.id_hash, SE.rater, SE.csrf, SE.expires_at).where(
        SE.id_hash == id_hash, SE.expires_at > utcnow()
    )
    with store.engine.connect() as conn:
        row = conn.execute(stmt).first()
    if row is None:
        return None
    return Session(str(row[0]), str(row[1]), str(row[2]), aware(row[3]))


@transient_retry
def delete_session(store: Store, id_hash: str) -> None:
    """End a session (signing out); nothing if there is none."""
    with store.engine.begin() as conn:
        conn.execute(delete(RATER_SESSION).where(SE.id_hash == id_hash))


@transient_retry
def delete_expired_sessions(store: Store) -> int:
    """Forget the sessions that have ended; how many."""
    with store.engine.begin() as conn:
        return int(conn.execute(delete(RATER_SESSION).where(SE.expires_at <= utcnow())).rowcount)
