"""Shared budgets: the GCRA arithmetic (MemoryLimiter, a fake clock), then real Redis
with several OS processes whose grant times are checked from the outside."""

from __future__ import annotations

import asyncio
import heapq
import json
import multiprocessing
import os
import random
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from flask_eval.workers.limiter import (
    Budget,
    LimiterError,
    MemoryLimiter,
    NullLimiter,
    Reservation,
    endpoint_key,
    key_fingerprint,
)
from flask_eval.workers.limiter_redis import RedisLimiter
from tests.helpers import wait_until

LIMITER_REDIS_URL = os.environ.get(
    "FLASK_EVAL_TEST_LIMITER_REDIS_URL",
    os.environ.get("FLASK_EVAL_TEST_REDIS_URL", "redis://127.0.0.1:6379/14"),
)
#: how long a spawned grant process waits to be told the start time
GO_TIMEOUT_S = 240.0
KEY = "openai/gpt-test#0123456789"
run = asyncio.run


def approx(expected: Any, abs: float = 1e-6) -> Any:
    return pytest.approx(expected, abs=abs)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def max_in_window(times: Sequence[float], window: float, weights: Sequence[float] = ()) -> float:
    """The largest total (count, or sum of ``weights``) within any closed ``window``."""
    pairs = sorted(zip(times, weights or [1.0] * len(times), strict=True))
    best = total = 0.0
    lo = 0
    for t, w in pairs:
        total += w
        while pairs[lo][0] < t - window:
            total -= pairs[lo][1]
            lo += 1
        best = max(best, total)
    return best


# --- the arithmetic, on a fake clock -------------------------------------------------------


def test_requests_are_spaced_by_the_interval_after_the_burst() -> None:
    clock = FakeClock()
    limiter = MemoryLimiter({KEY: Budget(rpm=600, target=1.0, burst_seconds=1.0)}, clock=clock)
    delays = [limiter.reserve_now(KEY, 0).delay for _ in range(25)]
    # a burst of 10 (1 s at 10/s) goes at once, then one every 0.1 s
    assert delays == approx([max(0.0, (k - 9) * 0.1) for k in range(25)])


def test_burst_is_at_least_one_request() -> None:
    clock = FakeClock()
    limiter = MemoryLimiter({KEY: Budget(rpm=6, target=1.0, burst_seconds=0)}, clock=clock)
    assert [limiter.reserve_now(KEY, 0).delay for _ in range(3)] == approx([0, 10, 20])


def test_target_lowers_the_sustained_rate() -> None:
    clock = FakeClock()
    limiter = MemoryLimiter({KEY: Budget(rpm=100, target=0.5, burst_seconds=0)}, clock=clock)
    assert [limiter.reserve_now(KEY, 0).delay for _ in range(3)] == approx([0, 1.2, 2.4])


def test_idle_time_refills_only_up_to_the_burst() -> None:
    clock = FakeClock()
    limiter = MemoryLimiter({KEY: Budget(rpm=600, target=1.0, burst_seconds=0.5)}, clock=clock)
    for _ in range(20):
        limiter.reserve_now(KEY, 0)
    clock.now += 3600  # an hour idle: still only a burst of 5
    delays = [limiter.reserve_now(KEY, 0).delay for _ in range(8)]
    assert delays == approx([0, 0, 0, 0, 0, 0.1, 0.2, 0.3])


def simulate(budget: Budget, clients: int, seconds: float, cost: int = 0) -> list[float]:
    """Grant times of ``clients`` callers that reserve again 50-500 ms after each grant."""
    rng = random.Random(7)
    clock = FakeClock()
    limiter = MemoryLimiter({KEY: budget}, clock=clock)
    start = clock.now
    queue = [(start + rng.uniform(0, 1), i) for i in range(clients)]
    grants: list[float] = []
    while queue:
        clock.now, i = heapq.heappop(queue)
        at = limiter.reserve_now(KEY, cost).at
        if at - start < seconds:
            grants.append(at - start)
            heapq.heappush(queue, (at + rng.uniform(0.05, 0.5), i))
    return grants


