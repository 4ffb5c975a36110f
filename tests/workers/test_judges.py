"""Judge specs, error classification, Retry-After parsing, secret redaction."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest

from flask_eval.core.errors import ConfigError, CredentialsError, FailureReason, JudgeError
from flask_eval.core.redact import redact
from flask_eval.core.types import JudgeSpec
from flask_eval.rubrics.messages import text_of
from flask_eval.workers.errors import retry_after
from flask_eval.workers.judge import RetryDecision, create_judge, spec_of
from flask_eval.workers.providers.openai_judge import MAX_FREE_TEXT, capped


@pytest.mark.parametrize(
    ("spec", "provider", "model", "base"),
    [
        ("openai/gpt-5.4", "openai", "gpt-5.4", None),
        ("anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5", None),
        ("gemini/gemini-3-flash-preview", "gemini", "gemini-3-flash-preview", None),
        (
            "gemini/gemini-3-flash-preview@http://127.0.0.1:8765/",
            "gemini",
            "gemini-3-flash-preview",
            "http://127.0.0.1:8765",
        ),
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
        ("openai/m@http://h/v1#sk-abcdefghijkl", "no #fragment"),
        ("openai/m@http://h/v1#", "no #fragment"),
        ("openai/m@http://h/v1/sk-abcdefghijkl", "looks like a key"),
        ("openai/m@http://h/v1?x=sk-abcdefghijkl", "looks like a key"),
        ("openai/m@http://h:99999/v1", "invalid port"),
        ("openai/bad model", "invalid model name"),
    ],
)
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        spec_of(spec)


def test_a_base_url_holding_a_secret_value_is_refused_and_a_host_is_not_a_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing secret reaches the run's stored configuration: the value of a secret
    variable anywhere in the base URL is refused; an ``sk-`` host name is a host."""
    monkeypatch.setenv("GATEWAY_TOKEN", "gw-7d1e3f9a0b")
    for url in ("http://h/gw-7d1e3f9a0b/v1", "http://gw-7d1e3f9a0b.example/v1"):
        with pytest.raises(ConfigError, match="looks like a key") as refused:
            spec_of(f"openai/m@{url}")
        assert "gw-7d1e3f9a0b" not in str(refused.value)
    assert spec_of("openai/m@http://sk-proxy-0001:8000/v1").base_url == (
        "http://sk-proxy-0001:8000/v1"
    )
    assert spec_of("openai/m@http://h/v1?api-version=2024-06-01").base_url


def test_openai_compatible_server_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    judge = create_judge("openai/vllm-model@http://127.0.0.1:8000/v1")
    assert judge.name == "openai/vllm-model@http://127.0.0.1:8000/v1"
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        create_judge("openai/gpt-5.4")


