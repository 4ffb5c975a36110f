"""The budgets' real backend: shared by every worker process through Redis."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Mapping
from typing import Any

from flask_eval.workers import limiter_lua
from flask_eval.workers.limiter import (
    UNLIMITED,
    Budget,
    LimiterError,
    Reservation,
    ReservingLimiter,
)

log = logging.getLogger("flask_eval.limiter")

#: seconds closing a connection or the blocks channel may take before it is let go
CLOSE_TIMEOUT = 2.0
#: seconds a reply may take to be read once a command is sent. redis-py's default (5 s)
#: counts the time the worker's own event loop is busy elsewhere: a loaded worker stalled
#: 2-3 s at times (measured), and a reply that sat in the socket through a longer stall
#: was reported as "rate limiter unavailable: TimeoutError" although Redis had answered
#: in a millisecond. A Redis that is really gone still fails this fast when it refuses or
#: resets the connection; only a silent one costs the whole timeout.
SOCKET_TIMEOUT = 30.0
#: seconds a new connection may take (a refused one fails at once)
CONNECT_TIMEOUT = 10.0
#: seconds between two attempts to subscribe to the blocks channel after it was lost
RESUBSCRIBE_SECONDS = 5.0


class RedisLimiter(ReservingLimiter):
    """Budgets shared by every process through Redis: one script call per grant.

    Give-backs from ``settle`` wait in the process and ride along with the key's next
    reservation; extra charges (a call larger than its estimate) are sent at once.
    """

    def __init__(
        self,
        url: str,
        budgets: Mapping[str, Budget],
        prefix: str = "flask_eval:rl:",
        *,
        max_connections: int = 16,
        max_penalty: float = 300.0,
    ) -> None:
        from redis.asyncio import BlockingConnectionPool, Redis

        super().__init__(budgets, max_penalty=max_penalty)
        self.prefix = prefix
        # No wait limit for a free connection: every connection in use is released when
        # its reply is read or its own timeout fires, so a full pool is only busy, and a
        # caller waiting for it must not be told Redis is unavailable.
        self._pool = BlockingConnectionPool.from_url(
            url,
            max_connections=max_connections,
            timeout=None,
            socket_timeout=SOCKET_TIMEOUT,
            socket_connect_timeout=CONNECT_TIMEOUT,
        )
        self._redis = Redis(connection_pool=self._pool)
        self._reserve = self._redis.register_script(limiter_lua.RESERVE)
        self._adjust = self._redis.register_script(limiter_lua.ADJUST)
        self._pending: dict[str, int] = {}  # token give-backs not yet sent, per key
        self.script_calls = 0
        # 429 blocks are also published, so a process whose coroutines all sleep on
        # earlier reservations learns of them at once instead of at its next reply.
        self._channel = prefix + "blocks"
        self._listener: asyncio.Task[None] | None = None
        self._subscribed_at = -math.inf  # loop time of the last attempt to subscribe
        self._channel_ok = True  # False once lost: said once, until it works again

    def _watch_blocks(self) -> None:
        """Keep the blocks channel subscribed (at most one attempt every few seconds
        while it cannot be)."""
        if self._listener is not None and not self._listener.done():
            return
        loop = asyncio.get_running_loop()
        if loop.time() - self._subscribed_at < RESUBSCRIBE_SECONDS:
            return
        self._subscribed_at = loop.time()
        self._listener = loop.create_task(self._listen())

    async def reserve(self, key: str, tokens: int) -> Reservation:
        self._watch_blocks()
        budget = self.budget_for(key) or UNLIMITED
        adjust = self._pending.pop(key, 0)
        args = (
            budget.request_interval * 1e6,
            budget.request_burst * 1e6,
            budget.token_interval * 1e6,
            budget.token_burst * 1e6,
            budget.token_cost(tokens),
            adjust,
        )
        try:
            reply = await self._call(self._reserve, key, args)
        except BaseException:
            if adjust:
                self._pending[key] = self._pending.get(key, 0) + adjust
            raise
        self.reservations += 1
        delay_us, blocked_us, at_us = (int(v) for v in reply)
        return Reservation(delay_us / 1e6, blocked_us / 1e6, at_us / 1e6)

    async def _correct(self, key: str, budget: Budget, tokens: int) -> None:
        total = self._pending.pop(key, 0) + tokens
        if total > 0:
            await self._call(self._adjust, key, (budget.token_interval * 1e6, total, 0))
        elif total:
            self._pending[key] = total

    async def _block(self, key: str, seconds: float) -> None:
        budget = self.budget_for(key) or UNLIMITED
        adjust = self._pending.pop(key, 0)
        await self._call(self._adjust, key, (budget.token_interval * 1e6, adjust, seconds * 1e6))
        from redis.exceptions import RedisError

        try:
            await self._redis.publish(self._channel, f"{key}\t{seconds}")
        except RedisError as exc:
            raise LimiterError(f"{type(exc).__name__}: {exc}") from exc

    async def _listen(self) -> None:
        """Note every block another process publishes (restarted by the next reserve
        if the connection drops)."""
        pubsub = self._redis.pubsub()
        try:
            await pubsub.subscribe(self._channel)
            if not self._channel_ok:
                log.warning("budget blocks channel back")
                self._channel_ok = True
            async for message in pubsub.listen():
                if message.get("type") != "message":
                    continue
                data = message["data"]
                key, _, seconds = (
                    data.decode() if isinstance(data, bytes) else str(data)
                ).rpartition("\t")
                with contextlib.suppress(ValueError):
                    self._note_block(key, min(float(seconds), self.max_penalty))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the reservations still carry blocks: degrade, not fail
            if self._channel_ok:
                log.warning("budget blocks channel lost: %s", exc)
            self._channel_ok = False
        finally:
            with contextlib.suppress(Exception):  # never wait long on a dropped channel
                await asyncio.wait_for(pubsub.aclose(), CLOSE_TIMEOUT)  # type: ignore[no-untyped-call]

    async def _call(self, script: Any, key: str, args: tuple[float, ...]) -> Any:
        from redis.exceptions import RedisError

        self.script_calls += 1
        try:
            return await script(keys=[self.prefix + key], args=args)
        except RedisError as exc:
            raise LimiterError(f"{type(exc).__name__}: {exc}") from exc

    async def aclose(self) -> None:
        """Send the pending give-backs (best effort) and close the connections."""
        for key, tokens in list(self._pending.items()):
            budget = self.budget_for(key)
            if budget is not None and budget.tpm:
                try:
                    await self._call(self._adjust, key, (budget.token_interval * 1e6, tokens, 0))
                except LimiterError as exc:
                    log.warning("budget %s: give-back of %d tokens lost: %s", key, tokens, exc)
        self._pending.clear()
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._listener, CLOSE_TIMEOUT)
        with contextlib.suppress(Exception):  # a connection stuck mid-reply: let it go
            await asyncio.wait_for(self._redis.aclose(), CLOSE_TIMEOUT)
            await asyncio.wait_for(self._pool.disconnect(), CLOSE_TIMEOUT)
