"""An in-memory stand-in for ``storage.ratings`` (the rating items, raters and sessions of
the storage API), for the workspace's tests: the same names and rules (exactly-once
submit and flag, a judge's own items only, leases, hashed sessions), no database.

Importing this module makes ``flask_eval.storage.ratings`` importable even where the
storage module is not there yet (its dataclasses are then defined here);
:meth:`FakeRatings.install` puts the fake's functions in its place."""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import flask_eval.storage


@dataclass(frozen=True)
class _RatingItem:
    id: int
    run_id: int
    judge: str
    model: str
    model_b: str
    instance_id: str
    criteria: tuple[str, ...]
    swapped: bool
    state: str
    holder: str | None
    lease_until: datetime | None
    served_at: datetime | None
    skips: int


@dataclass(frozen=True)
class _Progress:
    done: int
    flagged: int
    open: int


@dataclass(frozen=True)
class _Rater:
    name: str
    token_hash: str
    run_id: int | None
    may_view: bool
    revoked: bool


@dataclass(frozen=True)
class _Session:
    id_hash: str
    rater: str
    csrf: str
    expires_at: datetime


def _module() -> Any:
    try:
        import flask_eval.storage.ratings as found
    except ImportError:
        made = types.ModuleType("flask_eval.storage.ratings")
        made.__dict__.update(
            RatingItem=_RatingItem, Progress=_Progress, Rater=_Rater, Session=_Session
        )
        sys.modules[made.__name__] = made
        vars(flask_eval.storage)["ratings"] = made
        return made
    return found


MODULE = _module()
FUNCTIONS = (
    "next_item",
    "get_item",
    "release",
    "submit",
    "flag",
    "progress",
    "add_rater",
    "revoke_rater",
    "rater_by_token",
    "list_raters",
    "create_session",
    "get_session",
    "delete_session",
)


@dataclass
class Stored:
    """What a submit or flag wrote for an item."""

    scores: dict[str, int | None]
    rationales: dict[str, str]
    value: str
    reason: str | None = None


class FakeRatings:
    """The storage API's rating functions over dictionaries (thread-safe: the server calls
    them from threads)."""

    def __init__(self) -> None:
        self.items: dict[int, Any] = {}
        self.ranks: dict[int, float] = {}
        self.raters: dict[str, Any] = {}
        self.sessions: dict[str, Any] = {}
        self.stored: dict[int, Stored] = {}
        self.calls: list[str] = []
        self._lock = threading.Lock()

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name in FUNCTIONS:
            monkeypatch.setattr(MODULE, name, getattr(self, name), raising=False)

    # -- set-up helpers ----------------------------------------------------------------

    def add_item(
        self,
        run_id: int,
        judge: str,
        model: str,
        instance_id: str,
        criteria: tuple[str, ...],
        model_b: str = "",
        swapped: bool = False,
    ) -> int:
        with self._lock:
            item_id = len(self.items) + 1
            self.items[item_id] = MODULE.RatingItem(
                item_id,
                run_id,
                judge,
                model,
                model_b,
                instance_id,
                criteria,
                swapped,
                "open",
                None,
                None,
                None,
                0,
            )
            self.ranks[item_id] = float(item_id)
            return item_id

    # -- the API -------------------------------------------------------------------------

    def next_item(
        self, store: Any, judge: str, holder: str, lease: float, run_id: int | None = None
    ) -> Any:
        now = datetime.now(UTC)
        with self._lock:
            mine = [
                i
                for i in self.items.values()
                if i.judge == judge and i.state == "open" and (run_id in (None, i.run_id))
            ]
            for i in mine:
                if i.holder == holder and i.lease_until and i.lease_until > now:
                    return i
            free = [i for i in mine if i.lease_until is None or i.lease_until <= now]
            if not free:
                return None
            item = min(free, key=lambda i: self.ranks[i.id])
            item = replace(
                item, holder=holder, lease_until=now + timedelta(seconds=lease), served_at=now
            )
            self.items[item.id] = item
            return item

    def get_item(self, store: Any, item_id: int) -> Any:
        with self._lock:
            return self.items.get(item_id)

    def release(self, store: Any, item_id: int, judge: str, holder: str) -> bool:
        now = datetime.now(UTC)
        with self._lock:
            item = self.items.get(item_id)
            if item is None or item.judge != judge or item.state != "open":
                return False
            if item.holder != holder or not item.lease_until or item.lease_until <= now:
                return False
            self.items[item_id] = replace(item, holder=None, lease_until=None, skips=item.skips + 1)
            self.ranks[item_id] = max(self.ranks.values()) + 1
            self.calls.append(f"release {item_id}")
            return True

    def _finish(self, item_id: int, judge: str, state: str, stored: Stored) -> bool:
        with self._lock:
            item = self.items.get(item_id)
            if item is None or item.judge != judge:
                raise PermissionError(f"item {item_id} is not {judge}'s")
            if item.state != "open":
                return False
            self.items[item_id] = replace(item, state=state, holder=None, lease_until=None)
            self.stored[item_id] = stored
            return True

    def submit(
        self,
        store: Any,
        item_id: int,
        judge: str,
        scores: Mapping[str, int | None],
        rationales: Mapping[str, str],
        value: str,
    ) -> bool:
        item = self.get_item(store, item_id)
        if item is not None and (set(scores) | set(rationales)) - set(item.criteria):
            raise ValueError("criteria not of the item")
        return self._finish(item_id, judge, "done", Stored(dict(scores), dict(rationales), value))

    def flag(self, store: Any, item_id: int, judge: str, reason: str, value: str) -> bool:
        return self._finish(item_id, judge, "flagged", Stored({}, {}, value, reason))

    def progress(self, store: Any, judge: str, run_id: int | None = None) -> Any:
        with self._lock:
            mine = [
                i.state
                for i in self.items.values()
                if i.judge == judge and run_id in (None, i.run_id)
            ]
        return MODULE.Progress(mine.count("done"), mine.count("flagged"), mine.count("open"))

    def add_rater(
        self, store: Any, name: str, token_hash: str, run_id: int | None, may_view: bool
    ) -> None:
        with self._lock:
            self.raters[name] = MODULE.Rater(name, token_hash, run_id, may_view, False)
            self.sessions = {k: s for k, s in self.sessions.items() if s.rater != name}

    def revoke_rater(self, store: Any, name: str) -> bool:
        with self._lock:
            if name not in self.raters:
                return False
            self.raters[name] = replace(self.raters[name], revoked=True)
            self.sessions = {k: s for k, s in self.sessions.items() if s.rater != name}
            return True

    def rater_by_token(self, store: Any, token_hash: str) -> Any:
        with self._lock:
            return next((r for r in self.raters.values() if r.token_hash == token_hash), None)

    def list_raters(self, store: Any) -> list[Any]:
        with self._lock:
            return list(self.raters.values())

    def create_session(self, store: Any, session: Any) -> None:
        with self._lock:
            self.sessions[session.id_hash] = session

    def get_session(self, store: Any, id_hash: str) -> Any:
        with self._lock:
            found = self.sessions.get(id_hash)
        if found is None or found.expires_at <= datetime.now(UTC):
            return None
        return found

    def delete_session(self, store: Any, id_hash: str) -> None:
        with self._lock:
            self.sessions.pop(id_hash, None)