def test_no_sliding_minute_holds_more_than_the_limit() -> None:
    grants = simulate(Budget(rpm=120), clients=200, seconds=600)
    assert max_in_window(grants, 60.0) <= 120
    steady = [t for t in grants if t >= 60]
    assert len(steady) / 540 * 60 >= 0.95 * 120


def test_tokens_dimension_holds_the_token_rate() -> None:
    clock = FakeClock()
    budget = Budget(tpm=6000, target=1.0, burst_seconds=0)  # 100 tokens/s
    limiter = MemoryLimiter({KEY: budget}, clock=clock)
    # a call larger than the burst goes on an empty bucket, the next one waits for it
    assert [limiter.reserve_now(KEY, 500).delay for _ in range(3)] == approx([0, 5, 10])
    grants = simulate(Budget(rpm=10_000, tpm=60_000), clients=100, seconds=300, cost=400)
    assert max_in_window(grants, 60.0) * 400 <= 60_000
    assert len([t for t in grants if t >= 60]) * 400 / 240 * 60 >= 0.95 * 60_000


def test_a_call_never_costs_more_than_a_minute_of_budget() -> None:
    clock = FakeClock()
    limiter = MemoryLimiter({KEY: Budget(tpm=1000, target=1.0)}, clock=clock)
    assert limiter.reserve_now(KEY, 10**9).delay == 0
    assert limiter.reserve_now(KEY, 10**9).delay == approx(60)  # not 10**9 minutes


def test_both_dimensions_are_reserved_and_the_later_one_wins() -> None:
    clock = FakeClock()
    budget = Budget(rpm=60, tpm=600, target=1.0, burst_seconds=0)  # 1 req/s, 10 tokens/s
    limiter = MemoryLimiter({KEY: budget}, clock=clock)
    assert limiter.reserve_now(KEY, 5).delay == 0
    assert limiter.reserve_now(KEY, 5).delay == approx(1.0)  # requests bind
    # 50 tokens (5 s) exceed the burst: they go once the token bucket is empty (1.5 s);
    # the requests dimension is later still
    assert limiter.reserve_now(KEY, 50).delay == approx(2.0)
    assert limiter.reserve_now(KEY, 5).delay == approx(7.0)  # tokens bind: 2 + 5
    # that request was charged when it really went (7 s), not when it was reserved
    assert limiter.reserve_now(KEY, 0).delay == approx(8.0)


def test_settle_gives_back_and_charges() -> None:
    clock = FakeClock()
    budget = Budget(tpm=6000, target=1.0, burst_seconds=0)
    limiter = MemoryLimiter({KEY: budget}, clock=clock)
    assert limiter.reserve_now(KEY, 500).delay == 0  # the bucket is busy until +5 s
    run(limiter.settle(KEY, estimated=500, actual=100))  # give back 400: busy until +1 s
    assert limiter.reserve_now(KEY, 100).delay == approx(1.0)
    run(limiter.settle(KEY, estimated=100, actual=400))  # charge 300 more: +3 s
    assert limiter.reserve_now(KEY, 100).delay == approx(5.0)
    run(limiter.settle(KEY, estimated=10**6, actual=0))  # a give-back never creates credit
    assert limiter.reserve_now(KEY, 100).delay == 0
    assert limiter.reserve_now(KEY, 100).delay == approx(1.0)


def test_settle_only_charges_when_the_provider_counts_the_estimate() -> None:
    clock = FakeClock()
    budget = Budget(tpm=6000, target=1.0, burst_seconds=0, give_back=False)
    limiter = MemoryLimiter({KEY: budget}, clock=clock)
    limiter.reserve_now(KEY, 500)
    run(limiter.settle(KEY, estimated=500, actual=100))  # nothing given back
    assert limiter.reserve_now(KEY, 100).delay == approx(5.0)
    run(limiter.settle(KEY, estimated=100, actual=400))  # but more is charged
    assert limiter.reserve_now(KEY, 100).delay == approx(9.0)