@pytest.mark.parametrize(
    ("provider", "variable", "default"),
    [
        ("openai", "OPENAI_BASE_URL", "https://api.openai.com/v1"),
        ("anthropic", "ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
    ],
)
def test_an_empty_base_url_variable_means_the_provider_s_own(
    monkeypatch: pytest.MonkeyPatch, provider: str, variable: str, default: str
) -> None:
    """``FOO_BASE_URL=""`` (what ``${FOO_BASE_URL:-}`` in a compose file gives) is unset:
    the judge goes to the provider's own API, and asks for its key there."""
    key = f"{provider.upper()}_API_KEY"
    monkeypatch.setenv(variable, "")
    monkeypatch.delenv(key, raising=False)
    with pytest.raises(CredentialsError, match=key):
        create_judge(f"{provider}/m")
    monkeypatch.setenv(key, "sk-test")
    judge: Any = create_judge(f"{provider}/m")
    assert str(judge._client.base_url).rstrip("/") == default


def test_docker_compose_passes_base_urls_through_only_when_set() -> None:
    """docker-compose.yml declares every ``*_BASE_URL`` without a value (passed through
    from the caller's environment if set, absent otherwise), never as an empty string."""
    from pathlib import Path

    import yaml

    compose = yaml.safe_load((Path(__file__).parents[2] / "docker-compose.yml").read_text())
    seen = 0
    for service in compose["services"].values():
        env = service.get("environment") or {}
        if isinstance(env, list):  # NAME (passed through) or NAME=VALUE
            env = {n: (v if sep else None) for n, sep, v in (e.partition("=") for e in env)}
        for name, value in env.items():
            if name.endswith("_BASE_URL"):
                seen += 1
                assert value is None, f"{name} is set to {value!r} in docker-compose.yml"
    assert seen >= 2


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


def _sdk_errors(provider: str) -> tuple[Any, Any, Any]:
    """What ``provider``'s SDK raises, built as the SDK builds it: (an HTTP status error
    from a response, a timeout, a connection error)."""
    import httpx2

    request = httpx2.Request("POST", "http://x/v1/chat/completions")
    if provider == "gemini":  # google-genai: its APIError classes; httpx2's for transport
        from google.genai import errors

        def gemini_status(response: httpx2.Response) -> BaseException:
            try:
                errors.APIError.raise_error(response.status_code, response.json(), response)
            except errors.APIError as exc:
                return exc
            raise AssertionError("no error raised")

        return (
            gemini_status,
            httpx2.ReadTimeout("timed out", request=request),
            httpx2.ConnectError("connection refused", request=request),
        )
    sdk = __import__(provider)
    return (
        lambda response: sdk.APIStatusError("boom", response=response, body=None),
        sdk.APITimeoutError(request),
        sdk.APIConnectionError(request=request),
    )


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_each_provider_classifies_its_sdk_errors(provider: str) -> None:
    """The provider's own table: status codes, timeouts, connection errors, bodies that
    are not JSON; anything else is ours (internal)."""
    import json

    import httpx2

    judge = create_judge(f"{provider}/m@http://127.0.0.1:9")
    classify = judge.classify
    request = httpx2.Request("POST", "http://x/v1/chat/completions")
    status_error, timeout, connection = _sdk_errors(provider)

    def status(code: int, headers: dict[str, str] | None = None) -> JudgeError:
        response = httpx2.Response(
            code, headers=headers or {}, request=request, text='{"error": {}}'
        )
        return classify(status_error(response))

    assert status(429, {"retry-after": "3"}).reason == FailureReason.RATE_LIMITED
    assert status(429, {"retry-after": "3"}).retry_after == 3.0
    assert status(503).reason == FailureReason.PROVIDER_ERROR
    assert status(500).reason == FailureReason.PROVIDER_ERROR
    assert status(401).reason == FailureReason.AUTH
    assert status(403).reason == FailureReason.AUTH
    assert status(400).reason == FailureReason.REFUSED
    assert status(404).reason == FailureReason.REFUSED
    assert '{"error": {}}' in str(status(400).raw)  # the body is kept
    assert classify(timeout).reason == FailureReason.TIMEOUT
    assert classify(connection).reason == FailureReason.PROVIDER_ERROR
    assert classify(TimeoutError()).reason == FailureReason.TIMEOUT
    html = classify(json.JSONDecodeError("Expecting value", "<html>502</html>", 0))
    assert html.reason == FailureReason.PROVIDER_ERROR and html.raw == "<html>502</html>"
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


def _pool(judge: Any) -> Any:
    """The httpcore pool under a judge's SDK client."""
    if judge.spec.provider == "gemini":  # our httpx2 client, handed to google-genai
        return judge._http._transport._pool
    return judge._client._client._transport._pool


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_pool_opens_n_connections_under_load_but_keeps_few_idle(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A burst of 64 calls runs 64 at once; afterwards only keepalive_for(64) stay open."""
    import asyncio

    from flask_eval.simulator.config import SimConfig
    from flask_eval.simulator.testing import running_simulator
    from flask_eval.workers.judge import GenerateConfig
    from flask_eval.workers.providers.openai_judge import keepalive_for

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("GEMINI_API_KEY", "sk-test")
    messages = [{"role": "user", "content": "Skills: correctness\nJudge this."}]

    async def burst(base: str) -> tuple[int, int]:
        judge = create_judge(f"{provider}/sim@{base}", max_connections=64)
        try:
            outs = await asyncio.gather(
                *(judge.generate(messages, GenerateConfig(timeout=30)) for _ in range(64))
            )
            return len(outs), len(_pool(judge).connections)
        finally:
            await judge.aclose()

    # each answer takes 1.5 s: all 64 requests start within it even on a loaded machine
    # (with 0.3 s, a CI run saw only 58 at once: the first were answered before the last
    # were sent)
    with running_simulator(SimConfig(latency_ms=1500)) as sim:
        base = {
            "openai": sim.openai_base_url,
            "anthropic": sim.anthropic_base_url,
            "gemini": sim.gemini_base_url,
        }[provider]
        answered, open_after = asyncio.run(burst(base))
        stats = sim.stats()
    assert answered == 64
    assert stats["max_in_flight"] == 64  # the cap on idle connections does not limit load
    assert 0 < open_after <= keepalive_for(64) == 8  # 0: the SDK bypassed our pool


# -- Gemini (google-genai): what its file knows ---------------------------------------

GEMINI_ENV = (
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_GENAI_USE_ENTERPRISE",
    "GOOGLE_GENAI_API_VERSION",
    "GOOGLE_CLOUD_PROJECT",
)


@pytest.fixture
def no_gemini_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in GEMINI_ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def gemini_output(response: dict[str, Any], max_tokens: int = 1024) -> Any:
    from google.genai import types

    from flask_eval.workers.providers.gemini_judge import output_of

    return output_of(types.GenerateContentResponse.model_validate(response), max_tokens)


def test_gemini_key_from_gemini_api_key_or_google_api_key(
    no_gemini_env: pytest.MonkeyPatch,
) -> None:
    from flask_eval.workers.judge import judge_class

    assert judge_class("gemini").key_env == "GEMINI_API_KEY"
    with pytest.raises(CredentialsError, match="GEMINI_API_KEY"):
        create_judge("gemini/gemini-3-flash-preview")
    assert create_judge("gemini/sim@http://127.0.0.1:8765").api_key() is None  # a placeholder
    no_gemini_env.setenv("GOOGLE_API_KEY", "google-key")
    assert create_judge("gemini/gemini-3-flash-preview").api_key() == "google-key"
    no_gemini_env.setenv("GEMINI_API_KEY", "gemini-key")  # ours wins over the SDK's other one
    assert create_judge("gemini/gemini-3-flash-preview").api_key() == "gemini-key"


def test_gemini_budget_key_follows_the_key_it_sends(no_gemini_env: pytest.MonkeyPatch) -> None:
    no_gemini_env.setenv("GOOGLE_API_KEY", "key-one-secret")
    one = create_judge("gemini/m").budget_key()
    no_gemini_env.setenv("GOOGLE_API_KEY", "key-two-secret")
    two = create_judge("gemini/m").budget_key()
    no_gemini_env.setenv("GEMINI_API_KEY", "key-two-secret")
    assert one != two == create_judge("gemini/m").budget_key()
    assert "secret" not in one + two


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8765/v1beta",
        "http://127.0.0.1:8765/v1",
        "https://generativelanguage.googleapis.com/v1beta/models",
        "http://127.0.0.1:8765/v1beta/models/gemini-3-flash-preview",
        "http://127.0.0.1:8765/v1beta/models/gemini-3-flash-preview:generateContent",
        "http://gw.example/google/models/m:generateContent",
    ],
)
def test_gemini_base_url_is_the_api_root(url: str) -> None:
    from flask_eval.workers.judge import judge_class

    spec = JudgeSpec.parse(f"gemini/gemini-3-flash-preview@{url}")
    with pytest.raises(ConfigError, match=r"API root.*without /v1beta.*e\.g\. http"):
        judge_class("gemini").check_spec(spec)


def test_gemini_accepts_an_api_root_and_refuses_keys_in_urls_and_bad_models() -> None:
    from flask_eval.workers.judge import judge_class

    gemini = judge_class("gemini")
    for url in (
        "https://generativelanguage.googleapis.com",
        "http://127.0.0.1:8765",
        "https://gw.example/google",  # a gateway's own version inside its path:
        "https://gateway.ai.cloudflare.com/v1/acct/gw/google-ai-studio",
    ):
        gemini.check_spec(JudgeSpec.parse(f"gemini/gemini-3-flash-preview@{url}"))
    gemini.check_spec(JudgeSpec.parse("gemini/gemini-3-flash-preview"))
    with pytest.raises(ConfigError, match="GEMINI_API_KEY"):
        spec_of("gemini/m@https://generativelanguage.googleapis.com/?key=AIzaSy123")
    with pytest.raises(ConfigError, match=r"invalid model name.*\.\."):
        gemini.check_spec(JudgeSpec.parse("gemini/models..x"))


def test_gemini_request_maps_system_turns_and_sampling() -> None:
    from flask_eval.workers.judge import GenerateConfig
    from flask_eval.workers.providers.gemini_judge import request_of

    messages = [
        {"role": "system", "content": "Be strict."},
        {"role": "system", "content": "Score 1 to 5."},
        {"role": "user", "content": "Judge this."},
        {"role": "assistant", "content": "Scores: ..."},
        {"role": "user", "content": "Only the scores line, please."},
    ]
    contents, config = request_of(
        messages, GenerateConfig(max_tokens=77, temperature=0.0, timeout=2.5)
    )
    assert [(c.role, c.parts[0].text) for c in contents] == [
        ("user", "Judge this."),
        ("model", "Scores: ..."),
        ("user", "Only the scores line, please."),
    ]
    assert config.system_instruction == "Be strict.\n\nScore 1 to 5."
    assert (config.max_output_tokens, config.temperature) == (77, 0.0)
    assert config.http_options.timeout == 2500  # milliseconds
    assert config.automatic_function_calling.disable  # one HTTP request per call
    assert config.automatic_continuation is False
    _, default = request_of(messages[2:3], GenerateConfig(temperature=None))
    assert default.temperature is None and default.system_instruction is None


def test_gemini_finish_reasons_and_usage() -> None:
    from flask_eval.workers.judge import CUT_OFF, FINISHED, REFUSAL

    def candidate(reason: str | None, *texts: str, **extra: Any) -> dict[str, Any]:
        content = {"role": "model", "parts": [{"text": t} for t in texts]} if texts else None
        return {
            "candidates": [{"content": content, "finish_reason": reason, **extra}],
            "usage_metadata": {
                "prompt_token_count": 11,
                "candidates_token_count": 5,
                "thoughts_token_count": 7,
            },
        }

    done = gemini_output(candidate("STOP", "Good.\n", "[SCORES] {}"))
    assert (done.text, done.finish) == ("Good.\n[SCORES] {}", FINISHED)
    assert (done.prompt_tokens, done.completion_tokens) == (11, 12)  # thinking is billed
    thought = candidate("STOP", "x")
    thought["candidates"][0]["content"]["parts"].insert(0, {"text": "hmm", "thought": True})
    assert gemini_output(thought).text == "x"  # the model's thoughts are not its answer
    assert gemini_output(candidate(None, "an answer")).finish == FINISHED
    cut = gemini_output(candidate("MAX_TOKENS", "half an ans"))
    assert (cut.text, cut.finish) == ("half an ans", CUT_OFF)
    assert gemini_output(candidate("MAX_TOKENS")).finish == CUT_OFF  # all spent thinking
    for reason in ("SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "OTHER"):
        refused = gemini_output(candidate(reason))
        assert refused.finish == REFUSAL and reason in refused.text
    partial = gemini_output(candidate("RECITATION", "quoted text", finish_message="recited"))
    assert partial.finish == REFUSAL and "quoted text" in partial.text
    assert "recited" in partial.text
    blocked = gemini_output(
        {
            "prompt_feedback": {
                "block_reason": "PROHIBITED_CONTENT",
                "block_reason_message": "not allowed",
            },
            "usage_metadata": {"prompt_token_count": 9},
        }
    )
    assert blocked.finish == REFUSAL and (blocked.prompt_tokens, blocked.completion_tokens) == (
        9,
        0,
    )
    assert "PROHIBITED_CONTENT" in blocked.text and "not allowed" in blocked.text
    with pytest.raises(JudgeError) as empty:
        gemini_output({"usage_metadata": {"prompt_token_count": 9}})
    assert empty.value.reason == FailureReason.PROVIDER_ERROR
    assert gemini_output(candidate(None, "x"), max_tokens=12).finish == CUT_OFF  # all spent
    assert gemini_output(candidate("FINISH_REASON_UNSPECIFIED", "x")).finish == FINISHED
    for reason in ("MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "NO_IMAGE"):
        stopped = gemini_output(candidate(reason, "partial"))
        assert (stopped.finish, stopped.stop_reason) == ("incomplete", reason)
    assert gemini_output(candidate("CONTINUATION", "to be continued")).finish == CUT_OFF
    with pytest.raises(JudgeError) as whole_but_empty:
        gemini_output(candidate("STOP"))  # a whole candidate without content
    assert whole_but_empty.value.reason == FailureReason.PROVIDER_ERROR


def test_gemini_classifies_its_own_error_details(no_gemini_env: pytest.MonkeyPatch) -> None:
    """A wrong key is a 400 API_KEY_INVALID (auth, not refused); a 429's wait is in a
    RetryInfo when there is no Retry-After header; a 200 that is not JSON keeps its body."""
    import json

    import httpx2
    import pydantic
    from google.genai import errors, types

    judge = create_judge("gemini/m@http://127.0.0.1:9")
    request = httpx2.Request("POST", "http://x/v1beta/models/m:generateContent")

    def error(code: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
        response = httpx2.Response(code, headers=headers, request=request, json=body)
        return judge.classify(errors.ClientError(code, body, response))

    key_info = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}
    bad_key = error(
        400,
        {
            "error": {
                "code": 400,
                "status": "INVALID_ARGUMENT",
                "message": "API key not valid.",
                "details": [key_info],
            }
        },
    )
    assert bad_key.reason == FailureReason.AUTH and "API key not valid" in bad_key.detail
    plain = error(400, {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": "bad"}})
    assert plain.reason == FailureReason.REFUSED

    def limited(delay: str, headers: dict[str, str] | None = None) -> Any:
        info = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}
        return error(
            429,
            {
                "error": {
                    "code": 429,
                    "status": "RESOURCE_EXHAUSTED",
                    "message": "quota",
                    "details": [info],
                }
            },
            headers,
        )

    assert limited("7s").retry_after == 7.0
    assert limited("1.5s").retry_after == 1.5
    assert limited("40s", {"retry-after": "2"}).retry_after == 2.0  # the header first
    assert limited("soon").reason == FailureReason.RATE_LIMITED
    assert limited("soon").retry_after is None
    html = judge.classify(json.JSONDecodeError("Expecting value", "<html>502</html>", 0))
    assert html.reason == FailureReason.PROVIDER_ERROR and html.raw == "<html>502</html>"
    try:
        types.GenerateContentResponse.model_validate({"candidates": "not a list"})
    except pydantic.ValidationError as exc:
        shape = judge.classify(exc)
    assert shape.reason == FailureReason.PROVIDER_ERROR
    assert judge.classify(ValueError("bug")).reason == FailureReason.INTERNAL


def _generate(spec: str, messages: list[dict[str, str]] | None = None, **config: Any) -> Any:
    """One ``generate`` of a fresh judge (closed afterwards); the output or the JudgeError."""
    import asyncio

    from flask_eval.rubrics.protocol import skills_line
    from flask_eval.workers.judge import GenerateConfig

    judged = f"Judge this.\n{skills_line(['Readability'])}"
    messages = messages or [{"role": "user", "content": judged}]

    async def go() -> Any:
        judge = create_judge(spec)
        try:
            return await judge.generate(messages, GenerateConfig(**config))
        except JudgeError as exc:
            return exc
        finally:
            await judge.aclose()

    return asyncio.run(go())


def test_gemini_judge_against_the_simulator(no_gemini_env: pytest.MonkeyPatch) -> None:
    """System, user and assistant turns all reach the prompt (the simulator answers the
    Gemini dialect as the OpenAI one); finish reasons and usage come through."""
    from flask_eval.rubrics.protocol import skills_line
    from flask_eval.simulator.config import SimConfig
    from flask_eval.simulator.testing import running_simulator
    from flask_eval.workers.judge import CUT_OFF, FINISHED, REFUSAL

    no_gemini_env.setenv("OPENAI_API_KEY", "sk-test")
    messages = [
        {"role": "system", "content": "You are a strict judge."},
        {"role": "user", "content": f"Judge this.\n{skills_line(['Readability', 'Factuality'])}"},
        {"role": "assistant", "content": "Readability: fine."},
        {"role": "user", "content": "Give the scores line."},
    ]
    with running_simulator(SimConfig()) as sim:
        out = _generate(f"gemini/judge@{sim.gemini_base_url}", messages)
        same = _generate(f"openai/judge@{sim.openai_base_url}", messages)
        cut = _generate(f"gemini/judge@{sim.gemini_base_url}", max_tokens=5)
    assert out.finish == FINISHED and out.text == same.text and "[SCORES]" in out.text
    assert (out.prompt_tokens, out.completion_tokens) == (
        same.prompt_tokens,
        same.completion_tokens,
    )
    assert cut.finish == CUT_OFF and cut.completion_tokens == 5
    with running_simulator(SimConfig(refusal_rate=1)) as sim:
        refused = _generate(f"gemini/judge@{sim.gemini_base_url}")
    assert refused.finish == REFUSAL and "SAFETY" in refused.text


def test_gemini_sdk_never_retries_and_failures_are_classified(
    no_gemini_env: pytest.MonkeyPatch,
) -> None:
    """One request per generate (our runner has the only retry loop), whatever fails.
    Counted by the server, not timed: the SDK's own retries would each be a request."""
    import socket
    import struct
    import threading

    from flask_eval.simulator.config import SimConfig
    from flask_eval.simulator.testing import running_simulator

    cases = [
        (SimConfig(error_rate=1), FailureReason.PROVIDER_ERROR),
        (SimConfig(rate_limit_rate=1), FailureReason.RATE_LIMITED),
        (SimConfig(html_rate=1), FailureReason.PROVIDER_ERROR),
        (SimConfig(require_key="the-right-key"), FailureReason.AUTH),
    ]
    for sim_config, reason in cases:
        with running_simulator(sim_config) as sim:
            err = _generate(f"gemini/judge@{sim.gemini_base_url}")
            requests = sim.stats()["requests"]
        assert isinstance(err, JudgeError) and err.reason == reason, (sim_config, err)
        assert requests == 1, sim_config
        if sim_config.rate_limit_rate:
            assert err.retry_after == 1.0
        if sim_config.html_rate:
            assert "502 Bad Gateway" in str(err.raw)
    with running_simulator(SimConfig(require_key="the-right-key")) as sim:
        no_gemini_env.setenv("GOOGLE_API_KEY", "the-right-key")
        assert not isinstance(_generate(f"gemini/judge@{sim.gemini_base_url}"), JudgeError)
    with running_simulator(SimConfig(timeout_rate=1)) as sim:  # answers in an hour
        # 2 s: time enough for the in-thread server to take (and count) the request
        # on a loaded machine before the client gives up
        slow = _generate(f"gemini/judge@{sim.gemini_base_url}", timeout=2)
        assert slow.reason == FailureReason.TIMEOUT and sim.stats()["requests"] == 1
    dead = _generate("gemini/judge@http://127.0.0.1:9")  # nothing listens: refused
    assert dead.reason == FailureReason.PROVIDER_ERROR
    # a server that hangs up at once: each attempt is one connection it accepted (and
    # closed, so that the attempt could fail) before generate returned
    with socket.create_server(("127.0.0.1", 0)) as server:
        accepted: list[object] = []

        def hang_up() -> None:
            with contextlib.suppress(OSError):  # the server closed: done
                while True:
                    conn, peer = server.accept()
                    accepted.append(peer)
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    conn.close()  # a reset

        threading.Thread(target=hang_up, daemon=True).start()
        reset = _generate(f"gemini/judge@http://127.0.0.1:{server.getsockname()[1]}")
    assert reset.reason == FailureReason.PROVIDER_ERROR and len(accepted) == 1


def test_gemini_base_url_from_the_environment_and_never_vertex(
    no_gemini_env: pytest.MonkeyPatch,
) -> None:
    """GOOGLE_GEMINI_BASE_URL (the SDK's variable) works without a key; a stray
    GOOGLE_GENAI_USE_VERTEXAI or GOOGLE_GENAI_API_VERSION changes nothing."""
    from flask_eval.simulator.config import SimConfig
    from flask_eval.simulator.testing import running_simulator
    from flask_eval.workers.judge import FINISHED

    no_gemini_env.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
    no_gemini_env.setenv("GOOGLE_GENAI_API_VERSION", "v1alpha")
    with running_simulator(SimConfig()) as sim:
        no_gemini_env.setenv("GOOGLE_GEMINI_BASE_URL", sim.gemini_base_url)
        out = _generate("gemini/judge")
    assert out.finish == FINISHED and "[SCORES]" in out.text


# -- structured outputs: each provider asks for the schema and returns its JSON -------

#: a judgment schema shaped like the protocols' (a rationale and an allowed score per
#: criterion), strict in OpenAI's sense: every object closed, every property required
JUDGMENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        name: {
            "type": "object",
            "properties": {
                "rationale": {"type": "string"},
                "score": {"enum": [1, 2, 3, 4, 5, "N/A"]},
            },
            "required": ["rationale", "score"],
            "additionalProperties": False,
        }
        for name in ("Readability", "Factuality")
    },
    "required": ["Readability", "Factuality"],
    "additionalProperties": False,
}


