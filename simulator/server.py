"""The judge simulator HTTP server (aiohttp): its app (:func:`make_app`); simulator/serving.py
serves it.

Routes: ``POST /v1/chat/completions`` (OpenAI), ``POST /v1/messages`` (Anthropic),
``POST /v1beta/models/{model}:generateContent`` (Gemini; ``/v1/...`` too),
``GET /stats``, ``POST /stats/reset``, ``GET /health``; the batch endpoints of each
provider are routed by their own module (``batches_openai``, ``batches_anthropic``,
``batches_gemini``) over one batch store (``batch_store``: its knobs and test hooks).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict

from aiohttp import web

from . import batches_anthropic, batches_gemini, batches_openai
from .answer import estimate_tokens
from .batch_store import api_key
from .config import SimConfig
from .options import WIRE_FORMATS
from .prompt_cache import usage
from .reply import reply
from .state import SimState
from .stats import InFlight
from .wire import BadRequest, Dialect, ParsedRequest, parse_request
from .wire_bodies import ErrorKind, error_body

TIMEOUT_SLEEP_S = 3600.0


PROXY_PAGE = (
    "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>"
)


def _json_response(
    payload: object, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=json.dumps(payload, ensure_ascii=False).encode("utf-8"),
        status=status,
        headers=headers,
        content_type="application/json",
    )


class Simulator(SimState):
    """State (``simulator.state.SimState``) and request handlers of one simulator app."""

    # -- helpers -----------------------------------------------------------------

    def _error(
        self,
        dialect: Dialect,
        status: int,
        kind: ErrorKind,
        message: str,
        headers: dict[str, str] | None = None,
        retry_after: int | None = None,
    ) -> web.Response:
        if status == 429:
            self.stats.rate_limited += 1
        elif status >= 500:
            self.stats.errors += 1
        body = error_body(dialect, kind, message, status, retry_after)
        return _json_response(body, status, headers)

    def _rate_limited(self, dialect: Dialect, wait_s: float, message: str) -> web.Response:
        seconds = max(1, math.ceil(wait_s))
        headers = {
            "Retry-After": str(seconds),
            "retry-after-ms": str(max(1, math.ceil(wait_s * 1000))),
        }
        return self._error(dialect, 429, "rate_limit", message, headers, seconds)

    def _check_limits(self, prompt_tokens: int) -> tuple[float, str] | None:
        """None if within rpm/tpm (and then records the request), else (wait, reason)."""
        if self.rpm is None and self.tpm is None:
            return None
        now = time.monotonic()
        wait = 0.0
        reasons = []
        if self.rpm is not None:
            w = self.rpm.wait_time(now, 1)
            if w > 0:
                wait = max(wait, w)
                reasons.append(f"requests per minute (limit {self.rpm.limit})")
        if self.tpm is not None:
            w = self.tpm.wait_time(now, prompt_tokens)
            if w > 0:
                wait = max(wait, w)
                reasons.append(f"tokens per minute (limit {self.tpm.limit})")
        if reasons:
            return wait, "Rate limit reached for " + " and ".join(reasons)
        if self.rpm is not None:
            self.rpm.record(now, 1)
        if self.tpm is not None:
            self.tpm.record(now, prompt_tokens)
        return None

    def _latency_s(self) -> float:
        cfg = self.config
        if cfg.latency_ms <= 0:
            return 0.0
        if cfg.latency_dist == "lognormal":
            return self.rng.lognormvariate(math.log(cfg.latency_ms), cfg.sigma) / 1000
        return cfg.latency_ms / 1000

    # -- handlers ----------------------------------------------------------------

    async def openai_chat(self, request: web.Request) -> web.Response:
        return await self._complete(request, "openai")

    async def anthropic_messages(self, request: web.Request) -> web.Response:
        return await self._complete(request, "anthropic")

    async def gemini_generate(self, request: web.Request) -> web.Response:
        return await self._complete(request, "gemini")

    async def _complete(self, request: web.Request, dialect: Dialect) -> web.Response:
        stats = self.stats
        stats.requests += 1
        self.flight.change(time.monotonic(), stats.in_flight, arrival=True)
        if not stats.first_request_at:
            stats.first_request_at = time.time()
        stats.in_flight += 1
        if stats.in_flight > stats.max_in_flight:
            stats.max_in_flight = stats.in_flight
        try:
            return await self._complete_inner(request, dialect)
        finally:
            self.flight.change(time.monotonic(), stats.in_flight)
            stats.in_flight -= 1
            stats.last_answer_at = time.time()

    async def _complete_inner(self, request: web.Request, dialect: Dialect) -> web.Response:
        cfg = self.config
        try:
            body = json.loads(await request.read())
            parsed = parse_request(dialect, body, request.match_info.get("model"))
        except BadRequest as exc:
            body = error_body(
                dialect, "invalid_request", str(exc), 400, param=exc.param, code=exc.code
            )
            return _json_response(body, 400)
        except ValueError as exc:
            return self._error(dialect, 400, "invalid_request", str(exc))

        if cfg.require_key is not None and api_key(request) != cfg.require_key:
            self.stats.unauthorized += 1
            if dialect == "gemini":  # the Gemini API answers a wrong key with a 400
                message = "API key not valid. Please pass a valid API key. (simulated)"
                return self._error(dialect, 400, "auth", message)
            return self._error(dialect, 401, "auth", "Incorrect API key provided (simulated)")
        self.saw(dialect, parsed)
        prompt_tokens = estimate_tokens(parsed.prompt) + parsed.image_tokens
        limited = self._check_limits(prompt_tokens)
        if limited is not None:
            return self._rate_limited(dialect, *limited)

        # Draw every random decision before the first await so that, for a fixed request
        # order, the run is reproducible regardless of latency interleavings.
        rng = self.rng
        if cfg.rate_limit_rate > 0 and rng.random() < cfg.rate_limit_rate:
            return self._rate_limited(
                dialect, cfg.rate_limit_wait, "Rate limit reached (simulated)"
            )
        if cfg.error_rate > 0 and rng.random() < cfg.error_rate:
            overloaded = rng.random() < 0.5
            if dialect == "anthropic":
                status = 529 if overloaded else 500
            else:
                status = 503 if overloaded else 500
            kind: ErrorKind = "overloaded" if overloaded else "server_error"
            return self._error(dialect, status, kind, "The server had an error (simulated)")
        if cfg.timeout_rate > 0 and rng.random() < cfg.timeout_rate:
            self.stats.timeouts += 1
            await asyncio.sleep(TIMEOUT_SLEEP_S)
            return self._error(dialect, 504, "server_error", "Timed out (simulated)")
        latency = self._latency_s()
        garbage = cfg.garbage_rate > 0 and rng.random() < cfg.garbage_rate
        refusal = cfg.refusal_rate > 0 and rng.random() < cfg.refusal_rate
        html = cfg.html_rate > 0 and rng.random() < cfg.html_rate

        # a server with N slots: the others wait in line; a client that gives up cancels
        # this handler (handler_cancellation), which leaves the line or frees the slot
        async with self.slots or contextlib.nullcontext():
            stats = self.stats
            stats.serving += 1
            stats.max_serving = max(stats.max_serving, stats.serving)
            try:
                return await self._answer(
                    request, dialect, parsed, prompt_tokens, latency, garbage, refusal, html
                )
            finally:
                stats.serving -= 1

    async def _answer(
        self,
        request: web.Request,
        dialect: Dialect,
        parsed: ParsedRequest,
        prompt_tokens: int,
        latency: float,
        garbage: bool,
        refusal: bool,
        html: bool,
    ) -> web.Response:
        cfg = self.config
        if latency > 0:
            await asyncio.sleep(latency)
        if html:
            self.stats.html += 1
            return web.Response(text=PROXY_PAGE, content_type="text/html")

        echoed = None
        if cfg.echo_headers:  # a debugging proxy's echo: the key is among the headers
            echoed = "".join(f"{k}: {v}\n" for k, v in request.headers.items())
        cache = usage(self.prompt_cache, dialect, parsed, api_key(request))
        answer = reply(
            dialect,
            parsed,
            cfg,
            prompt_tokens,
            garbage=garbage,
            refusal=refusal,
            echoed=echoed,
            cache=cache,
        )
        stats = self.stats
        stats.served += 1
        stats.refusals += refusal
        stats.conversation_turns += answer.turn is not None
        if garbage:
            stats.garbage += 1
        stats.prompt_tokens += prompt_tokens
        stats.completion_tokens += answer.completion_tokens
        stats.cached_tokens += cache[0]
        stats.cache_write_tokens += cache[1]
        return _json_response(answer.body)

    async def get_stats(self, request: web.Request) -> web.Response:
        stats = self.stats
        stats.mean_in_flight, stats.in_flight_seconds = self.flight.mean(
            time.monotonic(), stats.in_flight
        )
        stats.mean_in_flight_sending, stats.sending_seconds = self.flight.while_sending()
        return _json_response(asdict(stats))

    async def reset_stats(self, request: web.Request) -> web.Response:
        self.stats.reset()
        self.flight = InFlight()
        return _json_response(asdict(self.stats))

    async def health(self, request: web.Request) -> web.Response:
        return _json_response({"status": "ok"})


SIMULATOR_KEY = web.AppKey("simulator", Simulator)


def make_app(config: SimConfig) -> web.Application:
    """A fresh simulator application (its own counters, limits and random generator)."""
    sim = Simulator(config)
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[SIMULATOR_KEY] = sim
    app.router.add_get("/stats", sim.get_stats)
    app.router.add_post("/stats/reset", sim.reset_stats)
    app.router.add_get("/health", sim.health)
    for add_routes in ROUTES.values():
        add_routes(app, sim)
    return app


def _openai_chat(app: web.Application, sim: Simulator) -> None:
    app.router.add_post("/v1/chat/completions", sim.openai_chat)
    app.router.add_post("/chat/completions", sim.openai_chat)


def _anthropic_messages(app: web.Application, sim: Simulator) -> None:
    app.router.add_post("/v1/messages", sim.anthropic_messages)


def _gemini_generate(app: web.Application, sim: Simulator) -> None:
    # the google-genai SDK adds /v1beta (our judge pins it) or /v1 (the SDK's default)
    for version in ("v1beta", "v1"):
        app.router.add_post(f"/{version}/models/{{model}}:generateContent", sim.gemini_generate)


#: each wire format served (simulator/options.py names them) -> what routes it. The batch
#: store's hooks (/batches/settings, /batches/submitted) are routed before OpenAI's
#: batches: those are served without /v1 too, and /batches/{batch_id} would take them
ROUTES: dict[str, Callable[[web.Application, Simulator], None]] = dict(
    zip(
        WIRE_FORMATS,
        (
            _openai_chat,
            _anthropic_messages,
            _gemini_generate,
            batches_anthropic.add_routes,
            batches_gemini.add_routes,
            batches_openai.add_routes,
        ),
        strict=True,
    )
)
