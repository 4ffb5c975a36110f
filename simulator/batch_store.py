"""The batches the simulator holds for all three batch APIs (OpenAI's Batch API,
Anthropic's Message Batches, Gemini's batch mode): pure state, one set of knobs that make
them misbehave, and the two test hooks. Each dialect's module (``batches_openai``,
``batches_anthropic``, ``batches_gemini``) only translates its wire format to this store.

A batch's requests are answered when the provider *processes* them, that is when the batch
ends: ``delay_s`` after its creation (read when the batch is looked at, so a test can end
open batches at once by setting it to 0). Each answer is built by
:func:`simulator.reply.reply`, the function that builds a live answer, after going through
the simulator's prompt cache (:func:`simulator.prompt_cache.usage`, with the API key that
created the batch), as providers cache batched requests too: the same request gets the
same answer, live or batched, and reports cached tokens as a live one would. The random
draws (garbage, refusal) happen at creation, before any await, as for live calls.

Knobs (``POST /batches/settings``, the fields of :class:`BatchSettings`):

- ``delay_s``: creation to end;
- ``error_rate``: share of requests that fail (``errored``; OpenAI: a 500 result line),
  drawn from a hash of the request (model and prompt) the first time that request is
  submitted only: a request sent again is answered (a retry succeeds, as after a passing
  provider fault);
- ``expires_after_s``: creation to expiry (the APIs say 24 h); below ``delay_s``, the
  batch expires with none of its requests processed;
- ``expire_batches``: the next N batches expire when they end, with their first half
  processed (OpenAI, Anthropic) and the rest ``expired``; Gemini's expired batch holds no
  results at all (its API says so), so there none is processed;
- ``fail_batches``: the next N batches fail as a whole at creation (OpenAI ``failed``,
  Gemini ``BATCH_STATE_FAILED``; Anthropic has no such state: every request ``errored``);
- ``lose_responses``: the next N creations are accepted (the batch exists, its requests
  count as submitted) but their HTTP answer is dropped (the connection closed without a
  response), as when a process dies between the provider's accepting a batch and our
  recording its id;
- ``duplicate_results``: the next N batches list every answered request twice: its
  answer, then a second, different answer (every score 5, or 1 where the simulator's
  ``score`` is 5), billed as an answer of its own, as a provider that processed a request
  twice would.

With ``echo_headers`` (SimConfig), every batched answer begins with the headers of the
request that created its batch, as a debugging proxy's echo of a live call does.

``GET /batches/submitted``: per dialect, how many times each ``custom_id`` was submitted
(the exactly-once check), how many batches were created, how many creation answers were
lost, and the batches by state.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections import Counter
from dataclasses import asdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, get_args

from aiohttp import web

from .answer import estimate_tokens
from .batch_state import BatchSettings, Item, SimBatch
from .wire import Dialect, ParsedRequest

if TYPE_CHECKING:
    from .state import SimState


class BatchStore:
    """Every batch of one simulator app, its settings and its submission counts."""

    def __init__(self, sim: SimState) -> None:
        self.sim = sim
        self.settings = BatchSettings()
        self.batches: dict[str, SimBatch] = {}
        self.submitted: dict[Dialect, Counter[str]] = {d: Counter() for d in get_args(Dialect)}
        self.lost: Counter[Dialect] = Counter()
        self._seen: set[bytes] = set()  # requests submitted before (error_rate's rule)

    def create(
        self,
        dialect: Dialect,
        model: str,
        requests: list[tuple[str, ParsedRequest, Any]],
        id_prefix: str,
        request: web.Request,
        display_name: str = "",
    ) -> SimBatch:
        """A new batch of ``requests`` (custom_id, parsed request, what to echo back),
        created by ``request`` (its API key: the prompt cache's scope; its headers: what
        ``echo_headers`` echoes); every draw is made now, in order."""
        cfg, rng, settings = self.sim.config, self.sim.rng, self.settings
        counts = self.submitted[dialect]
        items = []
        for custom_id, parsed, echo in requests:
            counts[custom_id] += 1
            self.sim.saw(dialect, parsed, batch=True)
            garbage = cfg.garbage_rate > 0 and rng.random() < cfg.garbage_rate
            refusal = cfg.refusal_rate > 0 and rng.random() < cfg.refusal_rate
            items.append(
                Item(
                    custom_id,
                    parsed,
                    estimate_tokens(parsed.prompt) + parsed.image_tokens,
                    self._fails(dialect, parsed),
                    garbage,
                    refusal,
                    echo,
                )
            )
        echoed = None
        if cfg.echo_headers:  # a debugging proxy's echo: the key is among the headers
            echoed = "".join(f"{k}: {v}\n" for k, v in request.headers.items())
        batch = SimBatch(
            f"{id_prefix}{uuid.uuid4().hex[:24]}",
            dialect,
            model,
            items,
            time.time(),
            settings,
            api_key(request),
            echoed=echoed,
            display_name=display_name,
        )
        if settings.take("fail_batches"):
            batch.failed, batch.ended = True, batch.created
            for item in items:
                item.outcome = "errored"
        elif settings.take("expire_batches"):
            batch.processed_on_expiry = 0 if dialect == "gemini" else len(items) // 2
        batch.duplicated = not batch.failed and settings.take("duplicate_results")
        self.batches[batch.id] = batch
        return batch

    def _fails(self, dialect: Dialect, parsed: ParsedRequest) -> bool:
        """Whether this request fails: drawn the first time it is submitted only."""
        rate = self.settings.error_rate
        seed = self.sim.config.seed
        text = f"{seed}\x1f{dialect}\x1f{parsed.model}\x1f{parsed.prompt}"
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        first = digest not in self._seen
        self._seen.add(digest)
        return first and rate > 0 and int.from_bytes(digest, "big") / 2**64 < rate

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

    def lose_response(self, dialect: Dialect) -> bool:
        """Whether this creation's answer is to be dropped (one of ``lose_responses``)."""
        if not self.settings.take("lose_responses"):
            return False
        self.lost[dialect] += 1
        return True

    # -- test hooks ---------------------------------------------------------------

    async def post_settings(self, request: web.Request) -> web.Response:
        try:
            self.settings.update(json.loads(await request.read() or b"{}"))
        except ValueError as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response(asdict(self.settings))

    async def get_submitted(self, request: web.Request) -> web.Response:
        now = time.time()
        for batch in self.batches.values():
            batch.settle(now, self.sim)
        return web.json_response(
            {
                dialect: {
                    "submitted": dict(counts),
                    "batches": sum(b.dialect == dialect for b in self.batches.values()),
                    "lost": self.lost[dialect],
                    "states": dict(
                        Counter(b.state for b in self.batches.values() if b.dialect == dialect)
                    ),
                }
                for dialect, counts in self.submitted.items()
            }
        )