def _sim_base(sim: Any, provider: str) -> str:
    return str(
        {
            "openai": sim.openai_base_url,
            "anthropic": sim.anthropic_base_url,
            "gemini": sim.gemini_base_url,
        }[provider]
    )


def assert_judgment(text: str) -> None:
    """``text`` is one JSON object following JUDGMENT_SCHEMA."""
    import json

    answer = json.loads(text)
    assert set(answer) == {"Readability", "Factuality"}, answer
    for part in answer.values():
        assert set(part) == {"rationale", "score"}
        assert isinstance(part["rationale"], str) and part["rationale"]
        assert part["score"] in (1, 2, 3, 4, 5, "N/A")


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_each_provider_takes_a_schema(provider: str) -> None:
    from flask_eval.workers.judge import judge_class

    assert judge_class(provider).takes_schema


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_each_provider_returns_a_structured_answer_from_the_simulator(
    provider: str, no_gemini_env: pytest.MonkeyPatch
) -> None:
    """With a schema the answer is the JSON object (the simulator answers only a request
    that asks for the schema in its dialect's own way with one); finish semantics are
    those of free text: cut off by max_tokens, refusals."""
    from flask_eval.simulator.config import SimConfig
    from flask_eval.simulator.testing import running_simulator
    from flask_eval.workers.judge import CUT_OFF, FINISHED, REFUSAL

    with running_simulator(SimConfig()) as sim:
        spec = f"{provider}/judge@{_sim_base(sim, provider)}"
        out = _generate(spec, schema=JUDGMENT_SCHEMA)
        free = _generate(spec)
        cut = _generate(spec, schema=JUDGMENT_SCHEMA, max_tokens=5)
    assert out.finish == FINISHED, out
    assert_judgment(out.text)
    assert out.completion_tokens > 0 and out.prompt_tokens > 0
    assert "[SCORES]" in free.text  # without a schema: free text, as before
    assert cut.finish == CUT_OFF
    with running_simulator(SimConfig(refusal_rate=1)) as sim:
        refused = _generate(f"{provider}/judge@{_sim_base(sim, provider)}", schema=JUDGMENT_SCHEMA)
    assert refused.finish == REFUSAL


