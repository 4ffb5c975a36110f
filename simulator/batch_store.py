"""The batches the simulator holds for Anthropic's Message Batches and Gemini's batch mode
(pure state, no HTTP), the knobs that make them misbehave, and the test hooks that set
those knobs and count submissions.

A batch's answers are drawn and written when it is created (every random draw happens
before any await, as for live calls) with :func:`simulator.reply.reply`, the function that
builds a live answer: the same request gets the same answer, live or batched. They are
shown once the batch has *ended*: ``delay_s`` after its creation, unless it expires first
(``expires_after_s``: every request ``expired``, none answered) or is canceled (every
request ``canceled``). A share ``error_rate`` of its requests fail (``errored``).
``lose_responses``: the next N creations are accepted (the batch exists, its requests
count as submitted) but their HTTP answer is dropped (the connection closed without a
response), as when a process dies between the provider's accepting a batch and our
recording its id.

Test hooks (one app, both dialects): ``POST /batches/settings`` (JSON of
:class:`BatchSettings` fields; returns them all), ``GET /batches/submitted`` (how many
times each ``custom_id`` was submitted, per dialect: the exactly-once check).
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from aiohttp import web

from .answer import estimate_tokens
from .reply import Reply, reply
from .wire import Dialect, ParsedRequest

if TYPE_CHECKING:
    from .server import Simulator

#: what became of one request of an ended batch (Anthropic's words; Gemini's follow)
Outcome = Literal["succeeded", "errored", "canceled", "expired"]
DAY_S = 86_400.0


@dataclass
class BatchSettings:
    """How the simulator's batches behave (``POST /batches/settings``)."""

    #: seconds from a batch's creation to the end of its processing
    delay_s: float = 0.0
    #: share of a batch's requests that fail (``errored``), drawn per request
    error_rate: float = 0.0
    #: seconds from creation to expiry (the APIs say 24 h); below ``delay_s``: expired
    expires_after_s: float = DAY_S
    #: the next N batch creations are accepted but their HTTP answer is dropped
    lose_responses: int = 0

    def update(self, values: object) -> None:
        """Set the fields named in ``values`` (a JSON object); ValueError on bad ones."""
        if not isinstance(values, dict):
            raise ValueError("the settings must be a JSON object")
        known = {f.name: f.type for f in fields(self)}
        for name, value in values.items():
            if name not in known:
                raise ValueError(f"unknown batch setting {name!r}")
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"batch setting {name!r} must be a number >= 0")
            setattr(self, name, int(value) if name == "lose_responses" else float(value))
        if self.error_rate > 1:
            raise ValueError("error_rate must be in [0, 1]")


@dataclass
class Item:
    """One request of a batch: its id, what it asked, and its answer if it gets one."""

    custom_id: str
    parsed: ParsedRequest
    answer: Reply | None  # None: the request fails (``errored``)
    prompt_tokens: int
    garbage: bool = False
    refusal: bool = False
    outcome: Outcome | None = None  # set when the batch ends
    #: what the client sent beside the request and expects back (Gemini's metadata)
    echo: Any = None


@dataclass
class SimBatch:
    """One batch: its items and the times that decide its state."""

    id: str
    dialect: Dialect
    model: str
    items: list[Item]
    created: float
    ends: float
    expires: float
    display_name: str = ""
    cancel_at: float | None = None
    ended: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def settle(self, now: float, sim: Simulator) -> None:
        """Move the batch on to ``now``: end it (canceled, expired or processed) once its
        time has come; its answers are billed (``GET /stats``) when it ends."""
        if self.ended is not None:
            return
        if self.cancel_at is not None and now > self.cancel_at:
            self._end(self.cancel_at, "canceled", sim)
        elif now >= min(self.ends, self.expires):
            self._end(min(self.ends, self.expires), None, sim)

    def _end(self, at: float, why: Outcome | None, sim: Simulator) -> None:
        expired = why is None and self.expires < self.ends
        stats = sim.stats
        for item in self.items:
            if why is not None or expired:
                item.outcome = why or "expired"
                continue
            item.outcome = "succeeded" if item.answer is not None else "errored"
            if item.answer is not None:
                stats.served += 1
                stats.refusals += item.refusal
                stats.garbage += item.garbage
                stats.prompt_tokens += item.prompt_tokens
                stats.completion_tokens += item.answer.completion_tokens
        self.ended = at

    def count(self, outcome: Outcome) -> int:
        return sum(item.outcome == outcome for item in self.items)