STORE_KEY = web.AppKey("batch_store", BatchStore)


def store_of(app: web.Application, sim: SimState) -> BatchStore:
    """The app's batch store, made (and its test hooks routed) on first use."""
    if STORE_KEY not in app:
        store = app[STORE_KEY] = BatchStore(sim)
        app.router.add_post("/batches/settings", store.post_settings)
        app.router.add_get("/batches/submitted", store.get_submitted)
    return app[STORE_KEY]


def api_key(request: web.Request) -> str:
    """The key of a request, as each SDK sends it (Gemini: ``x-goog-api-key``, or the
    REST API's ``?key=``)."""
    auth = request.headers.get("Authorization", "")
    return (
        auth.removeprefix("Bearer ").strip()
        or request.headers.get("x-api-key", "")
        or request.headers.get("x-goog-api-key", "")
        or request.query.get("key", "")
    )


def drop_answer(request: web.Request) -> web.Response:
    """Close the connection without an answer: the client sees a transport error (and the
    batch it asked for exists)."""
    if request.transport is not None:
        request.transport.close()
    return web.Response(status=500)  # never reaches the client


def rfc3339(at: float | None) -> str | None:
    """Epoch seconds as RFC 3339 (``...Z``), as Anthropic's and Gemini's APIs write times."""
    if at is None:
        return None
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")