def _capture_openai(monkeypatch: pytest.MonkeyPatch, failures: list[Exception]) -> list[Any]:
    """Replace the OpenAI SDK client's ``post`` (what our judge calls) with one that
    records the request's body, raises the given ``failures`` first, then answers ``{}``."""
    import httpx2
    import openai

    seen: list[dict[str, Any]] = []

    async def post(
        self: Any, path: str, *, cast_to: Any, body: Any = None, options: Any = None
    ) -> Any:
        assert path == "/chat/completions" and cast_to is httpx2.Response
        seen.append({**body, "<options>": options})
        if failures:
            raise failures.pop(0)
        answer = {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "{}"},
                }
            ],
        }
        return httpx2.Response(200, content=json.dumps(answer).encode())

    monkeypatch.setattr(openai.AsyncOpenAI, "post", post)
    return seen


def test_openai_sends_a_chat_completion_body_and_its_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the judge posts is the chat completion request the typed ``create`` would
    send for the same arguments, and the call's timeout goes with it."""
    seen = _capture_openai(monkeypatch, [])
    messages = [{"role": "system", "content": "Be fair."}, {"role": "user", "content": "Q"}]
    out = _generate(
        "openai/m@http://127.0.0.1:9/v1", messages, max_tokens=77, temperature=0.0, timeout=12.5
    )
    assert out.text == "{}"
    (body,) = seen
    assert body == {
        "model": "m",
        "messages": messages,
        "max_tokens": 77,
        "temperature": 0.0,
        "<options>": {"timeout": 12.5},
    }