def test_penalize_delays_everyone_then_resumes_at_the_rate() -> None:
    clock = FakeClock()
    limiter = MemoryLimiter({KEY: Budget(rpm=600, target=1.0, burst_seconds=0)}, clock=clock)
    run(limiter.penalize(KEY, 10))
    clock.now += 1
    delays = [limiter.reserve_now(KEY, 0).delay for _ in range(3)]
    assert delays == approx([9.0, 9.1, 9.2])  # no herd when the block ends
    run(limiter.penalize("other", 1000))
    assert limiter.reserve_now("other", 0).delay == approx(300)  # max_penalty


def test_penalize_blocks_endpoints_without_a_budget() -> None:
    clock = FakeClock()
    limiter = MemoryLimiter({}, clock=clock)
    assert limiter.reserve_now(KEY, 10).delay == 0
    run(limiter.penalize(KEY, 4))
    assert limiter.reserve_now(KEY, 10).delay == approx(4)


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock moves only when every task waits for a timer: it jumps
    to the next one. A sleep takes no real time and never ends late, so what happens at
    which moment does not depend on how busy the machine is."""

    def __init__(self) -> None:
        super().__init__()
        self._now = 0.0
        select = self._selector.select  # type: ignore[attr-defined]

        def jump(timeout: float | None = None) -> Any:
            if timeout:  # nothing to run before the next timer: it is due now
                self._now += timeout
            return select(None if timeout is None else 0)

        self._selector.select = jump  # type: ignore[attr-defined]

    def time(self) -> float:
        return self._now


def test_acquire_sleeps_and_reserves_again_when_blocked_meanwhile() -> None:
    async def go() -> tuple[list[float], float, MemoryLimiter]:
        clock = asyncio.get_running_loop().time  # the limiter's clock is the loop's
        limiter = MemoryLimiter({KEY: Budget(rpm=600, target=1.0, burst_seconds=0)}, clock=clock)
        start = clock()
        woke: list[float] = []

        async def call() -> None:
            await limiter.acquire(KEY, 0)
            woke.append(clock() - start)

        tasks = [asyncio.create_task(call()) for _ in range(5)]  # reserved for 0, .1 ... .4 s
        async with asyncio.timeout(10):
            while limiter.reservations < len(tasks):  # polling: until every caller reserved
                await asyncio.sleep(0)
        penalized = clock() - start  # before the second reservation's 0.1 s
        await limiter.penalize(KEY, 0.5)  # a 429: nobody before penalized + 0.5 s
        await asyncio.gather(*tasks)
        return sorted(woke), penalized, limiter

    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        woke, penalized, limiter = runner.run(go())
    assert penalized < 0.1
    # the first went at once, before the 429; the four others woke inside the block,
    # reserved again and went after it, at the rate (one every 0.1 s)
    assert woke == approx([0, penalized + 0.5, penalized + 0.6, penalized + 0.7, penalized + 0.8])
    assert limiter.grants == 5 and limiter.reservations == 9


def test_null_limiter_limits_nothing() -> None:
    async def go() -> None:
        limiter = NullLimiter()
        for _ in range(1000):
            await limiter.acquire(KEY, 10**6)
        await limiter.penalize(KEY, 60)
        await limiter.settle(KEY, 1, 2)
        await limiter.aclose()

    run(go())


def test_budget_validation() -> None:
    for bad in ({"rpm": 0}, {"tpm": -1}, {"target": 0}, {"target": 1.5}, {"burst_seconds": -1}):
        with pytest.raises(ValueError):
            Budget(**bad)  # type: ignore[arg-type]


# --- endpoint keys and configuration -------------------------------------------------------


def test_endpoint_key_tells_api_keys_apart_without_revealing_them() -> None:
    secret = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
    a = endpoint_key("openai", "gpt-5.4", None, secret)
    b = endpoint_key("openai", "gpt-5.4", None, secret + "x")
    assert a != b and a.startswith("openai/gpt-5.4#")
    assert secret not in a and secret[:12] not in a and len(key_fingerprint(secret)) == 10
    assert endpoint_key("openai", "gpt-5.4") == "openai/gpt-5.4"
    url = endpoint_key("openai", "m", "http://user:pw@Host:8000/v1/", None)
    assert url == "openai/m@http://host:8000/v1"
    assert endpoint_key("openai", "gpt-5.4", None, secret, name="org-a") == "org-a"
    with pytest.raises(ValueError):
        endpoint_key("openai", "gpt-5.4", name="two words")


def test_budget_lookup() -> None:
    budgets = {
        "openai/gpt-5.4": Budget(rpm=500, tpm=30000, give_back=False),
        "openai/m@http://h:8000/v1": Budget(rpm=60, burst_seconds=0.5),
        "*": Budget(rpm=10),
    }
    limiter = MemoryLimiter(budgets)
    # a judge name covers every API key of that judge, each key with its own state
    budget = limiter.budget_for(endpoint_key("openai", "gpt-5.4", None, "k1"))
    assert budget == budgets["openai/gpt-5.4"]
    url_key = endpoint_key("openai", "m", "http://h:8000/v1/", "k1")
    assert limiter.budget_for(url_key) == budgets["openai/m@http://h:8000/v1"]
    assert limiter.budget_for("anthropic/claude#abc") == Budget(rpm=10)  # "*"
    assert MemoryLimiter({}).budget_for("anthropic/claude") is None
    limiter.register("anthropic/claude#abc", Budget(rpm=5))  # e.g. from a judges file
    assert limiter.budget_for("anthropic/claude#abc") == Budget(rpm=5)
    NullLimiter().register("x", Budget(rpm=5))


# --- real Redis, real processes ------------------------------------------------------------


@pytest.fixture
def limiter_redis() -> Iterator[str]:
    """Redis db 14, flushed before and after."""
    import redis

    client = redis.Redis.from_url(LIMITER_REDIS_URL)
    try:
        client.ping()
    except Exception as exc:
        if os.environ.get("CI"):
            pytest.fail(f"Redis unavailable in CI: {exc}")
        pytest.skip(f"Redis unavailable: {exc}")
    client.flushdb()
    yield LIMITER_REDIS_URL
    client.flushdb()
    client.close()


def evalsha_calls(url: str) -> int:
    import redis

    client = redis.Redis.from_url(url)
    try:
        stats = client.info("commandstats").get("cmdstat_evalsha", {})
        return int(stats.get("calls", 0))
    finally:
        client.close()


def grant_worker(config: dict[str, Any]) -> None:
    """One OS process: ``coroutines`` callers acquire from the common start (wall clock,
    read from the ``go`` file once this process said it is ``ready``) for ``seconds``;
    writes each grant's wake-up time (what a provider would see) and reserved moment (on
    Redis's clock), and counters, to ``config["out"]``. A grant reserved before the end
    counts however late this process wakes for it."""

    async def main() -> dict[str, Any]:
        budget = Budget(**config["budget"])
        limiter = RedisLimiter(config["url"], {KEY: budget})
        rng = random.Random(os.getpid())
        grants: list[tuple[float, float, int]] = []
        cancelled = 0
        reserved: dict[asyncio.Task[Any] | None, float] = {}  # caller -> its last moment
        reserve = limiter.reserve

        async def noting(key: str, tokens: int) -> Reservation:
            reservation = await reserve(key, tokens)
            reserved[asyncio.current_task()] = reservation.at
            return reservation

        limiter.reserve = noting  # type: ignore[method-assign]
        Path(config["ready"]).touch()  # up and imported: the parent may start the clock
        go, given_up = Path(config["go"]), time.monotonic() + GO_TIMEOUT_S
        while not go.exists():  # polling; the parent writes it once every process is ready
            if time.monotonic() > given_up:
                raise TimeoutError(f"no start time in {go} after {GO_TIMEOUT_S}s")
            await asyncio.sleep(0.01)
        start = float(json.loads(go.read_text())["start"])
        config["end"] = start + config["seconds"]
        await asyncio.sleep(max(0.0, start - time.time()))

        async def caller() -> None:
            nonlocal cancelled
            while True:
                estimate = config.get("estimate", 0)
                try:
                    await limiter.acquire(KEY, estimate)
                except asyncio.CancelledError:  # a reservation still pending at the end
                    cancelled += 1
                    raise
                woke, at = time.time(), reserved[asyncio.current_task()]
                if at >= config["end"]:
                    return
                low, high = config.get("actual", (estimate, estimate))
                actual = rng.randint(low, high)
                grants.append((woke, at, actual))
                await asyncio.sleep(rng.uniform(*config.get("latency", (0.01, 0.05))))
                if config.get("settle"):
                    await limiter.settle(KEY, estimate, actual)

        tasks = [asyncio.create_task(caller()) for _ in range(config["coroutines"])]
        await asyncio.sleep(max(0.0, config["end"] - time.time()))
        # then until every caller has ended or holds a moment past the end (a deadline,
        # however late this process runs)
        given_up = time.monotonic() + GO_TIMEOUT_S
        while not all(t.done() or reserved.get(t, 0.0) >= config["end"] for t in tasks):
            if time.monotonic() > given_up:
                raise TimeoutError(f"callers still before the end after {GO_TIMEOUT_S}s")
            await asyncio.sleep(0.05)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await limiter.aclose()
        return {
            "grants": grants,
            "script_calls": limiter.script_calls,
            "acquired": limiter.grants + cancelled,
        }

    result = asyncio.run(main())
    Path(config["out"]).write_text(json.dumps(result))


def run_processes(
    url: str,
    tmp_path: Path,
    budget: Mapping[str, float],
    seconds: float,
    n: int = 2,
    coroutines: int = 50,
    *,
    before_start: Callable[[], object] | None = None,
    lead: float = 0.5,
    **extra: Any,
) -> tuple[list[float], list[int], dict[str, int], float]:
    """Start ``n`` spawned processes x ``coroutines``; return the grants' reserved moments
    (seconds from the start, on Redis's clock, in order), their actual tokens, counters
    and the common start time. No grant woke before its moment.

    The limits are checked on the reserved moments: they are what the limiter decides, on
    the one clock every process shares. A wake-up is late by however long a loaded
    machine keeps the process from running, and late ones bunch: the limiter cannot help
    that, and the test does not measure it.

    The clock starts once every interpreter is up (however long that takes on a loaded
    machine), ``lead`` seconds after ``before_start()`` has run."""
    ctx = multiprocessing.get_context("spawn")
    go = tmp_path / "go.json"
    configs = [
        {
            "url": url,
            "budget": dict(budget),
            "coroutines": coroutines,
            "seconds": seconds,
            "ready": str(tmp_path / f"ready-{i}"),
            "go": str(go),
            "out": str(tmp_path / f"grants-{i}.json"),
            **extra,
        }
        for i in range(n)
    ]
    procs = [ctx.Process(target=grant_worker, args=(c,)) for c in configs]
    for p in procs:
        p.start()
    _, died = wait_until(
        lambda: (
            sum(Path(c["ready"]).exists() for c in configs),
            [p.exitcode for p in procs if p.exitcode is not None],
        ),
        lambda seen: seen[0] == n or bool(seen[1]),
        timeout=GO_TIMEOUT_S / 2,
        what=f"{n} processes to start",
    )
    assert not died, f"a process exited before the start: {died}"
    if before_start is not None:
        before_start()
    start = time.time() + lead
    written = go.with_suffix(".tmp")
    written.write_text(json.dumps({"start": start}))
    os.replace(written, go)  # whole, never half-written
    for p in procs:
        p.join(lead + seconds + 2 * GO_TIMEOUT_S)  # a deadline: each waits at most that
        assert p.exitcode == 0
    results = [json.loads(Path(c["out"]).read_text()) for c in configs]
    assert all(r["grants"] for r in results), f"every process got grants: {results}"
    grants = sorted((at, woke, a) for r in results for woke, at, a in r["grants"])
    # 0.01 s: the sleep runs on the monotonic clock, Redis's TIME on the wall clock (the
    # same host's), which NTP may slew by up to 0.05 %: 5 ms over a 10 s wait
    early = [(woke, at) for at, woke, _ in grants if woke < at - 0.01]
    assert not early, f"woke before the reserved moment: {early[:5]}"
    counters = {
        "script_calls": sum(r["script_calls"] for r in results),
        "acquired": sum(r["acquired"] for r in results),
    }
    return [at - start for at, _, _ in grants], [a for _, _, a in grants], counters, start


@pytest.mark.redis
@pytest.mark.slow
@pytest.mark.serial
def test_two_processes_share_one_request_budget(limiter_redis: str, tmp_path: Path) -> None:
    before = evalsha_calls(limiter_redis)
    budget = Budget(rpm=600)  # 9.7/s sustained, bursts of 1 s
    times, _, counters, _ = run_processes(limiter_redis, tmp_path, {"rpm": 600}, seconds=15)
    calls = evalsha_calls(limiter_redis) - before
    rate = 600 * budget.target / 60
    burst = budget.request_burst * rate
    for window in (0.5, 1, 2, 5, 10, 15):
        # +1: a closed window can hold a grant at each of its ends
        assert max_in_window(times, window) <= rate * window + burst + 1, window
    steady = [t for t in times if t >= 2]
    achieved = len(steady) / 13 / 10  # of the stated 10/s
    per_grant = counters["script_calls"] / counters["acquired"]
    print(
        f"\n600 rpm, 2 processes x 50: achieved/limit {achieved:.3f}, max in 1 s "
        f"{max_in_window(times, 1)}, script calls/grant {per_grant:.3f}, evalsha {calls}"
    )
    assert achieved >= 0.95
    assert per_grant <= 1.02


@pytest.mark.redis
@pytest.mark.slow
@pytest.mark.serial
def test_token_budget_with_settle_across_processes(limiter_redis: str, tmp_path: Path) -> None:
    # estimates of 600 tokens, 150-450 really used: settle gives ~half back
    # (fewer callers: each holds one reservation, and 600-token estimates queue up fast)
    budget = {"rpm": 100_000, "tpm": 300_000}
    times, actual, counters, _ = run_processes(
        limiter_redis,
        tmp_path,
        budget,
        seconds=25,
        coroutines=20,
        estimate=600,
        actual=(150, 450),
        settle=True,
    )
    per_second = 300_000 * 0.97 / 60
    for window in (1, 5, 10, 20):
        # settle charges nothing more here (actual < estimate); bursts of 1 s + one call
        assert max_in_window(times, window, actual) <= per_second * (window + 1) + 600, window
    used = sum(a for t, a in zip(times, actual, strict=True) if t >= 10) / 15
    per_grant = counters["script_calls"] / counters["acquired"]
    print(
        f"\ntpm 300000 with settle: used/limit {used / 5000:.3f}, max tokens in any 1 s "
        f"{max_in_window(times, 1, actual):.0f} (bound {per_second * 2 + 600:.0f}), "
        f"script calls/grant {per_grant:.3f}"
    )
    assert used >= 0.9 * per_second  # estimates alone would allow only ~0.5 of it
    assert per_grant <= 1.02  # give-backs ride along with the next reservation


@pytest.mark.redis
@pytest.mark.serial
def test_penalize_in_one_process_delays_another(limiter_redis: str, tmp_path: Path) -> None:
    async def penalize() -> float:
        limiter = RedisLimiter(limiter_redis, {KEY: Budget(rpm=6000)})
        try:
            await limiter.acquire(KEY, 0)
            penalized = time.time()
            await limiter.penalize(KEY, 6.0)
            return penalized
        finally:
            await limiter.aclose()

    # another process, ready before the block, starts 3 s into it and must wait it out
    blocks: list[float] = []
    times, _, _, start = run_processes(
        limiter_redis,
        tmp_path,
        {"rpm": 6000},
        seconds=5,
        n=1,
        before_start=lambda: blocks.append(run(penalize())),
        lead=3.0,
    )
    (penalized,) = blocks
    assert start < penalized + 6.0, "the process started after the block"
    first = start + min(times)  # reserved on Redis's clock; nobody woke before it
    print(f"\nblocked 6 s by another process: first grant after {first - penalized:.3f} s")
    assert first >= penalized + 6.0 - 0.001  # the block is from Redis's TIME, after `penalized`
    assert first < max(penalized + 6.0, start) + 0.5  # and not much longer


@pytest.mark.redis
def test_redis_reservations_expire_and_count_one_call(limiter_redis: str) -> None:
    async def go() -> tuple[list[float], int, float, list[str]]:
        import redis.asyncio as aredis

        # one request every 10 s: the five reservations are queued one after another
        # however long each round trip takes on a loaded machine
        budget = Budget(rpm=6, target=1.0, burst_seconds=0)
        limiter = RedisLimiter(limiter_redis, {KEY: budget})
        try:
            ats = [(await limiter.reserve(KEY, 0)).at for _ in range(5)]
            delays = [at - ats[0] for at in ats]
            client = aredis.Redis.from_url(limiter_redis)
            async with client.pipeline(transaction=True) as pipe:  # at one moment of Redis
                pipe.time()
                pipe.pttl(f"flask_eval:rl:{KEY}")
                (seconds, micros), ttl = await pipe.execute()
            expires = seconds + micros / 1e6 + ttl / 1000 - ats[0]
            keys = [k.decode() async for k in client.scan_iter()]
            await client.aclose()
            return delays, limiter.script_calls, expires, keys
        finally:
            await limiter.aclose()

    delays, calls, expires, keys = run(go())
    assert delays == approx([0, 10, 20, 30, 40], abs=0.001)
    assert calls == 5
    assert expires == approx(50 + 1, abs=0.01)  # the last reservation (+10 s) + 1 s
    assert keys == [f"flask_eval:rl:{KEY}"]  # the key name holds no secret, just the tag


@pytest.mark.redis
def test_settle_give_backs_ride_along_and_charges_go_at_once(limiter_redis: str) -> None:
    async def go() -> None:
        budget = Budget(tpm=600, target=1.0, burst_seconds=0)  # 10 tokens/s
        limiter = RedisLimiter(limiter_redis, {KEY: budget})
        # reserved moments on Redis's clock, 10 s and more apart: independent of how slow
        # this host is (each reservation is made long before the moment it gets)
        try:
            first = (await limiter.reserve(KEY, 500)).at  # the bucket is busy for 50 s
            await limiter.settle(KEY, 500, 100)  # -400 tokens: kept for the next reservation
            assert limiter.script_calls == 1
            assert (await limiter.reserve(KEY, 100)).at - first == approx(10.0, abs=0.001)
            assert limiter.script_calls == 2
            await limiter.settle(KEY, 100, 400)  # +300: sent now
            assert limiter.script_calls == 3
            assert (await limiter.reserve(KEY, 100)).at - first == approx(50.0, abs=0.001)
        finally:
            await limiter.aclose()

    run(go())


def test_unreachable_redis_is_a_retryable_limiter_error() -> None:
    async def go() -> None:
        limiter = RedisLimiter("redis://127.0.0.1:1/0", {KEY: Budget(rpm=60)})
        try:
            with pytest.raises(LimiterError) as info:
                await limiter.acquire(KEY, 0)
            assert info.value.reason == "provider_error"  # retried by the executor's loop
            # settle and penalize follow a paid call or a 429: they log, never raise
            await limiter.settle(KEY, 100, 500)
            await limiter.penalize(KEY, 5)
            with pytest.raises(TimeoutError):  # this process still honours its own block
                await asyncio.wait_for(limiter.acquire(KEY, 0), 0.5)
        finally:
            await limiter.aclose()

    run(go())


@pytest.mark.redis
def test_without_a_budget_redis_is_not_asked_yet_shared_blocks_apply(limiter_redis: str) -> None:
    """No budget: no script call per acquire (under load each one could time out and be
    logged as "rate limiter unavailable"); a 429 block another process shares still
    holds this one back, learnt from the blocks channel."""
    import redis

    # a prefix of its own: a Redis channel is seen from every database, and other tests'
    # limiters (and workers) subscribe to the default one, which would pass the wait below
    # before this limiter is listening
    prefix = f"test-{uuid.uuid4().hex[:8]}:rl:"
    channel = f"{prefix}blocks"

    async def go() -> tuple[int, float]:
        quiet = RedisLimiter(limiter_redis, {}, prefix)
        other = RedisLimiter(limiter_redis, {}, prefix)
        try:
            for _ in range(200):
                await quiet.acquire(KEY, 100)
            client = redis.Redis.from_url(limiter_redis)
            async with asyncio.timeout(30):  # until its blocks channel is subscribed
                while not dict(client.pubsub_numsub(channel)).get(channel.encode()):
                    await asyncio.sleep(0.05)
            client.close()
            started = time.monotonic()  # before the block: its 2 s start after this
            await other.penalize(KEY, 2.0)  # a 429 seen by another process
            async with asyncio.timeout(30):
                while quiet._blocked_for(KEY) <= 0:  # the published block arrives
                    await asyncio.sleep(0.01)
            await quiet.acquire(KEY, 100)
            return quiet.script_calls, time.monotonic() - started
        finally:
            await quiet.aclose()
            await other.aclose()

    calls, waited = run(go())
    assert calls == 0
    assert waited >= 1.9  # held back by the other process's block (2 s from its 429)


@pytest.mark.redis
def test_a_reply_read_late_because_the_worker_was_busy_is_not_unavailable(
    limiter_redis: str,
) -> None:
    """The worker's event loop stalls 6 s (a loaded host) while Redis's reply is on its
    way: the reply is read when the loop comes back, not reported as a TimeoutError."""
    from redis.connection import parse_url

    from tests.proxy import CuttableProxy

    target = parse_url(limiter_redis)
    proxy = CuttableProxy(
        (target.get("host", "127.0.0.1"), target.get("port", 6379)), reply_delay=0.3
    )
    url = f"redis://127.0.0.1:{proxy.port}/{target.get('db', 0)}"

    async def go() -> float:
        limiter = RedisLimiter(url, {KEY: Budget(rpm=6000)})
        try:
            await limiter.reserve(KEY, 0)  # connected
            started = time.monotonic()
            sent = asyncio.create_task(limiter.reserve(KEY, 0))
            await asyncio.sleep(0.1)  # sent; the reply is held back 0.3 s by the proxy
            time.sleep(6)  # the loop is busy elsewhere past redis-py's default timeout (5 s)
            await sent
            return time.monotonic() - started
        finally:
            await limiter.aclose()

    try:
        took = run(go())
    finally:
        proxy.close()
    assert took >= 6
