"""Per-endpoint request and token budgets shared by every worker (GCRA reservations).

``acquire`` reserves one request and an estimated number of tokens in one atomic step
and returns after the reserved moment (the caller sleeps locally; nobody polls);
``settle`` corrects the token charge from the usage the provider reports; ``penalize``
blocks the endpoint for every worker after a 429. ``RedisLimiter`` shares the budgets
through Redis (its ``TIME`` is the clock), ``MemoryLimiter`` runs the same arithmetic in
one process, ``NullLimiter`` limits nothing. See docs/design/limiter.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from flask_eval.core.errors import FailureReason, JudgeError

log = logging.getLogger("flask_eval.limiter")

#: budget key of the entry that applies to endpoints without an entry of their own
DEFAULT = "*"
#: a coroutine that wakes this close to the end of a block it learned of goes ahead
_BLOCK_TOLERANCE = 0.02


@dataclass(frozen=True)
class Budget:
    """One endpoint's limits as the provider states them, per minute.

    The limiter sustains ``target`` x the stated rates and lets a burst of
    ``burst_seconds`` of that rate through at once (at least one request). Any 60 s
    window then holds at most ``target * limit * (60 + burst_seconds) / 60`` units, plus
    one call's tokens when a call is larger than the token burst: under the limit while
    ``burst_seconds <= 60 * (1 - target) / target`` (1.86 s at the default 0.97).
    """

    rpm: float | None = None
    tpm: float | None = None
    target: float = 0.97
    burst_seconds: float = 1.0
    #: settle() returns unused estimated tokens; False for a provider that counts the
    #: estimate (prompt + max_tokens) itself, whatever the call really used
    give_back: bool = True

    def __post_init__(self) -> None:
        for name in ("rpm", "tpm"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number or None, got {value!r}")
        if not 0 < self.target <= 1:
            raise ValueError(f"target must be in (0, 1], got {self.target!r}")
        if not (math.isfinite(self.burst_seconds) and self.burst_seconds >= 0):
            raise ValueError(f"burst_seconds must be >= 0, got {self.burst_seconds!r}")

    # Per dimension: seconds of budget one unit uses (0.0: not limited), and the burst
    # tolerance in seconds (at least one request).
    @property
    def request_interval(self) -> float:
        return 60.0 / (self.rpm * self.target) if self.rpm else 0.0

    @property
    def request_burst(self) -> float:
        return max(self.burst_seconds, self.request_interval) if self.rpm else 0.0

    @property
    def token_interval(self) -> float:
        return 60.0 / (self.tpm * self.target) if self.tpm else 0.0

    @property
    def token_burst(self) -> float:
        return self.burst_seconds if self.tpm else 0.0

    def token_cost(self, tokens: int) -> int:
        """Tokens charged for a call: ``tokens``, capped at one minute of budget so that
        no call waits more than a minute of budget (and none waits forever)."""
        if not self.tpm:
            return 0
        return max(0, min(int(tokens), math.floor(self.tpm * self.target)))


UNLIMITED = Budget()


def key_fingerprint(api_key: str) -> str:
    """A short, one-way tag of an API key: tells keys apart, reveals nothing usable."""
    return hashlib.sha256(b"flask-eval/limiter\0" + api_key.encode()).hexdigest()[:10]


def endpoint_key(
    provider: str,
    model: str,
    base_url: str | None = None,
    api_key: str | None = None,
    *,
    name: str | None = None,
) -> str:
    """The budget key of one endpoint: ``provider/model[@base_url][#fingerprint]``.

    Two API keys get two budgets (providers limit per key or organisation); the key
    itself never appears, only ``key_fingerprint``. ``name`` overrides the whole key,
    e.g. to make several keys of one organisation share a budget.
    """
    if name is not None:
        name = name.strip()
        if not name or len(name) > 200 or any(c.isspace() for c in name):
            raise ValueError(f"invalid budget name {name!r}")
        return name
    key = f"{provider}/{model}"
    if base_url:
        parts = urlsplit(base_url)  # keep scheme, host, port and path; never credentials
        host = parts.hostname or ""
        with contextlib.suppress(ValueError):  # an invalid port: leave it out
            host += f":{parts.port}" if parts.port else ""
        key += f"@{parts.scheme}://{host}{parts.path.rstrip('/')}"
    if api_key:
        key += f"#{key_fingerprint(api_key)}"
    return key


class LimiterError(JudgeError):
    """The shared budget could not be reached; retryable like a provider error."""

    def __init__(self, detail: str) -> None:
        super().__init__(FailureReason.PROVIDER_ERROR, f"rate limiter unavailable: {detail}")


@dataclass(frozen=True)
class Reservation:
    delay: float  # seconds to wait before sending
    blocked: float  # seconds left of a 429 block on the endpoint (0.0: none)
    at: float  # the reserved moment on the limiter's clock (seconds)


class Limiter(ABC):
    """Budgets per endpoint key; one instance per process, used from one event loop."""

    @abstractmethod
    async def acquire(self, key: str, tokens: int) -> None:
        """Return once one request and ``tokens`` estimated tokens may be sent."""

    @abstractmethod
    async def settle(self, key: str, estimated: int, actual: int) -> None:
        """Correct a call's token charge from ``estimated`` to ``actual``."""

    @abstractmethod
    async def penalize(self, key: str, seconds: float) -> None:
        """After a 429: nobody sends under ``key`` for ``seconds`` from now."""

    def register(self, key: str, budget: Budget) -> None:  # noqa: B027  (a default hook)
        """Give ``key`` its own budget (e.g. from a run's judge configuration)."""

    async def aclose(self) -> None:  # noqa: B027  (a default hook: nothing to release)
        """Release connections."""


class NullLimiter(Limiter):
    """No limits at all."""

    async def acquire(self, key: str, tokens: int) -> None:
        return None

    async def settle(self, key: str, estimated: int, actual: int) -> None:
        return None

    async def penalize(self, key: str, seconds: float) -> None:
        return None


class ReservingLimiter(Limiter):
    """``acquire`` = one atomic reservation + a local sleep; backends reserve."""

    def __init__(
        self,
        budgets: Mapping[str, Budget],
        *,
        max_penalty: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.budgets = dict(budgets)
        self.max_penalty = max_penalty
        self._clock = clock
        self._blocked: dict[str, float] = {}  # key -> end of a known block, on self._clock
        self.reservations = 0  # reserve() calls
        self.grants = 0  # acquire() calls that returned

    def register(self, key: str, budget: Budget) -> None:
        self.budgets[key] = budget

    def budget_for(self, key: str) -> Budget | None:
        """The entry of ``key``, else of ``key`` without its API-key fingerprint (so
        ``openai/gpt-5.4`` covers every key, each with its own state), else ``*``."""
        for candidate in (key, key.rpartition("#")[0], DEFAULT):
            if candidate and candidate in self.budgets:
                return self.budgets[candidate]
        return None

    @abstractmethod
    async def reserve(self, key: str, tokens: int) -> Reservation:
        """Commit one request + ``tokens`` (capped) under ``key``; say when to send."""

    @abstractmethod
    async def _correct(self, key: str, budget: Budget, tokens: int) -> None:
        """Add ``tokens`` (negative: give back) to the key's token dimension."""

    @abstractmethod
    async def _block(self, key: str, seconds: float) -> None:
        """Block ``key`` for everyone until now + ``seconds``."""

    def _watch_blocks(self) -> None:  # a default hook: here blocks are local
        """Learn the 429 blocks other processes share, without a round trip per call."""

    async def acquire(self, key: str, tokens: int) -> None:
        if self.budget_for(key) is None:
            await self._honour_blocks(key)
            return
        while True:
            wait = self._blocked_for(key)
            if wait > 0:  # a known block: do not even reserve before it ends
                await asyncio.sleep(wait)
            reservation = await self.reserve(key, tokens)
            if reservation.blocked > 0:
                self._note_block(key, reservation.blocked)
            if reservation.delay > 0:
                await asyncio.sleep(reservation.delay)
            if self._blocked_for(key) <= _BLOCK_TOLERANCE:
                self.grants += 1
                return
            # a 429 arrived while we slept and our moment falls inside its block
            log.debug("budget %s: blocked while waiting, reserving again", key)

    async def _honour_blocks(self, key: str) -> None:
        """No budget: the limiter is not asked (no round trip per call); only the 429
        blocks this process knows of apply: its own, and those other processes publish
        (``_watch_blocks``)."""
        self._watch_blocks()
        wait = self._blocked_for(key)
        if wait > 0:
            await asyncio.sleep(wait)
        self.grants += 1

    async def settle(self, key: str, estimated: int, actual: int) -> None:
        """Best effort, never raises: the call it settles is paid for already."""
        budget = self.budget_for(key)
        if budget is None or not budget.tpm:
            return
        delta = budget.token_cost(actual) - budget.token_cost(estimated)
        if delta < 0 and not budget.give_back:
            return
        if delta:
            try:
                await self._correct(key, budget, delta)
            except LimiterError as exc:
                log.warning("budget %s: correction of %+d tokens lost: %s", key, delta, exc)

    async def penalize(self, key: str, seconds: float) -> None:
        """Best effort, never raises: this process honours the block in any case."""
        seconds = min(max(float(seconds), 0.0), self.max_penalty)
        if seconds <= 0 or math.isnan(seconds):
            return
        self._note_block(key, seconds)
        try:
            await self._block(key, seconds)
        except LimiterError as exc:
            log.warning("budget %s: block of %.1fs not shared: %s", key, seconds, exc)

    def _note_block(self, key: str, seconds: float) -> None:
        now = self._clock()
        if len(self._blocked) > 256:
            self._blocked = {k: t for k, t in self._blocked.items() if t > now}
        self._blocked[key] = max(self._blocked.get(key, 0.0), now + seconds)

    def _blocked_for(self, key: str) -> float:
        until = self._blocked.get(key)
        return 0.0 if until is None else until - self._clock()


@dataclass
class _State:
    tat_r: float = -math.inf  # theoretical arrival time, requests
    tat_t: float = -math.inf  # theoretical arrival time, tokens
    blocked: float = -math.inf  # nobody sends before this


def gcra_reserve(state: _State, now: float, budget: Budget, tokens: int) -> Reservation:
    """The reservation arithmetic (seconds); ``limiter_lua.RESERVE`` is its twin.

    Each dimension may be sent at ``max(TAT, now) + cost - burst``; the call goes at the
    latest of those and of any block. Each TAT then advances by the cost, and by at
    least the cost (up to the burst) from the moment of sending, so that a call
    delayed by the other dimension or by a block is charged when it really goes.
    """
    int_r, burst_r = budget.request_interval, budget.request_burst
    int_t, burst_t = budget.token_interval, budget.token_burst
    tat_r = max(state.tat_r, now)
    tat_t = max(state.tat_t, now)
    inc_r, inc_t = int_r, budget.token_cost(tokens) * int_t
    burst_t = max(burst_t, inc_t)  # a call larger than the burst goes when the bucket is empty
    grant = max(now, state.blocked)
    if int_r:
        grant = max(grant, tat_r + inc_r - burst_r)
    if int_t:
        grant = max(grant, tat_t + inc_t - burst_t)
    if int_r:
        state.tat_r = max(tat_r + inc_r, grant + min(inc_r, burst_r))
    if int_t:
        state.tat_t = max(tat_t + inc_t, grant + min(inc_t, burst_t))
    return Reservation(grant - now, max(state.blocked - now, 0.0), grant)


class MemoryLimiter(ReservingLimiter):
    """The same budgets within one process (in-process mode, tests); ``clock`` may be
    replaced to test ``reserve_now`` deterministically."""

    def __init__(
        self,
        budgets: Mapping[str, Budget],
        *,
        max_penalty: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(budgets, max_penalty=max_penalty, clock=clock)
        self._states: dict[str, _State] = {}

    async def reserve(self, key: str, tokens: int) -> Reservation:
        return self.reserve_now(key, tokens)

    def reserve_now(self, key: str, tokens: int) -> Reservation:
        now = self._clock()
        self.reservations += 1
        if self.reservations % 1024 == 0:  # forget idle budgets, like the Redis TTL
            self._states = {
                k: s for k, s in self._states.items() if max(s.tat_r, s.tat_t, s.blocked) > now
            }
        state = self._states.setdefault(key, _State())
        return gcra_reserve(state, now, self.budget_for(key) or UNLIMITED, tokens)

    async def _correct(self, key: str, budget: Budget, tokens: int) -> None:
        now = self._clock()
        state = self._states.setdefault(key, _State())
        state.tat_t = max(max(state.tat_t, now) + tokens * budget.token_interval, now)

    async def _block(self, key: str, seconds: float) -> None:
        state = self._states.setdefault(key, _State())
        state.blocked = max(state.blocked, self._clock() + seconds)