def test_openai_asks_for_a_json_schema_strict_only_when_the_schema_is_strict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = _capture_openai(monkeypatch, [])
    assert _generate("openai/m@http://127.0.0.1:9/v1", schema=JUDGMENT_SCHEMA).text == "{}"
    loose = {"type": "object", "properties": {"score": {"type": "integer"}}}
    _generate("openai/m@http://127.0.0.1:9/v1", schema=loose)
    _generate("openai/m@http://127.0.0.1:9/v1")
    strict, not_strict, free = (s.get("response_format") for s in seen)
    assert strict == {
        "type": "json_schema",
        "json_schema": {"name": "judgment", "schema": JUDGMENT_SCHEMA, "strict": True},
    }
    assert not_strict["json_schema"]["strict"] is False  # OpenAI would refuse it as strict
    assert free is None  # free text asks for no format


def _llama_cpp_python_refusal() -> Exception:
    """What llama-cpp-python's server answers a json_schema response_format with: its
    request model allows only text and json_object, and its error handler turns the
    validation error into a 500."""
    import httpx2
    import openai

    body = (
        '{"error": {"message": "1 validation error: response_format.type Input should '
        'be \'text\' or \'json_object\'", "type": "internal_server_error"}}'
    )
    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    response = httpx2.Response(500, request=request, text=body)
    return openai.InternalServerError("boom", response=response, body=None)


def test_openai_falls_back_to_json_object_with_schema_where_json_schema_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server that takes only ``{"type": "json_object", "schema": ...}`` (llama-cpp-
    python) is asked that way from then on, after one refused request."""
    from flask_eval.workers.providers.openai_judge import OpenAIJudge

    monkeypatch.setattr(OpenAIJudge, "schema_forms", {})
    seen = _capture_openai(monkeypatch, [_llama_cpp_python_refusal()])
    assert _generate("openai/m@http://127.0.0.1:9/v1", schema=JUDGMENT_SCHEMA).text == "{}"
    _generate("openai/m@http://127.0.0.1:9/v1", schema=JUDGMENT_SCHEMA)
    forms = [s["response_format"] for s in seen]
    assert forms[0]["type"] == "json_schema"
    assert forms[1] == forms[2] == {"type": "json_object", "schema": capped(JUDGMENT_SCHEMA)}
    _generate("openai/m@http://127.0.0.1:8/v1", schema=JUDGMENT_SCHEMA)  # another server
    assert seen[3]["response_format"]["type"] == "json_schema"
    assert "maxLength" not in json.dumps(seen[3]["response_format"])  # strict takes none


def test_json_object_servers_get_every_free_string_capped() -> None:
    """A small model under a grammar may repeat one sentence until max_tokens: in the
    json_object dialect (llama.cpp) every free string has a length limit, nothing else."""
    inner = {"rationale": {"type": "string"}, "score": {"enum": [1, 2, 3]}}
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "object", "properties": inner},
            "b": {"type": "string", "maxLength": 5},
            "c": {"type": "string", "enum": ["x"]},
        },
    }
    out = capped(schema)
    assert out["properties"]["a"]["properties"]["rationale"]["maxLength"] == MAX_FREE_TEXT
    assert out["properties"]["a"]["properties"]["score"] == {"enum": [1, 2, 3]}
    assert out["properties"]["b"]["maxLength"] == 5 and "maxLength" not in out["properties"]["c"]
    assert inner["rationale"] == {"type": "string"}  # the caller's schema is left alone


def test_openai_never_falls_back_on_openai_itself_nor_on_other_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OpenAI's own API gets json_schema only (its JSON mode would not hold the schema);
    an error that is not about the format is an error, not a reason to ask otherwise."""
    import httpx2
    import openai

    from flask_eval.workers.providers.openai_judge import OpenAIJudge

    monkeypatch.setattr(OpenAIJudge, "schema_forms", {})
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    seen = _capture_openai(monkeypatch, [_llama_cpp_python_refusal()])
    err = _generate("openai/gpt-5.4", schema=JUDGMENT_SCHEMA)
    assert isinstance(err, JudgeError) and err.reason == FailureReason.PROVIDER_ERROR
    assert len(seen) == 1
    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    overloaded = openai.InternalServerError(
        "boom", response=httpx2.Response(500, request=request, text="overloaded"), body=None
    )
    seen = _capture_openai(monkeypatch, [overloaded])
    err = _generate("openai/m@http://127.0.0.1:9/v1", schema=JUDGMENT_SCHEMA)
    assert isinstance(err, JudgeError) and len(seen) == 1


