"""The rating workspace (docs/rating.md): raters sign in with a token, are served their
own items one at a time, rate each criterion (or compare two responses), skip, or say
an item cannot be judged.

Routes (all under ``/rate``): ``GET /rate`` (progress), ``GET|POST /rate/signin``,
``POST /rate/signout``, ``GET /rate/next`` (claims the next item, redirects to it),
``GET /rate/item/<id>``, ``GET /rate/item/<id>/images/<sha256>`` (the images of the
item's instruction), ``POST /rate/item/<id>/submit|skip|flag``, ``GET
/rate/static/<file>``. :func:`mount` adds them to an application (the viewer's, with
``flask-eval view --rate``); :func:`make_app` is the workspace alone (``flask-eval
rate``). Pages are blind (no model, judge or run name anywhere a rater can see) and
every untrusted text is escaped; see :mod:`viewer.rate_security` for the defences."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from aiohttp import web

from flask_eval.app import rating
from flask_eval.app.rater_tokens import hash_token, same
from flask_eval.core.errors import InputError
from flask_eval.storage import ratings
from flask_eval.storage.image_pages import instance_images
from flask_eval.storage.store import Store
from flask_eval.viewer import images
from flask_eval.viewer import rate_security as sec
from flask_eval.viewer.rate_context import (
    PREFIX,
    STATIC,
    WORKSPACE,
    Who,
    Workspace,
    db,
    form_of,
    own_item,
    posting,
    signed_in,
    workspace,
)
from flask_eval.viewer.rate_security import RateOptions

__all__ = ["RateOptions", "make_app", "mount"]

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


# -- sign-in ---------------------------------------------------------------------------


async def signin_page(request: web.Request) -> web.Response:
    ws = workspace(request)
    pre = request.cookies.get(sec.PRE_COOKIE) or sec.new_secret()
    response = ws.page("rate_signin.html", title="Sign in", csrf=pre, problem=None)
    sec.set_cookie(response, sec.PRE_COOKIE, pre, ws.options, max_age=3600, path=PREFIX)
    return response


async def signin(request: web.Request) -> web.StreamResponse:
    ws = workspace(request)
    address = sec.client_address(request, ws.options)
    if ws.signin_failures.blocked(address):
        raise web.HTTPTooManyRequests(text="too many failed sign-ins: wait a few minutes")
    form = await form_of(request)
    pre = request.cookies.get(sec.PRE_COOKIE)
    if not sec.csrf_ok(pre, form.get("csrf")):
        ws.signin_failures.hit(address)
        raise web.HTTPForbidden(text="the sign-in form is stale: reload the sign-in page")
    token = form.get("token", "").strip()
    rater = None
    if 0 < len(token) <= 200:
        hashed = hash_token(token)
        rater = await db(ratings.rater_by_token, ws.store, hashed)
        if rater is not None and (rater.revoked or not same(rater.token_hash, hashed)):
            rater = None
    if rater is None:
        ws.signin_failures.hit(address)
        page = ws.page(
            "rate_signin.html",
            403,
            title="Sign in",
            csrf=pre,
            problem="This token signs no one in (mistyped, replaced or revoked).",
        )
        return page
    cookie = sec.new_secret()
    expires = datetime.now(UTC) + timedelta(hours=ws.options.session_hours)
    session = ratings.Session(sec.session_hash(cookie), rater.name, sec.new_secret(), expires)
    await db(ratings.create_session, ws.store, session)
    response = web.HTTPSeeOther(PREFIX)
    sec.set_cookie(
        response,
        sec.SESSION_COOKIE,
        cookie,
        ws.options,
        max_age=int(ws.options.session_hours * 3600),
    )
    sec.clear_cookie(response, sec.PRE_COOKIE, ws.options, path=PREFIX)
    raise response


async def signout(request: web.Request) -> web.StreamResponse:
    ws = workspace(request)
    who, _ = await posting(request)
    await db(ratings.delete_session, ws.store, who.session.id_hash)
    response = web.HTTPSeeOther(f"{PREFIX}/signin")
    sec.clear_cookie(response, sec.SESSION_COOKIE, ws.options)
    raise response


# -- pages -----------------------------------------------------------------------------


async def home(request: web.Request) -> web.Response:
    ws = workspace(request)
    who = await signed_in(request)
    if who is None:
        raise web.HTTPSeeOther(f"{PREFIX}/signin")
    done = await db(ratings.progress, ws.store, who.judge, who.rater.run_id)
    return ws.page("rate_home.html", who=who, title="Your ratings", progress=done)


async def next_item(request: web.Request) -> web.Response:
    ws = workspace(request)
    who = await signed_in(request)
    if who is None:
        raise web.HTTPSeeOther(f"{PREFIX}/signin")
    item = await db(
        ratings.next_item, ws.store, who.judge, who.holder, ws.options.lease, who.rater.run_id
    )
    if item is None:
        done = await db(ratings.progress, ws.store, who.judge, who.rater.run_id)
        return ws.page("rate_home.html", who=who, title="All done", progress=done, finished=True)
    raise web.HTTPSeeOther(f"{PREFIX}/item/{item.id}")


async def item_page(request: web.Request) -> web.Response:
    ws = workspace(request)
    who = await signed_in(request)
    if who is None:
        raise web.HTTPSeeOther(f"{PREFIX}/signin")
    item = await own_item(request, who)
    if item.state != "open":
        return _already(ws, who, item)
    ws.seen(who, item.id)
    return await _render_item(ws, who, item)


async def _render_item(
    ws: Workspace,
    who: Who,
    item: ratings.RatingItem,
    status: int = 200,
    chosen: dict[str, str] | None = None,
    problems: dict[str, str] | None = None,
) -> web.Response:
    try:
        shown = await db(rating.build_page, ws.store, item)
    except rating.ItemGone:
        return ws.message(410, "Gone", "This item's run is no longer in the store.", who)
    refs = await db(instance_images, ws.store, item.run_id, item.instance_id)
    return ws.page(
        "rate_item.html",
        status,
        who,
        title=f"Item {item.id}",
        p=shown,
        csrf=who.session.csrf,
        chosen=chosen or {},
        problems=problems or {},
        NA=rating.NA,
        TIE=rating.TIE,
        images=images.shown(
            refs, lambda d: f"{PREFIX}/item/{item.id}/images/{d}", "the instruction"
        ),
    )


async def item_image(request: web.Request) -> web.Response:
    """An image of the instruction of the rater's own item (blind: the path names the
    item, not its run); 404 for an image the item's instruction does not carry."""
    ws = workspace(request)
    who = await signed_in(request)
    if who is None:
        raise web.HTTPForbidden(text="sign in first")
    item = await own_item(request, who)
    try:
        digest = images.checked_digest(request.match_info["sha256"])
    except InputError as exc:
        raise web.HTTPBadRequest(text=exc.message) from None
    refs = await db(instance_images, ws.store, item.run_id, item.instance_id)
    if digest not in {r.sha256 for r in refs}:
        raise web.HTTPNotFound(text="this item has no such image")
    match = request.headers.get("If-None-Match")
    try:
        served: web.Response = await db(images.serve, ws.store, item.run_id, "", digest, match)
    except images.ImageNotFound:
        raise web.HTTPNotFound(text="this item has no such image") from None
    return served


