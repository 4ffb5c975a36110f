"""The viewer's web application (aiohttp + Jinja2, autoescaped; GET only).

Every page is rendered on the server from the read side (``app.browse``); database calls
run in threads so that one slow page does not hold the others. Static files (CSS, a
little JavaScript) are served from ``viewer/static``: no CDN, no external URL."""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import jinja2
from aiohttp import web

from flask_eval.app import browse, runs_list
from flask_eval.core.errors import InputError
from flask_eval.core.probes import is_twin
from flask_eval.core.redact import redact
from flask_eval.report.probe_card_html import PAIR_KEYS, card_html, pairs_html
from flask_eval.rubrics import kinds
from flask_eval.storage import browse as ledger
from flask_eval.storage.image_pages import instance_images
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store
from flask_eval.viewer import body as body_mod
from flask_eval.viewer import images
from flask_eval.viewer.body import card_url, judgments_url, leaderboard, pairs_url, run_url

if TYPE_CHECKING:
    from flask_eval.viewer.rate_security import RateOptions

HERE = Path(__file__).resolve().parent
log = logging.getLogger(__name__)


class Refresher:
    """Computes run pages' snapshots beside the pages (``app.browse.refresh``), one at a
    time (a report of a large run takes both cores' worth of seconds) and each run once
    however many pages ask for it meanwhile."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._busy: set[int] = set()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="flask-eval-view-refresh")

    def ask(self, run: RunInfo) -> bool:
        """Have ``run``'s snapshot computed; False if it already is being computed."""
        with self._lock:
            if run.id in self._busy:
                return False
            self._busy.add(run.id)
        self._pool.submit(self._refresh, run)
        return True

    def _refresh(self, run: RunInfo) -> None:
        try:
            browse.refresh(self.store, run, body_mod.render, body_mod.VERSION)
        except Exception:  # the page keeps its last snapshot and asks again
            log.exception("computing the page of run %s failed", run.name)
        finally:
            with self._lock:
                self._busy.discard(run.id)

    def close(self) -> None:
        """Nothing more computed; the snapshot being computed, if any, is finished (it is
        written in one transaction, so stopping it would only waste it)."""
        self._pool.shutdown(wait=True, cancel_futures=True)


STORE: web.AppKey[Store] = web.AppKey("store", Store)
JINJA: web.AppKey[jinja2.Environment] = web.AppKey("jinja", jinja2.Environment)
REFRESHER: web.AppKey[Refresher] = web.AppKey("refresher", Refresher)
#: seconds between two reloads of a run page whose snapshot is being computed
RELOAD_SECONDS = 2
#: seconds between two reloads of a page showing a run still being judged
LIVE_SECONDS = 5

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    minutes, sec = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return (
        f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {sec:02d}s" if minutes else f"{sec}s"
    )


def _number(value: Any, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _interval(cell: Any) -> str:
    if not cell or cell[1] is None:
        return ""
    return f"[{cell[1]:.2f}, {cell[2]:.2f}]"


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,  # every value is escaped unless marked safe (our own SVG only)
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _number
    env.filters["interval"] = _interval
    env.filters["duration"] = _duration
    env.globals.update(run_url=run_url, judgments_url=judgments_url, card_url=card_url)
    return env


def page(request: web.Request, template: str, status: int = 200, **context: Any) -> web.Response:
    text = request.app[JINJA].get_template(template).render(**context)
    return web.Response(
        text=text, content_type="text/html", status=status, headers={"Content-Security-Policy": CSP}
    )


#: scripts from this origin only (no inline script runs, whatever a page holds); styles
#: from this origin and inline (the figures' SVG attributes); images from this origin only
#: (an instance's, ``viewer.images``; no ``data:`` URL); nothing from elsewhere
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)