def test_anthropic_asks_for_its_structured_output_format(monkeypatch: pytest.MonkeyPatch) -> None:
    """``output_config.format`` with the schema as the SDK's transform_schema makes it
    (the API's subset); free text sends no output_config. The body goes through the SDK
    client's ``post`` with the call's timeout."""
    import anthropic
    import httpx2

    seen: list[dict[str, Any]] = []

    async def post(
        self: Any, path: str, *, cast_to: Any, body: Any = None, options: Any = None
    ) -> Any:
        assert path == "/v1/messages" and cast_to is httpx2.Response
        seen.append({**body, "<options>": options})
        answer = {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [{"type": "text", "text": "{}"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 3, "output_tokens": 1},
        }
        return httpx2.Response(200, content=json.dumps(answer).encode())

    monkeypatch.setattr(anthropic.AsyncAnthropic, "post", post)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    ranged = {
        "type": "object",
        "properties": {"score": {"type": "integer", "minimum": 1}},
        "required": ["score"],
    }
    assert _generate("anthropic/claude", schema=ranged).text == "{}"
    messages = [{"role": "system", "content": "Be fair."}, {"role": "user", "content": "Q"}]
    free = _generate("anthropic/claude", messages, max_tokens=77, timeout=12.5)
    assert (free.prompt_tokens, free.completion_tokens) == (3, 1)
    asked, free_body = seen
    assert asked["output_config"] == {
        "format": {"type": "json_schema", "schema": anthropic.transform_schema(ranged)}
    }
    assert asked["output_config"]["format"]["schema"]["additionalProperties"] is False
    assert free_body == {
        "model": "claude",
        "system": "Be fair.",
        "max_tokens": 77,
        "messages": [{"role": "user", "content": "Q"}],
        "<options>": {"timeout": 12.5},
    }


def test_gemini_asks_for_json_with_the_schema() -> None:
    from flask_eval.workers.judge import GenerateConfig
    from flask_eval.workers.providers.gemini_judge import request_of

    messages = [{"role": "user", "content": "Judge this."}]
    _, asked = request_of(messages, GenerateConfig(schema=JUDGMENT_SCHEMA))
    assert asked.response_mime_type == "application/json"
    assert asked.response_json_schema == JUDGMENT_SCHEMA
    _, free = request_of(messages, GenerateConfig())
    assert free.response_mime_type is None and free.response_json_schema is None


def test_the_protocols_schema_is_strict_ready() -> None:
    """The flask-eval protocol's schema is one OpenAI's strict mode takes, so OpenAI is
    asked for it strictly (the decoder then holds every answer to it)."""
    from flask_eval.rubrics.grading import FlaskEvalProtocol
    from flask_eval.rubrics.skills import load_default
    from flask_eval.workers.providers.openai_judge import strict_ready

    skills = load_default()
    schema = FlaskEvalProtocol().response_schema([skills.get(n) for n in skills.names])
    assert strict_ready(schema) and strict_ready(JUDGMENT_SCHEMA)
    assert not strict_ready({**JUDGMENT_SCHEMA, "required": ["Readability"]})


# -- the simulator: each dialect's own way of asking, and an answer that follows it -------

_SCHEMA_BODIES: list[tuple[str, dict[str, Any], str | None]] = [
    (
        "openai",
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "j", "schema": JUDGMENT_SCHEMA, "strict": True},
            }
        },
        None,
    ),
    ("openai", {"response_format": {"type": "json_object", "schema": JUDGMENT_SCHEMA}}, None),
    (
        "anthropic",
        {"output_config": {"format": {"type": "json_schema", "schema": JUDGMENT_SCHEMA}}},
        None,
    ),
    (
        "anthropic",
        {
            "tools": [
                {"name": "other", "input_schema": {"type": "object"}},
                {"name": "judge", "input_schema": JUDGMENT_SCHEMA},
            ],
            "tool_choice": {"type": "tool", "name": "judge"},
        },
        "judge",
    ),
    (
        "gemini",
        {
            "generationConfig": {
                "responseMimeType": "application/json",
                "responseJsonSchema": JUDGMENT_SCHEMA,
            }
        },
        None,
    ),
    (
        "gemini",
        {
            "generation_config": {
                "response_mime_type": "application/json",
                "response_schema": JUDGMENT_SCHEMA,
            }
        },
        None,
    ),
]


def _body(dialect: str, extra: dict[str, Any]) -> dict[str, Any]:
    from flask_eval.rubrics.protocol import skills_line

    text = f"Judge this.\n{skills_line(['Readability', 'Factuality'])}"
    if dialect == "gemini":
        return {"contents": [{"role": "user", "parts": [{"text": text}]}], **extra}
    return {
        "model": "m",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": text}],
        **extra,
    }


@pytest.mark.parametrize(("dialect", "extra", "tool"), _SCHEMA_BODIES)
def test_simulator_reads_each_dialects_way_of_asking(
    dialect: Any, extra: dict[str, Any], tool: str | None
) -> None:
    from flask_eval.simulator.wire import parse_request

    asked = parse_request(dialect, _body(dialect, extra), "m").structured
    assert asked is not None and asked.schema == JUDGMENT_SCHEMA and asked.tool == tool