def _already(ws: Workspace, who: Who, item: ratings.RatingItem) -> web.Response:
    """The page of an item rated or flagged already (another tab, a double submit)."""
    what = "flagged" if item.state == "flagged" else "saved"
    return ws.page(
        "rate_message.html",
        200,
        who,
        title="Already saved",
        text=f"Item {item.id} was {what} already; nothing was changed. Moving on.",
        next=f"{PREFIX}/next",
    )


async def submit(request: web.Request) -> web.StreamResponse:
    ws = workspace(request)
    who, form = await posting(request)
    item = await own_item(request, who)
    return await _end_item(ws, who, item, form, rating.submit_form, lambda p: p)


def _reason_problem(problems: dict[str, str]) -> dict[str, str]:
    """A flag's problems, shown at its one field."""
    return {"reason": problems.get("reason") or "; ".join(problems.values())}


async def flag(request: web.Request) -> web.StreamResponse:
    ws = workspace(request)
    who, form = await posting(request)
    item = await own_item(request, who)
    return await _end_item(ws, who, item, form, rating.flag_form, _reason_problem)


async def _end_item(
    ws: Workspace,
    who: Who,
    item: ratings.RatingItem,
    form: dict[str, str],
    write: Callable[..., bool],
    shown: Callable[[dict[str, str]], dict[str, str]],
) -> web.StreamResponse:
    """Rate or flag ``item`` with ``write`` (``rating.submit_form`` or ``flag_form``):
    the next item, the page again with the form's problems (``shown`` places them), or
    "already" when it was rated or flagged before (a double submit, another tab)."""
    if item.state != "open":
        return _already(ws, who, item)
    try:
        stored = await db(write, ws.store, item, form, None, ws.seen(who, item.id))
    except rating.FormError as exc:
        return await _render_item(ws, who, item, 400, form, shown(exc.problems))
    except LookupError:  # the item or its run deleted meanwhile (ItemGone too)
        return ws.message(410, "Gone", "This item's run is no longer in the store.", who)
    if not stored:
        return _already(ws, who, item)
    raise web.HTTPSeeOther(f"{PREFIX}/next")


