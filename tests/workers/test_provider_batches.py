"""Anthropic's Message Batches and Gemini's batch mode: our adapters (workers/providers/
*_batch.py) through the real SDKs against the simulator's batch endpoints.

- a batch round trip answers each request exactly as a live call of the same request;
- a batch's failed requests are JudgeErrors the executor retries, its answers are kept;
- an expired (or canceled) batch: Anthropic's requests fail retryably one by one, Gemini's
  batch without responses is ``failed`` as a whole;
- a batch accepted but whose answer was lost is found again by its tag and not submitted
  twice; an Anthropic batch still processing cannot be confirmed (not settled).
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flask_eval.core.errors import FailureReason, JudgeError
from flask_eval.rubrics.messages import message
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import SimHandle, running_simulator
from flask_eval.workers.batching import BatchAPI, BatchRequest, batch_api
from flask_eval.workers.judge import RETRYABLE, GenerateConfig, Judge, JudgeOutput, create_judge
from flask_eval.workers.providers.anthropic_batch import parse_wire_id, tag_key, wire_id
from flask_eval.workers.providers.gemini_batch import phase_of

PROVIDERS = ("anthropic", "gemini")
TAG = "3f1c0b8e9d2a4c6b8e0f1a2b3c4d5e6f"


@pytest.fixture
def sim() -> Iterator[SimHandle]:
    with running_simulator(SimConfig(seed=7)) as handle:
        yield handle


def settings(sim: SimHandle, **values: float) -> None:
    req = urllib.request.Request(
        f"{sim.base_url}/batches/settings", method="POST", data=json.dumps(values).encode()
    )
    urllib.request.urlopen(req, timeout=10).close()


def submitted(sim: SimHandle, provider: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{sim.base_url}/batches/submitted", timeout=10) as resp:
        counts: dict[str, int] = json.loads(resp.read())[provider]["submitted"]
    return counts


def judge_of(provider: str, sim: SimHandle, monkeypatch: pytest.MonkeyPatch) -> Judge:
    for name in (
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "ANTHROPIC_BASE_URL",
        "GOOGLE_GEMINI_BASE_URL",
        "OPENAI_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    if provider == "openai":
        return create_judge(f"openai/sim-gpt@{sim.openai_base_url}")
    return create_judge(f"{provider}/sim-{provider}@{sim.base_url}")


def requests(n: int, max_tokens: int = 400) -> list[BatchRequest]:
    config = GenerateConfig(max_tokens=max_tokens, timeout=30)
    return [
        BatchRequest(
            f"call{i:04d}",
            [
                {"role": "system", "content": "You are a strict judge."},
                {"role": "user", "content": f"Skills to score: Correctness\n\nJudge answer {i}."},
            ],
            config,
        )
        for i in range(n)
    ]


def run(judge: Judge, go: Any) -> Any:
    async def main() -> Any:
        try:
            return await go(batch_api(judge))
        finally:
            await judge.aclose()

    return asyncio.run(main())


async def ended(api: BatchAPI, batch_id: str) -> Any:
    """The batch's status once it is no longer open (a deadline, not a timed assertion)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 120  # generous: the simulator shares a loaded machine
    while (status := await api.poll_batch(batch_id)).phase == "open":
        assert loop.time() < deadline, f"batch {batch_id} still open: {status}"
        await asyncio.sleep(0.05)
    return status


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_batch_answers_each_request_as_a_live_call_would(
    provider: str, sim: SimHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = requests(5)
    judge = judge_of(provider, sim, monkeypatch)

    async def go(api: BatchAPI) -> tuple[Any, Any, list[JudgeOutput]]:
        first = await api.submit_batch(TAG, calls)
        status = await ended(api, first.batch_id)
        results = await api.batch_results(first.batch_id)
        live = [await judge.generate(c.messages, c.config) for c in calls]
        return status, results, live

    status, results, live = run(judge, go)
    assert status.phase == "ended"
    if provider != "gemini":  # the SDK does not read the Developer API's batchStats
        assert (status.total, status.succeeded) == (5, 5)
    assert set(results) == {c.custom_id for c in calls}
    for call, answer in zip(calls, live, strict=True):
        got = results[call.custom_id]
        assert isinstance(got, JudgeOutput)
        assert (got.text, got.prompt_tokens, got.completion_tokens, got.finish) == (
            answer.text,
            answer.prompt_tokens,
            answer.completion_tokens,
            answer.finish,
        )
        assert "[RESULT]" in got.text or "[SCORES]" in got.text


@pytest.mark.parametrize("provider", ("openai", *PROVIDERS))
def test_a_batched_request_reads_the_prompt_cache_as_a_live_one_would(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Providers cache batched requests too: after a live call, the same request batched
    reports the cached (and cache-written) tokens a second live call reports."""
    shared = "Rubric: score the response for correctness, 1 to 5. " * 200  # ~2,700 tokens
    call = BatchRequest(
        "again",
        [message("user", shared, "Judge answer 1.")],
        GenerateConfig(max_tokens=400, timeout=30),
    )

    def twice(batched: bool) -> JudgeOutput:
        with running_simulator(SimConfig(seed=7)) as sim:
            judge = judge_of(provider, sim, monkeypatch)

            async def go(api: BatchAPI) -> Any:
                await judge.generate(call.messages, call.config)  # writes the cache
                if not batched:
                    return await judge.generate(call.messages, call.config)
                batch = await api.submit_batch(TAG, [call])
                await ended(api, batch.batch_id)
                return (await api.batch_results(batch.batch_id))["again"]

            out: JudgeOutput = run(judge, go)
            return out

    live, batched = twice(False), twice(True)
    assert isinstance(batched, JudgeOutput) and batched.cached_tokens > 0
    assert batched == live


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_cut_off_batch_answer_reads_as_cut_off(
    provider: str, sim: SimHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = requests(2, max_tokens=3)
    judge = judge_of(provider, sim, monkeypatch)

    async def go(api: BatchAPI) -> Any:
        batch = await api.submit_batch(TAG, calls)
        await ended(api, batch.batch_id)
        return await api.batch_results(batch.batch_id)

    results = run(judge, go)
    assert {r.finish for r in results.values() if isinstance(r, JudgeOutput)} == {"length"}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_failed_requests_of_a_batch_are_retryable_errors_and_answers_are_kept(
    provider: str, sim: SimHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings(sim, error_rate=0.5)
    calls = requests(16)
    judge = judge_of(provider, sim, monkeypatch)

    async def go(api: BatchAPI) -> Any:
        batch = await api.submit_batch(TAG, calls)
        return await ended(api, batch.batch_id), await api.batch_results(batch.batch_id)

    status, results = run(judge, go)
    errors = [r for r in results.values() if isinstance(r, JudgeError)]
    answers = [r for r in results.values() if isinstance(r, JudgeOutput)]
    assert len(results) == 16 and errors and answers
    assert {e.reason for e in errors} == {FailureReason.PROVIDER_ERROR}
    assert all(e.reason in RETRYABLE for e in errors)
    if provider != "gemini":  # the SDK does not read the Developer API's batchStats
        assert (status.succeeded, status.failed) == (len(answers), len(errors))


def test_an_expired_anthropic_batch_fails_each_request_retryably(
    sim: SimHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings(sim, delay_s=3600, expires_after_s=0)
    judge = judge_of("anthropic", sim, monkeypatch)

    async def go(api: BatchAPI) -> Any:
        batch = await api.submit_batch(TAG, requests(3))
        return await ended(api, batch.batch_id), await api.batch_results(batch.batch_id)

    status, results = run(judge, go)
    assert (status.phase, status.state, status.failed) == ("ended", "ended", 3)
    assert all(isinstance(r, JudgeError) and r.reason in RETRYABLE for r in results.values())
    assert all("expired" in r.detail for r in results.values())


def test_an_expired_or_canceled_gemini_batch_without_responses_fails_as_a_whole(
    sim: SimHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings(sim, delay_s=3600, expires_after_s=0)
    judge = judge_of("gemini", sim, monkeypatch)

    async def go(api: BatchAPI) -> Any:
        expired = await ended(api, (await api.submit_batch(TAG, requests(2))).batch_id)
        settings(sim, expires_after_s=86400)
        open_one = await api.submit_batch("other", requests(2))
        await api.cancel_batch(open_one.batch_id)
        return expired, await ended(api, open_one.batch_id)

    expired, canceled = run(judge, go)
    assert (expired.phase, expired.state) == ("failed", "JOB_STATE_EXPIRED")
    assert (canceled.phase, canceled.state) == ("failed", "JOB_STATE_CANCELLED")


def test_a_canceled_anthropic_batch_ends_with_retryable_canceled_requests(
    sim: SimHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings(sim, delay_s=3600)
    judge = judge_of("anthropic", sim, monkeypatch)

    async def go(api: BatchAPI) -> Any:
        batch = await api.submit_batch(TAG, requests(2))
        await api.cancel_batch(batch.batch_id)
        return await ended(api, batch.batch_id), await api.batch_results(batch.batch_id)

    status, results = run(judge, go)
    assert status.phase == "ended"
    assert all(isinstance(r, JudgeError) and "canceled" in r.detail for r in results.values())


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_batch_whose_answer_was_lost_is_found_again_and_not_resubmitted(
    provider: str, sim: SimHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = requests(4)
    since = datetime.now(UTC)
    judge = judge_of(provider, sim, monkeypatch)

    async def go(api: BatchAPI) -> Any:
        decoy = await api.submit_batch("another-tag", calls)  # same size, not ours
        await ended(api, decoy.batch_id)
        settings(sim, lose_responses=1)
        with pytest.raises(JudgeError) as lost:
            await api.submit_batch(TAG, calls)
        found = await api.find_batch(TAG, since, len(calls))
        nowhere = await api.find_batch("never-submitted", since, len(calls))
        assert found.batch_id is not None
        return lost.value, found, nowhere, decoy, await api.batch_results(found.batch_id)

    lost, found, nowhere, decoy, results = run(judge, go)
    assert lost.reason in RETRYABLE  # the executor asks find_batch before submitting again
    assert found.settled and found.batch_id != decoy.batch_id
    assert (nowhere.batch_id, nowhere.settled) == (None, True)
    assert set(results) == {c.custom_id for c in calls}
    counts = submitted(sim, provider)
    # each call twice in all: once in the decoy, once in the lost batch; never resubmitted
    ids = [wire_id(TAG, c.custom_id, 400) for c in calls] if provider == "anthropic" else []
    assert all(counts[i] == 1 for i in ids)
    assert sum(counts.values()) == 2 * len(calls)


def test_an_anthropic_batch_still_processing_is_not_settled_until_it_ends(
    sim: SimHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings(sim, delay_s=3600)
    since = datetime.now(UTC) - timedelta(seconds=1)
    judge = judge_of("anthropic", sim, monkeypatch)

    async def go(api: BatchAPI) -> Any:
        await api.submit_batch(TAG, requests(3))
        return (
            await api.find_batch(TAG, since, 3),
            await api.find_batch(TAG, since, 4),
            await api.find_batch(TAG, since + timedelta(hours=1), 3),
        )

    pending, other_size, later = run(judge, go)
    assert (pending.batch_id, pending.settled) == (None, False)
    assert (other_size.batch_id, other_size.settled) == (None, True)
    assert (later.batch_id, later.settled) == (None, True)


def test_anthropic_custom_ids_carry_the_tag_and_the_budget_within_the_apis_rule() -> None:
    sent = wire_id(TAG, "0123456789abcdef0123456789abcdef", 4096)
    assert len(sent) <= 64 and sent.startswith(tag_key(TAG) + "_")
    assert parse_wire_id(sent) == (tag_key(TAG), 4096, "0123456789abcdef0123456789abcdef")
    assert parse_wire_id("someone-elses-id") is None
    with pytest.raises(ValueError, match="does not fit"):
        wire_id(TAG, "x" * 60, 4096)


def test_gemini_states_read_as_the_executor_expects() -> None:
    assert phase_of("JOB_STATE_PENDING", False) == phase_of("JOB_STATE_RUNNING", False) == "open"
    assert phase_of("JOB_STATE_SUCCEEDED", True) == "ended"
    assert phase_of("JOB_STATE_EXPIRED", True) == phase_of("JOB_STATE_CANCELLED", True) == "ended"
    assert phase_of("JOB_STATE_EXPIRED", False) == phase_of("JOB_STATE_FAILED", True) == "failed"