@pytest.mark.parametrize(
    ("dialect", "extra"),
    [
        ("openai", {"output_config": {"format": {"type": "json_schema", "schema": {}}}}),
        ("openai", {"response_format": {"type": "json_object"}}),  # JSON, but no schema
        ("anthropic", {"response_format": {"type": "json_object", "schema": JUDGMENT_SCHEMA}}),
        (
            "anthropic",
            {"tools": [{"name": "judge", "input_schema": JUDGMENT_SCHEMA}]},
        ),  # not forced
        ("gemini", {"response_format": {"type": "json_object", "schema": JUDGMENT_SCHEMA}}),
    ],
)
def test_simulator_answers_a_schema_asked_elsewhere_in_free_text(
    dialect: Any, extra: dict[str, Any]
) -> None:
    from flask_eval.simulator.wire import parse_request

    assert parse_request(dialect, _body(dialect, extra), "m").structured is None


@pytest.mark.parametrize(
    ("dialect", "extra", "message"),
    [
        ("gemini", {"generationConfig": {"responseJsonSchema": JUDGMENT_SCHEMA}}, "MimeType"),
        ("openai", {"response_format": {"type": "json_schema"}}, "json_schema must be an obj"),
        ("openai", {"response_format": {"type": "xml"}}, "response_format.type"),
        ("anthropic", {"tool_choice": {"type": "tool", "name": "gone"}}, "not in tools"),
    ],
)
def test_simulator_refuses_what_the_real_api_refuses(
    dialect: Any, extra: dict[str, Any], message: str
) -> None:
    from flask_eval.simulator.wire import BadRequest, parse_request

    with pytest.raises(BadRequest, match=message):
        parse_request(dialect, _body(dialect, extra), "m")


@pytest.mark.parametrize("na_rate", [0.0, 1.0])
def test_simulator_structured_answer_carries_its_deterministic_scores(na_rate: float) -> None:
    """The JSON answer follows the schema and holds the scores the free-text answer to
    the same prompt holds; N/A only where the schema allows it."""
    from flask_eval.rubrics.grading import FlaskEvalProtocol, Subject
    from flask_eval.rubrics.skills import Skill, load_default
    from flask_eval.rubrics.structured import read_structured
    from flask_eval.simulator.answer import judge_scores, quality
    from flask_eval.simulator.config import SimConfig
    from flask_eval.simulator.structured import structured_answer

    strict = Skill("Strict", "User Alignment", "c", {i: "r" for i in range(1, 6)}, allow_na=False)
    criteria = [load_default().get("Readability"), strict]
    proto = FlaskEvalProtocol()
    subject = Subject("What is 2+2?", "4", "It is 4.")
    prompt = "\n".join(text_of(m) for m in proto.render_structured(subject, criteria))
    config = SimConfig(na_rate=na_rate, seed=3)
    schema = proto.response_schema(criteria)
    assert schema is not None
    text = structured_answer(prompt, "m", schema, config)
    reading = read_structured(text, criteria)
    assert reading.complete, reading.problems
    expected = judge_scores(prompt, "m", ["Readability", "Strict"], config)
    if na_rate:  # every score N/A: where the schema has no N/A, the response's level
        expected["Strict"] = quality(prompt, config)
    assert dict(reading.scores) == expected
    # an OpenAPI-style schema (Gemini's responseSchema: upper-case types) is followed too
    upper = {
        "type": "OBJECT",
        "properties": {
            "Readability": {
                "type": "OBJECT",
                "properties": {"score": {"type": "INTEGER"}, "why": {"type": "STRING"}},
            }
        },
    }
    answer = json.loads(structured_answer(prompt, "m", upper, SimConfig(seed=3)))
    assert set(answer["Readability"]) == {"score", "why"}
    assert answer["Readability"]["score"] in range(1, 6)


def test_simulator_answers_a_forced_tool_with_a_tool_use() -> None:
    """Anthropic's forced tool call: the answer is a tool_use whose input follows the
    schema; the Anthropic SDK reads it as such."""
    import anthropic

    from flask_eval.rubrics.protocol import skills_line
    from flask_eval.simulator.config import SimConfig
    from flask_eval.simulator.testing import running_simulator

    content = f"Judge this.\n{skills_line(['Readability', 'Factuality'])}"
    with running_simulator(SimConfig()) as sim:
        client = anthropic.Anthropic(
            base_url=sim.anthropic_base_url, api_key="sk-test", max_retries=0
        )
        with client:
            message = client.messages.create(
                model="judge",
                max_tokens=500,
                messages=[{"role": "user", "content": content}],
                tools=[{"name": "judge", "input_schema": JUDGMENT_SCHEMA}],
                tool_choice={"type": "tool", "name": "judge"},
            )
    assert message.stop_reason == "tool_use"
    (block,) = message.content
    assert block.type == "tool_use" and block.name == "judge"
    assert_judgment(json.dumps(block.input))


# -- stop reasons: every one each SDK knows, mapped explicitly ------------------------


def _sdk_stop_reasons(provider: str) -> set[str]:
    """The stop reasons the provider's SDK itself lists (its Literal type or enum)."""
    import typing

    if provider == "openai":
        from openai.types.chat.chat_completion import Choice

        return set(typing.get_args(Choice.model_fields["finish_reason"].annotation))
    if provider == "anthropic":
        from anthropic.types import StopReason

        return set(typing.get_args(StopReason))
    from google.genai import types

    return {str(m.value) for m in types.FinishReason} - {"FINISH_REASON_UNSPECIFIED"}


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_each_provider_maps_every_stop_reason_of_its_sdk(provider: str) -> None:
    """A stop reason the SDK adds fails here until its provider's table says how to read
    it; none is read as whole by default (an unknown one is incomplete, never read)."""
    from importlib import import_module

    from flask_eval.workers.judge import FINISHED, INCOMPLETE, finish_of

    table = import_module(f"flask_eval.workers.providers.{provider}_judge").STOP_REASONS
    missing = _sdk_stop_reasons(provider) - set(table)
    assert not missing, f"{provider}: say how to read {sorted(missing)} in STOP_REASONS"
    assert set(table.values()) <= {"stop", "length", "context", "refusal", "incomplete"}
    assert finish_of("something_new", table, 10, 100) == INCOMPLETE
    whole = {
        "openai": {"stop", "eos_token", "stop_sequence"},
        "anthropic": {"end_turn", "stop_sequence"},
        "gemini": {"STOP"},
    }[provider]
    assert {r for r, f in table.items() if f == FINISHED} == whole