async def skip(request: web.Request) -> web.StreamResponse:
    ws = workspace(request)
    who, form = await posting(request)
    item = await own_item(request, who)
    if form:
        raise web.HTTPBadRequest(text="malformed form")
    if item.state == "open":
        args = (ws.store, item.id, who.judge, who.holder)
        if not await db(ratings.release, *args):  # not held: hold it, then let it go
            held = await db(
                ratings.next_item, ws.store, who.judge, who.holder, ws.options.lease, item.run_id
            )
            if held is not None and held.id == item.id:
                await db(ratings.release, *args)
    raise web.HTTPSeeOther(f"{PREFIX}/next")


async def static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in STATIC:
        raise web.HTTPNotFound(text="no such file")
    return web.Response(body=workspace(request).static[name], content_type=STATIC[name])


# -- the application -------------------------------------------------------------------


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The workspace's headers on every answer under /rate (errors too), and the viewer's
    pages refused unless allowed (:func:`viewer_allowed`)."""
    ws = request.app[WORKSPACE]
    inside = request.path == PREFIX or request.path.startswith(PREFIX + "/")
    try:
        if not inside and not await viewer_allowed(request):
            if request.path == "/":
                raise web.HTTPSeeOther(PREFIX)
            raise web.HTTPForbidden(text="this server shows the rating workspace only: /rate")
        response = await handler(request)
    except web.HTTPException as exc:
        sec.secure_headers(exc, csp=True)
        if exc.status >= 400 and exc.content_type == "text/plain" and inside:
            page = ws.message(exc.status, exc.reason, exc.text or exc.reason)
            sec.secure_headers(page)
            return page
        raise
    except Exception as exc:
        if not inside:
            raise
        # the path names no secret; the exception's text may quote a statement's
        # parameters (a CSRF token): its type only
        log.error("rating workspace: %s %s failed: %s", request.method, request.path, type(exc))
        page = ws.message(500, "Error", "Something went wrong; nothing was saved. Try again.")
        sec.secure_headers(page)
        return page
    sec.secure_headers(response, csp=inside)
    return response


async def viewer_allowed(request: web.Request) -> bool:
    """Whether a page of the viewer (outside /rate) may be shown: only when the server
    was started ``--with-results`` and to a signed-in rater whose ``may_view`` is set."""
    if not request.app[WORKSPACE].options.with_results:
        return False
    who = await signed_in(request)
    return who is not None and who.rater.may_view


def mount(app: web.Application, store: Store, options: RateOptions) -> None:
    """Add the workspace's routes and guard to ``app`` (before any catch-all route)."""
    app[WORKSPACE] = Workspace(store, options)
    app.middlewares.insert(0, guard)
    app.router.add_get(PREFIX, home)
    app.router.add_get(f"{PREFIX}/", home)
    app.router.add_get(f"{PREFIX}/signin", signin_page)
    app.router.add_post(f"{PREFIX}/signin", signin)
    app.router.add_post(f"{PREFIX}/signout", signout)
    app.router.add_get(f"{PREFIX}/next", next_item, allow_head=False)  # it claims an item
    app.router.add_get(f"{PREFIX}/item/{{id}}", item_page)
    app.router.add_get(f"{PREFIX}/item/{{id}}/images/{{sha256}}", item_image)
    app.router.add_post(f"{PREFIX}/item/{{id}}/submit", submit)
    app.router.add_post(f"{PREFIX}/item/{{id}}/skip", skip)
    app.router.add_post(f"{PREFIX}/item/{{id}}/flag", flag)
    app.router.add_get(f"{PREFIX}/static/{{name}}", static)
    app.router.add_route("*", f"{PREFIX}/{{tail:.*}}", _nothing)  # the workspace's own 404


async def _root(request: web.Request) -> web.Response:
    raise web.HTTPSeeOther(PREFIX)


async def _nothing(request: web.Request) -> web.Response:
    raise web.HTTPNotFound(text="not found")


def make_app(store: Store, options: RateOptions | None = None) -> web.Application:
    """The workspace alone (``flask-eval rate``): ``/`` leads to ``/rate``."""
    app = web.Application()
    mount(app, store, options or RateOptions())
    app.router.add_get("/", _root)
    app.router.add_route("*", "/{tail:.*}", _nothing)
    return app