async def _db(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return await asyncio.to_thread(fn, *args, **kwargs)


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Bad parameters are a 400 page and things not found a 404, never a 500: every
    parameter of every route (query and path) is checked here before a handler reads it."""
    try:
        for name, value in (*request.match_info.items(), *request.query.items()):
            problem = browse.parameter_problem(name, value)
            if problem is not None:
                raise InputError(problem)
        return await handler(request)
    except (browse.NotFound, images.ImageNotFound) as exc:
        return page(request, "error.html", 404, title="Not found", message=redact(str(exc)))
    except InputError as exc:
        return page(request, "error.html", 400, title="Bad request", message=redact(str(exc)))


async def runs_page(request: web.Request) -> web.Response:
    groups = await _db(runs_list.runs, request.app[STORE])
    live = any(g.open for g in groups)
    return page(
        request, "runs.html", title="Runs", groups=groups, live=LIVE_SECONDS if live else None
    )


async def _run(request: web.Request) -> Any:
    return await _db(browse.find_run, request.app[STORE], request.match_info["run"])


async def run_page(request: web.Request) -> web.Response:
    store = request.app[STORE]
    run = await _run(request)
    asked = request.query.get("judge", "")

    def shown(body: dict[str, Any]) -> str | None:  # the judge shown: asked, else the first
        judges = body.get("judges") or []
        return body_mod.figures_key(asked or judges[0]) if judges else None

    result = await _db(browse.run_page, store, run, body_mod.render, body_mod.VERSION, shown)
    if result.stale:  # a large run whose ledger moved on: shown as it was, computed beside
        request.app[REFRESHER].ask(run)
    body = result.body or {}
    unfinished = any(result.overview.counts.get(s) for s in runs_list.OPEN)
    judges = body.get("judges") or []
    judge = asked or (judges[0] if judges else "")
    if judges and judge not in judges:
        raise InputError(f"run {run.name} has no judge {judge!r}")
    pairwise = body.get("pairwise")
    criterion = request.query.get("criterion") or (
        pairwise["criteria"][-1] if pairwise and pairwise["criteria"] else ""
    )
    instances = await _db(browse.first_instances, store, run, 1)
    # twins are no models of the overview's: its responses say whether it has any
    probed = any(is_twin(m) for m in await _db(ledger.run_models, store, run.id))
    return page(
        request,
        "run.html",
        probed=probed,
        title=run.name,
        run=run,
        view=result.overview,
        body=body,
        result=result,
        reload=RELOAD_SECONDS if result.body is None else LIVE_SECONDS if unfinished else None,
        judge=judge,
        figures=result.part or {},
        criterion=criterion,
        board=leaderboard(body, judge) if judges else [],
        tables=body_mod.TABLES,
        params=body_mod.cell_params,
        first_instance=instances[0] if instances else "",
    )


async def judgments_page(request: web.Request) -> web.Response:
    store = request.app[STORE]
    run = await _run(request)
    query = browse.query_of(request.query, run)
    after = browse.number_of(request.query.get("after") or "0", "after (a judgment id)")
    found = await _db(browse.judgments, store, run, query, after)
    kept = {k: v for k, v in request.query.items() if k != "after" and v}
    next_url = (
        f"{run_url(run.name)}/judgments?{urlencode({**kept, 'after': found.next_after})}"
        if found.next_after is not None
        else None
    )
    first_url = f"{run_url(run.name)}/judgments?{urlencode(kept)}" if after else None
    return page(
        request,
        "judgments.html",
        title=f"{run.name}: judgments",
        run=run,
        worker=kinds.of(run.config.kind).words.worker,
        lines=found.lines,
        scanned_to=found.scanned_to,
        next_url=next_url,
        first_url=first_url,
        filters=kept,
        models=await _db(browse.run_models, store, run),
        facets=await _db(browse.facets, store, run),
    )


async def judgment_page(request: web.Request) -> web.Response:
    store = request.app[STORE]
    run = await _run(request)
    raw = request.match_info["id"]
    try:
        judgment = browse.number_of(raw, "a judgment id")
    except InputError:  # no judgment has that id
        raise browse.NotFound(f"run {run.name} has no judgment {raw!r}") from None
    detail = await _db(browse.judgment_detail, store, run, judgment)
    shown = await _instance_images(request, run, str(detail.row["instance_id"]))
    return page(
        request,
        "judgment.html",
        title=f"{run.name}: judgment {raw}",
        run=run,
        d=detail,
        images=shown,
    )


async def _instance_images(request: web.Request, run: RunInfo, instance: str) -> Any:
    """The images of ``instance`` as a page shows them."""
    refs = await _db(instance_images, request.app[STORE], run.id, instance)
    return images.shown(refs, lambda d: images.image_url(run.name, d), f"instance {instance}")


async def image(request: web.Request) -> web.Response:
    """One image of a run, by digest (``viewer.images``): 400 for what is no digest, 404
    for one the run does not hold."""
    digest = images.checked_digest(request.match_info["sha256"])
    run = await _run(request)
    match = request.headers.get("If-None-Match")
    served: web.Response = await _db(
        images.serve, request.app[STORE], run.id, run.name, digest, match
    )
    return served


async def compare_page(request: web.Request) -> web.Response:
    store = request.app[STORE]
    run = await _run(request)
    models = await _db(browse.run_models, store, run)
    if not models:  # a run about instances alone (generation, annotation) has none
        raise InputError(f"run {run.name} holds no model's responses to compare")
    instance = request.query.get("instance", "")
    a = request.query.get("a") or (models[0] if models else "")
    b = request.query.get("b") or (models[1] if len(models) > 1 else a)
    if not instance:
        found = await _db(browse.first_instances, store, run, 1)
        instance = found[0] if found else ""
    for m in (a, b):
        if m not in models:
            raise InputError(f"run {run.name} has no model {m!r}")
    comparison = await _db(browse.compare, store, run, instance, [a, b])
    before, after = await _db(browse.neighbours, store, run, instance)
    apart = await _db(browse.disagreements, store, run, [a, b])
    shown = await _instance_images(request, run, comparison.instance_id)
    return page(
        request,
        "compare.html",
        title=f"{run.name}: {a} vs {b}",
        run=run,
        c=comparison,
        models=models,
        a=a,
        b=b,
        before=before,
        after=after,
        apart=apart,
        images=shown,
    )


#: the module that reads a run's judge card from the ledger
PROBE_CARD = "flask_eval.app.probe_card"


def _probe_card(name: str) -> Callable[..., Any]:
    """``name`` of the judge card's reader, imported when a card page is asked for."""
    fn: Callable[..., Any] = getattr(importlib.import_module(PROBE_CARD), name)
    return fn


async def card_page(request: web.Request) -> web.Response:
    """The judge card of a run with probes: each judge's effects, each linking to the
    pairs behind it."""
    run = await _run(request)
    card = await _db(_probe_card("load_card"), request.app[STORE], run.name)
    shown = card_html(card, pairs_href=lambda judge, key: pairs_url(run.name, judge, key))
    return page(request, "card.html", title=f"{run.name}: judge card", run=run, card=shown)


async def pairs_page(request: web.Request) -> web.Response:
    """The pairs of items behind one effect of the judge card (``judge``, ``key``), each
    linking to its judgments."""
    run = await _run(request)
    judge, key = request.query.get("judge", ""), request.query.get("key", "")
    inputs = await _db(_probe_card("load_card_inputs"), request.app[STORE], run.name)
    if judge not in inputs.judges:
        raise browse.NotFound(f"the judge card of run {run.name} has no judge {judge!r}")
    if key not in PAIR_KEYS:
        raise browse.NotFound(f"the judge card has no pairs called {key!r}")

    def item_href(**params: str) -> str:
        return judgments_url(run.name, **params)

    shown = pairs_html(inputs, judge, key, item_href=item_href)
    title = f"{run.name}: {key} pairs of {judge}"
    return page(request, "card_pairs.html", title=title, run=run, judge=judge, key=key, pairs=shown)


async def fallback(request: web.Request) -> web.Response:
    """Any other path: 404 to a read, 405 to anything else (the viewer writes nothing)."""
    if request.method in ("GET", "HEAD"):
        return page(
            request, "error.html", 404, title="Not found", message=f"no page at {request.path}"
        )
    raise web.HTTPMethodNotAllowed(request.method, ["GET", "HEAD"])


def make_app(
    store: Store, refresher: Refresher | None = None, rate: RateOptions | None = None
) -> web.Application:
    """The viewer over ``store`` (read-only: GET and HEAD only); with ``rate``, the rating
    workspace at ``/rate`` too, and the viewer's pages only as ``rate`` allows
    (``viewer.rate_server``)."""
    app = web.Application(middlewares=[errors])
    app[STORE] = store
    app[REFRESHER] = refresher or Refresher(store)

    async def stop_refreshing(app: web.Application) -> None:
        app[REFRESHER].close()

    app.on_cleanup.append(stop_refreshing)
    app[JINJA] = environment()
    app.router.add_get("/", runs_page)
    app.router.add_get("/runs/{run}", run_page)
    app.router.add_get("/runs/{run}/judgments", judgments_page)
    app.router.add_get("/runs/{run}/judgments/{id}", judgment_page)
    app.router.add_get("/runs/{run}/compare", compare_page)
    app.router.add_get("/runs/{run}/images/{sha256}", image)
    app.router.add_get("/runs/{run}/card", card_page)
    app.router.add_get("/runs/{run}/card/pairs", pairs_page)
    app.router.add_static("/static/", HERE / "static")
    if rate is not None:
        from flask_eval.viewer import rate_server

        rate_server.mount(app, store, rate)
    app.router.add_route("*", "/{tail:.*}", fallback)
    return app
