"""One batch of the simulator's batch APIs as pure state: the knobs that make batches
misbehave (:class:`BatchSettings`, simulator/batch_store.py says what each does), each
request (:class:`Item`) and the batch (:class:`SimBatch`), which ends, and is answered,
when looked at after its time has come."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Literal

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
        stats.conversation_turns += answer.turn is not None
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