class BatchStore:
    """Every batch of one simulator app, its settings and its submission counts."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.settings = BatchSettings()
        self.batches: dict[str, SimBatch] = {}
        self.submitted: dict[str, Counter[str]] = {}

    def create(
        self,
        dialect: Dialect,
        model: str,
        requests: list[tuple[str, ParsedRequest, Any]],
        id_prefix: str,
        display_name: str = "",
    ) -> SimBatch:
        """A new batch of ``requests`` (custom_id, parsed request, what to echo back),
        each answered now (drawn in order from the app's random generator)."""
        cfg, rng, settings = self.sim.config, self.sim.rng, self.settings
        counts = self.submitted.setdefault(dialect, Counter())
        items = []
        for custom_id, parsed, echo in requests:
            counts[custom_id] += 1
            prompt_tokens = estimate_tokens(parsed.prompt)
            failed = settings.error_rate > 0 and rng.random() < settings.error_rate
            garbage = cfg.garbage_rate > 0 and rng.random() < cfg.garbage_rate
            refusal = cfg.refusal_rate > 0 and rng.random() < cfg.refusal_rate
            answer = None if failed else reply(
                dialect, parsed, cfg, prompt_tokens, garbage=garbage, refusal=refusal)  # fmt: skip
            items.append(Item(custom_id, parsed, answer, prompt_tokens, garbage, refusal,
                              echo=echo))  # fmt: skip
        now = time.time()
        batch = SimBatch(f"{id_prefix}{uuid.uuid4().hex[:24]}", dialect, model, items, now,
                         now + settings.delay_s, now + settings.expires_after_s,
                         display_name)  # fmt: skip
        self.batches[batch.id] = batch
        return batch

    def get(self, batch_id: str, dialect: Dialect) -> SimBatch | None:
        """The batch, moved on to now (None: no such batch of this dialect)."""
        batch = self.batches.get(batch_id)
        if batch is None or batch.dialect != dialect:
            return None
        batch.settle(time.time(), self.sim)
        return batch

    def newest_first(self, dialect: Dialect) -> list[SimBatch]:
        now = time.time()
        found = [b for b in reversed(self.batches.values()) if b.dialect == dialect]
        for batch in found:
            batch.settle(now, self.sim)
        return found

    def lose_response(self) -> bool:
        """Whether this creation's answer is to be dropped (one of ``lose_responses``)."""
        if self.settings.lose_responses <= 0:
            return False
        self.settings.lose_responses -= 1
        return True

    # -- test hooks ---------------------------------------------------------------

    async def post_settings(self, request: web.Request) -> web.Response:
        try:
            self.settings.update(json.loads(await request.read() or b"{}"))
        except ValueError as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response(asdict(self.settings))

    async def get_submitted(self, request: web.Request) -> web.Response:
        return web.json_response({d: dict(c) for d, c in self.submitted.items()})


STORE_KEY = web.AppKey("batch_store", BatchStore)


def store_of(app: web.Application, sim: Simulator) -> BatchStore:
    """The app's batch store, made (and its test hooks routed) on first use."""
    if STORE_KEY not in app:
        store = app[STORE_KEY] = BatchStore(sim)
        app.router.add_post("/batches/settings", store.post_settings)
        app.router.add_get("/batches/submitted", store.get_submitted)
    return app[STORE_KEY]


def drop_answer(request: web.Request) -> web.Response:
    """Close the connection without an answer: the client sees a transport error (and the
    batch it asked for exists)."""
    if request.transport is not None:
        request.transport.close()
    return web.Response(status=500)  # never reaches the client


def rfc3339(at: float | None) -> str | None:
    """Epoch seconds as RFC 3339 (``...Z``), as both APIs write times."""
    if at is None:
        return None
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")
