"""Judge specs, error classification, Retry-After parsing, secret redaction."""

from __future__ import annotations

import pytest

from flask_eval.exceptions import ConfigError, JudgeError
from flask_eval.redact import redact
from storage.models import FailureReason
from workers.errors import classify, retry_after
from workers.judge import JudgeSpec, RetryDecision, create_judge


@pytest.mark.parametrize(
    ("spec", "provider", "model", "base"),
    [
        ("openai/gpt-4o", "openai", "gpt-4o", None),
        ("anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5", None),
        (
            "openai/prometheus-7b@http://127.0.0.1:8000/v1",
            "openai",
            "prometheus-7b",
            "http://127.0.0.1:8000/v1",
        ),
        (
            "openai/org/model-x@https://host.example/v1/",
            "openai",
            "org/model-x",
            "https://host.example/v1",
        ),
    ],
)
def test_spec_parses(spec: str, provider: str, model: str, base: str | None) -> None:
    parsed = JudgeSpec.parse(spec)
    assert (parsed.provider, parsed.model, parsed.base_url) == (provider, model, base)
    assert JudgeSpec.parse(parsed.name) == parsed


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("gpt-4o", "expected provider/model"),
        ("openai/", "expected provider/model"),
        ("cohere/command", "unknown judge provider"),
        ("openai/m@localhost:8000", "invalid base URL"),
        ("openai/m@http://u:p@h/v1", "credentials"),
        ("openai/m@http://h:99999/v1", "invalid port"),
        ("openai/bad model", "invalid model name"),
    ],
)
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        JudgeSpec.parse(spec)


def test_openai_compatible_server_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    judge = create_judge("openai/vllm-model@http://127.0.0.1:8000/v1")
    assert judge.name == "openai/vllm-model@http://127.0.0.1:8000/v1"
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        create_judge("openai/gpt-4o")


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"x-ratelimit-reset-requests": "6m0s"}, 360.0),
        ({"x-ratelimit-reset-tokens": "250ms", "x-ratelimit-reset-requests": "2s"}, 2.0),
        ({"Retry-After": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after(headers) == expected


def test_classify_sdk_errors() -> None:
    import httpx2
    import openai

    request = httpx2.Request("POST", "http://x/v1/chat/completions")

    def status(code: int, headers: dict[str, str] | None = None) -> JudgeError:
        response = httpx2.Response(
            code, headers=headers or {}, request=request, text='{"error": {}}'
        )
        exc = openai.APIStatusError("boom", response=response, body=None)
        return classify(exc)

    assert status(429, {"retry-after": "3"}).reason == FailureReason.RATE_LIMITED
    assert status(429, {"retry-after": "3"}).retry_after == 3.0
    assert status(503).reason == FailureReason.PROVIDER_ERROR
    assert status(401).reason == FailureReason.AUTH
    assert status(400).reason == FailureReason.REFUSED
    assert classify(openai.APITimeoutError(request)).reason == FailureReason.TIMEOUT
    assert (
        classify(openai.APIConnectionError(request=request)).reason == FailureReason.PROVIDER_ERROR
    )
    assert classify(TimeoutError()).reason == FailureReason.TIMEOUT
    assert classify(ValueError("bug")).reason == FailureReason.INTERNAL


def test_retry_policy_honours_retry_after_and_stops() -> None:
    judge = create_judge("memory/j")
    limited = JudgeError(FailureReason.RATE_LIMITED, "429", retry_after=4.0)
    decision = judge.should_retry(limited, 1)
    assert decision.retry and 4.0 <= decision.delay <= 4.25
    assert judge.should_retry(limited, judge.max_attempts) == RetryDecision(False)
    assert not judge.should_retry(JudgeError(FailureReason.REFUSED, "400"), 1).retry
    backoff = judge.should_retry(JudgeError(FailureReason.PROVIDER_ERROR, "503"), 3)
    assert backoff.retry and 0 <= backoff.delay <= 4


def test_redact_hides_env_secrets_keys_and_url_passwords(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET-value-123")
    text = "key sk-test-SECRET-value-123 url redis://:hunter2@h:6379/0 Bearer abcdefghijkl"
    out = redact(text)
    assert "SECRET" not in out and "hunter2" not in out and "abcdefghijkl" not in out
    assert "redis://:***@h:6379/0" in out


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_pool_opens_n_connections_under_load_but_keeps_few_idle(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A burst of 64 calls runs 64 at once; afterwards only keepalive_for(64) stay open."""
    import asyncio

    from simulator.config import SimConfig
    from simulator.testing import running_simulator
    from workers.judge import GenerateConfig
    from workers.providers.openai_judge import keepalive_for

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    messages = [{"role": "user", "content": "Skills: correctness\nJudge this."}]

    async def burst(base: str) -> tuple[int, int]:
        judge = create_judge(f"{provider}/sim@{base}", max_connections=64)
        try:
            outs = await asyncio.gather(
                *(judge.generate(messages, GenerateConfig(timeout=30)) for _ in range(64))
            )
            pool = judge._client._client._transport._pool  # type: ignore[attr-defined]
            return len(outs), len(pool.connections)
        finally:
            await judge.aclose()

    with running_simulator(SimConfig(latency_ms=300)) as sim:
        base = sim.openai_base_url if provider == "openai" else sim.anthropic_base_url
        answered, open_after = asyncio.run(burst(base))
        stats = sim.stats()
    assert answered == 64
    assert stats["max_in_flight"] == 64  # the cap on idle connections does not limit load
    assert open_after <= keepalive_for(64) == 8
