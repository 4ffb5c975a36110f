"""What every page of the rating workspace needs: its state (:class:`Workspace`: the
store, options, templates, attempt limits), the signed-in rater of a request
(:func:`signed_in`), a POST's checks (:func:`posting`: a session, its limit, its CSRF
token) and the rater's own item of a path (:func:`own_item`: 404, or 403 when it is
another's)."""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web
from multidict import MultiDictProxy

from flask_eval.app.rater_tokens import same
from flask_eval.core.people import rater_judge
from flask_eval.storage import ratings
from flask_eval.storage.store import Store
from flask_eval.viewer import rate_security as sec
from flask_eval.viewer.rate_security import RateOptions

__all__ = [
    "PREFIX",
    "STATIC",
    "WORKSPACE",
    "Who",
    "Workspace",
    "db",
    "form_of",
    "own_item",
    "posting",
    "signed_in",
    "workspace",
]

HERE = Path(__file__).resolve().parent
PREFIX = "/rate"
#: the workspace's own static files (served with its headers)
STATIC = {
    "rate.css": "text/css",
    "rate.js": "text/javascript",
    "rate.signin.js": "text/javascript",
    "favicon.svg": "image/svg+xml",
}
_ITEM_ID = re.compile(r"[0-9]{1,18}")
#: items whose first view is remembered per session when storage has no served_at
FIRST_SEEN_KEPT = 10_000


@dataclass(frozen=True)
class Who:
    """A signed-in rater: their session and what the store says of them."""

    session: ratings.Session
    rater: ratings.Rater

    @property
    def judge(self) -> str:
        return rater_judge(self.rater.name)

    @property
    def holder(self) -> str:
        return sec.holder_of(self.session.id_hash)


class Workspace:
    """The workspace's state: the store, its options, its templates and its limits."""

    def __init__(self, store: Store, options: RateOptions) -> None:
        self.store = store
        self.options = options
        self.jinja = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,  # every text is escaped: responses and rubrics are untrusted
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.signin_failures = sec.Limiter(options.signin_limit, options.signin_window)
        self.posts = sec.Limiter(options.post_limit, options.post_window)
        self.first_seen: OrderedDict[tuple[str, int], datetime] = OrderedDict()
        self.static = {name: (HERE / "static" / name).read_bytes() for name in STATIC}

    def page(
        self, template: str, status: int = 200, who: Who | None = None, **context: Any
    ) -> web.Response:
        text = self.jinja.get_template(template).render(who=who, **context)
        return web.Response(text=text, content_type="text/html", status=status)

    def message(self, status: int, title: str, text: str, who: Who | None = None) -> web.Response:
        return self.page("rate_message.html", status, who, title=title, text=text, next=None)

    def seen(self, who: Who, item_id: int) -> datetime:
        """When this session first saw item ``item_id`` (now, the first time)."""
        key = (who.holder, item_id)
        found = self.first_seen.get(key)
        if found is None:
            found = self.first_seen[key] = datetime.now(UTC)
            while len(self.first_seen) > FIRST_SEEN_KEPT:
                self.first_seen.popitem(last=False)
        return found


WORKSPACE: web.AppKey[Workspace] = web.AppKey("rate_workspace", Workspace)


async def db(fn: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.to_thread(fn, *args)


def workspace(request: web.Request) -> Workspace:
    return request.app[WORKSPACE]


async def signed_in(request: web.Request) -> Who | None:
    """The rater of the request's session cookie, or None (no cookie, an unknown or
    expired session, a revoked rater)."""
    ws = workspace(request)
    cookie = request.cookies.get(sec.SESSION_COOKIE)
    if not cookie or len(cookie) > 200:
        return None
    session = await db(ratings.get_session, ws.store, sec.session_hash(cookie))
    if session is None or not same(session.id_hash, sec.session_hash(cookie)):
        return None
    if session.expires_at.replace(tzinfo=session.expires_at.tzinfo or UTC) <= datetime.now(UTC):
        return None
    rater = await db(ratings.rater_by_name, ws.store, session.rater)
    if rater is None or rater.revoked:
        return None
    return Who(session, rater)


async def form_of(request: web.Request) -> dict[str, str]:
    """The posted form as single strings; 400 on a repeated field or a file."""
    posted: MultiDictProxy[Any] = await request.post()
    form: dict[str, str] = {}
    for key, value in posted.items():
        if key in form or not isinstance(value, str):
            raise web.HTTPBadRequest(text="malformed form")
        form[key] = value
    return form


async def posting(request: web.Request) -> tuple[Who, dict[str, str]]:
    """The rater and form of a POST: signed in, within the session's limit, carrying the
    session's CSRF token (all else is refused)."""
    ws = workspace(request)
    who = await signed_in(request)
    if who is None:
        raise web.HTTPSeeOther(f"{PREFIX}/signin")
    if not ws.posts.hit(who.holder):
        raise web.HTTPTooManyRequests(text="too many requests: wait a minute")
    form = await form_of(request)
    if not sec.csrf_ok(who.session.csrf, form.pop("csrf", None)):
        raise web.HTTPForbidden(text="the form is stale or was not sent by this page: reload it")
    return who, form


async def own_item(request: web.Request, who: Who) -> ratings.RatingItem:
    """The item of the path if it is the rater's; 404 when there is none, 403 when it is
    another rater's (or of a run the rater's token is not for)."""
    raw = request.match_info["id"]
    if _ITEM_ID.fullmatch(raw) is None:
        raise web.HTTPNotFound(text="no such item")
    item: ratings.RatingItem | None = await db(ratings.get_item, workspace(request).store, int(raw))
    if item is None:
        raise web.HTTPNotFound(text="no such item")
    if item.judge != who.judge or (who.rater.run_id not in (None, item.run_id)):
        raise web.HTTPForbidden(text="this item is not yours")
    return item
