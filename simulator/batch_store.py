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
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, get_args

from aiohttp import web

from .answer import estimate_tokens
from .prompt_cache import usage
from .reply import Reply, reply
from .wire import Dialect, ParsedRequest

if TYPE_CHECKING:
    from .config import SimConfig
    from .state import SimState

#: what became of one request of an ended batch (Anthropic's words; the others map them)
Outcome = Literal["succeeded", "errored", "canceled", "expired"]
#: a batch's state, in the store's words (each dialect has its own for them)
State = Literal["in_progress", "canceling", "completed", "expired", "canceled", "failed"]
DAY_S = 86_400.0
#: the knobs that count batches (whole numbers)
_COUNTS = ("expire_batches", "fail_batches", "lose_responses", "duplicate_results")


@dataclass
class BatchSettings:
    """How the simulator's batches behave (``POST /batches/settings``)."""

    delay_s: float = 0.0
    error_rate: float = 0.0
    expires_after_s: float = DAY_S
    expire_batches: int = 0
    fail_batches: int = 0
    lose_responses: int = 0
    duplicate_results: int = 0

    def update(self, values: object) -> None:
        """Set the fields named in ``values`` (a JSON object); ValueError on bad ones,
        and then nothing is set."""
        if not isinstance(values, dict):
            raise ValueError("the settings must be a JSON object")
        known = {f.name for f in fields(self)}
        checked: dict[str, float] = {}
        for name, value in values.items():
            if name not in known:
                raise ValueError(f"unknown batch setting {name!r}")
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"batch setting {name!r} must be a number >= 0")
            if name in _COUNTS and value != int(value):
                raise ValueError(f"batch setting {name!r} must be a whole number")
            checked[name] = value
        if checked.get("error_rate", self.error_rate) > 1:
            raise ValueError("error_rate must be in [0, 1]")
        for name, value in checked.items():
            setattr(self, name, int(value) if name in _COUNTS else float(value))

    def take(self, name: str) -> bool:
        """Whether one of the counted knob ``name`` is left (and use it up)."""
        left: int = getattr(self, name)
        if left <= 0:
            return False
        setattr(self, name, left - 1)
        return True


@dataclass
class Item:
    """One request of a batch: its id, what it asked, its draws, and its answer once
    processed."""

    custom_id: str
    parsed: ParsedRequest
    prompt_tokens: int
    fails: bool = False
    garbage: bool = False
    refusal: bool = False
    #: what the client sent beside the request and expects back (Gemini's metadata)
    echo: Any = None
    outcome: Outcome | None = None  # set when the batch ends
    answer: Reply | None = None  # set when processed and answered
    #: a second answer to the same request, listed after the first (duplicate_results)
    again: Reply | None = None


@dataclass
class SimBatch:
    """One batch: its items and the times that decide its state."""

    id: str
    dialect: Dialect
    model: str
    items: list[Item]
    created: float
    settings: BatchSettings  # the store's, read when the batch is looked at
    key: str = ""  # the API key that created it (the prompt cache's scope)
    #: the creating request's headers, which every answer begins with (echo_headers)
    echoed: str | None = None
    #: duplicate_results: every answered request is listed twice
    duplicated: bool = False
    display_name: str = ""
    #: expire_batches: the batch expires when it ends, this many requests processed
    processed_on_expiry: int | None = None
    failed: bool = False
    cancel_at: float | None = None
    ended: float | None = None
    #: what a dialect keeps of its own (OpenAI: metadata, file ids)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ends(self) -> float:
        return self.created + self.settings.delay_s

    @property
    def expires(self) -> float:
        return self.created + self.settings.expires_after_s

    @property
    def state(self) -> State:
        if self.failed:
            return "failed"
        if self.ended is None:
            return "canceling" if self.cancel_at is not None else "in_progress"
        if self.count("canceled"):
            return "canceled"
        return "expired" if self.count("expired") else "completed"

    def settle(self, now: float, sim: SimState) -> None:
        """Move the batch on to ``now``: end it (canceled, expired or processed) once its
        time has come; its requests are processed, and billed (``GET /stats``), then."""
        if self.ended is not None:
            return
        if self.cancel_at is not None and now >= self.cancel_at:
            self._end(self.cancel_at, 0, "canceled", sim)
            return
        ends, expires = self.ends, self.expires
        if now < min(ends, expires):
            return
        if expires < ends:
            processed = 0
        elif self.processed_on_expiry is not None:
            processed = self.processed_on_expiry
        else:
            processed = len(self.items)
        self._end(min(ends, expires), processed, "expired", sim)

    def _end(self, at: float, processed: int, rest: Outcome, sim: SimState) -> None:
        for item in self.items[:processed]:
            self._process(item, sim)
        for item in self.items[processed:]:
            item.outcome = rest
        self.ended = at

    def _process(self, item: Item, sim: SimState) -> None:
        if item.fails:
            item.outcome = "errored"
            return
        item.answer = self._answer(item, sim, sim.config)
        item.outcome = "succeeded"
        if self.duplicated:
            other = replace(sim.config, score=1 if sim.config.score == 5 else 5)
            item.again = self._answer(item, sim, other)

    def _answer(self, item: Item, sim: SimState, cfg: SimConfig) -> Reply:
        """One answer to ``item``, billed (``GET /stats``)."""
        cache = usage(sim.prompt_cache, self.dialect, item.parsed, self.key)
        answer = reply(
            self.dialect,
            item.parsed,
            cfg,
            item.prompt_tokens,
            garbage=item.garbage,
            refusal=item.refusal,
            echoed=self.echoed,
            cache=cache,
        )
        stats = sim.stats
        stats.served += 1
        stats.refusals += item.refusal
        stats.garbage += item.garbage
        stats.prompt_tokens += item.prompt_tokens
        stats.completion_tokens += answer.completion_tokens
        stats.cached_tokens += cache[0]
        stats.cache_write_tokens += cache[1]
        return answer

    def listed(self) -> list[tuple[Item, Reply | None]]:
        """Each request with its answer (None: none), in request order; a request answered
        twice (``duplicate_results``) is listed twice, its second answer right after."""
        out: list[tuple[Item, Reply | None]] = []
        for item in self.items:
            out.append((item, item.answer))
            if item.again is not None:
                out.append((item, item.again))
        return out

    def count(self, outcome: Outcome) -> int:
        return sum(item.outcome == outcome for item in self.items)


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
            garbage = cfg.garbage_rate > 0 and rng.random() < cfg.garbage_rate
            refusal = cfg.refusal_rate > 0 and rng.random() < cfg.refusal_rate
            items.append(
                Item(
                    custom_id,
                    parsed,
                    estimate_tokens(parsed.prompt),
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