def test_anthropic_stop_reasons_that_are_not_a_whole_answer() -> None:
    from flask_eval.workers.judge import CONTEXT_FULL, CUT_OFF, FINISHED, INCOMPLETE, REFUSAL
    from flask_eval.workers.providers.anthropic_judge import output_of

    def out(reason: object, blocks: object = None) -> Any:
        body = {
            "type": "message",
            "content": [{"type": "text", "text": "Fine. [SCORES] {}"}]
            if blocks is None
            else blocks,
            "stop_reason": reason,
            "usage": {"input_tokens": 5, "output_tokens": 7},
        }
        return output_of(body, json.dumps(body).encode(), 1024)

    assert (out("end_turn").finish, out("end_turn").stop_reason) == (FINISHED, "end_turn")
    assert out("pause_turn").finish == INCOMPLETE
    assert out("tool_use").finish == INCOMPLETE
    assert out("model_context_window_exceeded").finish == CONTEXT_FULL
    assert out("max_tokens").finish == CUT_OFF
    assert out("refusal").finish == REFUSAL
    assert out("end_turn", []).finish == REFUSAL  # a whole answer without a word
    for body in ([], {"content": None}, {"content": "text"}, {"content": [{"type": "text"}]}):
        with pytest.raises(JudgeError) as bad:
            output_of(body, json.dumps(body).encode(), 1024)
        assert bad.value.reason == FailureReason.PROVIDER_ERROR
        assert bad.value.raw == json.dumps(body)  # the body is kept


def test_openai_finish_reasons_and_a_null_one_read_from_the_usage() -> None:
    """``finish_reason: null`` (some compatible servers): an answer that spent its whole
    max_tokens is cut off, a shorter one (or one without usage) is whole."""
    from flask_eval.workers.judge import CUT_OFF, FINISHED, INCOMPLETE, REFUSAL
    from flask_eval.workers.providers.openai_judge import output_of

    def out(reason: object, content: object = "Fine.", used: int | None = 7, **message: Any) -> Any:
        body: dict[str, Any] = {
            "choices": [
                {
                    "finish_reason": reason,
                    "message": {"role": "assistant", "content": content, **message},
                }
            ]
        }
        if used is not None:
            body["usage"] = {"prompt_tokens": 5, "completion_tokens": used}
        return output_of(body, json.dumps(body).encode(), 100)

    assert out("stop").finish == FINISHED and out("length").finish == CUT_OFF
    assert out(None).finish == FINISHED and out(None).stop_reason == ""
    assert out(None, used=100).finish == CUT_OFF  # the whole budget: cut off
    assert out(None, used=None).finish == FINISHED  # nothing says otherwise
    assert out("tool_calls", None).finish == INCOMPLETE
    assert out("some_server_reason").finish == INCOMPLETE
    refused = out("stop", None, refusal="I can't.")
    assert (refused.finish, refused.text) == (REFUSAL, "I can't.")
    assert out("content_filter", None).finish == REFUSAL
    for body in ([], {"choices": []}, {"choices": [{"message": None}]}):
        with pytest.raises(JudgeError) as bad:
            output_of(body, json.dumps(body).encode(), 100)
        assert bad.value.reason == FailureReason.PROVIDER_ERROR and bad.value.raw
    with pytest.raises(JudgeError, match="content is null"):
        out("stop", None)  # a whole answer with nothing in it


# -- OpenAI-compatible providers: data, not files ------------------------------------


def test_an_openai_compatible_provider_is_a_row_of_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each row of the table is a provider: its base URL by default, its own key
    variable (required where its API requires one), never OPENAI_API_KEY."""
    from flask_eval.workers.judge import judge_class, known_providers
    from flask_eval.workers.providers.compatible import COMPATIBLE
    from flask_eval.workers.providers.openai_judge import OpenAIJudge

    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-not-for-others")
    for name, api in COMPATIBLE.items():
        monkeypatch.delenv(api.key_env, raising=False)
        assert name in known_providers() and spec_of(f"{name}/some-model").provider == name
        cls = judge_class(name)
        assert issubclass(cls, OpenAIJudge) and cls.key_env == api.key_env
        if api.key_required:
            with pytest.raises(CredentialsError, match=api.key_env):
                create_judge(f"{name}/some-model")
        monkeypatch.setenv(api.key_env, f"{name}-key-123456")
        judge: Any = create_judge(f"{name}/some-model")
        assert str(judge._client.base_url).rstrip("/") == api.base_url
        assert judge._client.api_key == f"{name}-key-123456"
    with pytest.raises(ConfigError, match="MISTRAL_API_KEY"):  # the hint names its variable
        spec_of("mistral/m@http://u:p@h/v1")


def test_mistral_through_the_simulator_with_its_own_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """``mistral/mistral-large-latest`` sends MISTRAL_API_KEY (the server refuses any
    other) and is judged like any OpenAI-compatible judge."""
    from flask_eval.simulator.config import SimConfig
    from flask_eval.simulator.testing import running_simulator
    from flask_eval.workers.judge import FINISHED

    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-not-for-others")
    monkeypatch.setenv("MISTRAL_API_KEY", "mistral-key-0123456")
    with running_simulator(SimConfig(require_key="mistral-key-0123456")) as sim:
        spec = f"mistral/mistral-large-latest@{sim.openai_base_url}"
        out = _generate(spec)
        monkeypatch.setenv("MISTRAL_API_KEY", "a-wrong-key-000")
        refused = _generate(spec)
    assert out.finish == FINISHED and "[SCORES]" in out.text
    assert isinstance(refused, JudgeError) and refused.reason == FailureReason.AUTH


def test_judges_share_one_verifying_tls_context(monkeypatch: pytest.MonkeyPatch) -> None:
    """Six judges of the three providers load the CA bundle once between them (each client
    loaded it before: 31-150 ms of CPU per judge, paid twice by every run), and the shared
    context still verifies certificates and host names."""
    import asyncio
    import ssl

    from flask_eval.workers.providers.openai_judge import tls_context

    loads: list[object] = []
    real = ssl.SSLContext.load_verify_locations

    def counted(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append(args or kwargs)
        real(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    tls_context.cache_clear()
    judges = [
        create_judge(f"{provider}/m@http://127.0.0.1:9")
        for provider in ("openai", "anthropic", "gemini")
        for _ in range(2)
    ]
    assert len(loads) == 1
    context = tls_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname

    async def close() -> None:
        for judge in judges:
            await judge.aclose()

    asyncio.run(close())
