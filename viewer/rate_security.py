"""The rating workspace's defences, apart from its pages: the response headers, the
session and pre-session cookies, CSRF tokens compared in constant time, attempt limits
per client address and per session, and the client address behind a reverse proxy.

Nothing secret is ever in a path or a query (aiohttp's access log writes both): a
sign-in token travels in a link's fragment, which browsers never send, and then in a
POST body; a session is a random cookie whose SHA-256 alone is stored."""

from __future__ import annotations

import hashlib
import ipaddress
import secrets
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass

from aiohttp import web

from flask_eval.app.rater_tokens import hash_token, same
from flask_eval.core.people import DEFAULT_LEASE

__all__ = [
    "CSP",
    "PRE_COOKIE",
    "SESSION_COOKIE",
    "Limiter",
    "RateOptions",
    "client_address",
    "csrf_ok",
    "holder_of",
    "new_secret",
    "secure_headers",
    "session_hash",
]

#: the cookie of a signed-in rater (a random value; the store keeps its SHA-256)
SESSION_COOKIE = "flask_eval_rate"
#: the cookie of the sign-in form's CSRF token (before a session exists: double submit)
PRE_COOKIE = "flask_eval_rate_signin"
#: the workspace's scripts, styles and images are its own files: nothing inline runs,
#: nothing is loaded from elsewhere, no page may frame it, forms post to it only
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Cross-Origin-Opener-Policy": "same-origin",
}


@dataclass(frozen=True)
class RateOptions:
    """How the workspace is served.

    ``behind_tls``: clients reach it over HTTPS through a reverse proxy on this machine
    (cookies are ``Secure``; the client's address is the last ``X-Forwarded-For`` entry
    of a request from a loopback peer). ``with_results``: inside the viewer
    (``flask-eval view --rate --with-results``), the viewer's pages are shown to signed-in
    raters whose ``may_view`` is set (the session cookie's path is then ``/``); without
    it they are refused to everyone."""

    lease: float = DEFAULT_LEASE
    behind_tls: bool = False
    with_results: bool = False
    #: failed sign-ins per client address within ``signin_window`` seconds
    signin_limit: int = 10
    signin_window: float = 300.0
    #: POSTs per session within ``post_window`` seconds
    post_limit: int = 120
    post_window: float = 60.0
    #: hours a session lasts
    session_hours: float = 12.0

    @property
    def cookie_path(self) -> str:
        return "/" if self.with_results else "/rate"


class Limiter:
    """At most ``limit`` events per key within ``window`` seconds (a sliding window, in
    memory: a restart forgets it). Keeps at most ``keys`` keys, the oldest dropped."""

    def __init__(self, limit: int, window: float, keys: int = 10_000) -> None:
        self.limit, self.window, self.keys = limit, window, keys
        self._events: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def _recent(self, key: str, now: float) -> deque[float]:
        events = self._events.get(key)
        if events is None:
            events = self._events[key] = deque()
            while len(self._events) > self.keys:
                self._events.popitem(last=False)
        while events and events[0] <= now - self.window:
            events.popleft()
        return events

    def blocked(self, key: str) -> bool:
        """Whether ``key`` has had ``limit`` events within the window."""
        with self._lock:
            return len(self._recent(key, time.monotonic())) >= self.limit

    def hit(self, key: str) -> bool:
        """Count an event of ``key``; False (not counted) when it is over the limit."""
        with self._lock:
            now = time.monotonic()
            events = self._recent(key, now)
            if len(events) >= self.limit:
                return False
            events.append(now)
            self._events.move_to_end(key)
            return True


def new_secret() -> str:
    """A random value for a cookie or a CSRF token."""
    return secrets.token_urlsafe(32)


def session_hash(cookie: str) -> str:
    """What the store keeps of a session cookie's value."""
    return hash_token(cookie)


def holder_of(id_hash: str) -> str:
    """The public id of a session, as items record who holds them (not its key)."""
    return "s-" + hashlib.sha256(f"holder|{id_hash}".encode()).hexdigest()[:24]


def csrf_ok(expected: str | None, given: object) -> bool:
    """Whether a posted CSRF token is the expected one (constant time)."""
    return bool(expected) and isinstance(given, str) and same(str(expected), given)


def client_address(request: web.Request, options: RateOptions) -> str:
    """The client's address: the peer's, or behind a reverse proxy on this machine
    (``behind_tls``, a loopback peer) the last ``X-Forwarded-For`` entry (the one the
    proxy added)."""
    peer = request.remote or "unknown"
    if options.behind_tls and _loopback(peer):
        forwarded = request.headers.get("X-Forwarded-For", "")
        last = forwarded.rsplit(",", 1)[-1].strip()
        if last:
            return last[:64]
    return peer


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def secure_headers(response: web.StreamResponse, *, csp: bool = True) -> None:
    """Set the workspace's response headers on ``response``."""
    for name, value in HEADERS.items():
        response.headers[name] = value
    if csp:
        response.headers["Content-Security-Policy"] = CSP


def set_cookie(
    response: web.StreamResponse,
    name: str,
    value: str,
    options: RateOptions,
    max_age: int | None = None,
    path: str | None = None,
) -> None:
    """A cookie scripts cannot read, sent to this site's own requests only."""
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=path or options.cookie_path,
        httponly=True,
        samesite="Strict",
        secure=options.behind_tls,
    )


def clear_cookie(
    response: web.StreamResponse, name: str, options: RateOptions, path: str | None = None
) -> None:
    response.del_cookie(
        name,
        path=path or options.cookie_path,
        secure=options.behind_tls,
        httponly=True,
        samesite="Strict",
    )
