"""OpenAI and any OpenAI-compatible server (vLLM, llama.cpp, Ollama, ...) through the
official SDK: the call, its error mapping, its key and its base URL."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from core.errors import ConfigError, CredentialsError, FailureReason, JudgeError
from core.types import JudgeSpec
from workers.errors import classify_common, describe, from_status, not_json
from workers.judge import CUT_OFF, FINISHED, REFUSAL, GenerateConfig, Judge, JudgeOutput, Message

#: the SDK's own default, passed explicitly: the SDK would take an empty OPENAI_BASE_URL
#: (as docker compose sets it) as the base URL
DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAIJudge(Judge):
    key_env = "OPENAI_API_KEY"

    def __init__(self, spec: JudgeSpec, max_connections: int | None = None) -> None:
        super().__init__(spec, max_connections)
        import openai  # lazy: only workers that use this provider import the SDK

        base_url = spec.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        key = self.api_key()
        if not key:
            if base_url == DEFAULT_BASE_URL:
                raise CredentialsError(f"judge {spec.name}: set OPENAI_API_KEY in the environment")
            key = "EMPTY"  # OpenAI-compatible servers usually accept any key
        self._client = openai.AsyncOpenAI(
            api_key=key,
            base_url=base_url,
            max_retries=0,  # one retry loop only: ours (workers/runner.py)
            http_client=openai.DefaultAsyncHttpxClient(limits=http_limits(self.max_connections)),
        )

    @classmethod
    def check_spec(cls, spec: JudgeSpec) -> None:
        if spec.base_url and spec.base_url.rstrip("/").endswith("/chat/completions"):
            raise ConfigError(
                f"judge {spec.name}: the base URL is the server's API root (e.g. "
                "http://host:8000/v1), without /chat/completions"
            )

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> JudgeOutput:
        options: dict[str, Any] = {}
        if config.temperature is not None:
            options["temperature"] = config.temperature
        try:
            completion = await self._client.chat.completions.create(
                model=self.spec.model,
                messages=list(messages),  # type: ignore[arg-type]
                max_tokens=config.max_tokens,
                timeout=config.timeout,
                **options,
            )
        except Exception as exc:
            raise self.classify(exc) from exc
        if isinstance(completion, str):  # the SDK hands back a body that was not JSON
            raise not_json(completion)
        choice = completion.choices[0] if completion.choices else None
        usage = completion.usage
        tokens = (usage.prompt_tokens, usage.completion_tokens) if usage else (0, 0)
        if choice is None:
            raise JudgeError(FailureReason.PROVIDER_ERROR, "the answer has no choices")
        text = choice.message.content
        if text is None or choice.finish_reason == "content_filter":
            refusal = getattr(choice.message, "refusal", None) or text or ""
            return JudgeOutput(refusal, *tokens, finish=REFUSAL)
        finish = CUT_OFF if choice.finish_reason == "length" else FINISHED
        return JudgeOutput(text, *tokens, finish=finish)

    def classify(self, exc: BaseException) -> JudgeError:
        import openai

        if isinstance(exc, openai.APITimeoutError):
            return JudgeError(FailureReason.TIMEOUT, describe(exc))
        if isinstance(exc, openai.APIStatusError):
            response = exc.response
            return from_status(exc.status_code, describe(exc), dict(response.headers),
                               response.text)  # fmt: skip
        if isinstance(exc, openai.APIConnectionError | openai.APIResponseValidationError):
            return JudgeError(FailureReason.PROVIDER_ERROR, describe(exc))
        return classify_common(exc)

    async def aclose(self) -> None:
        await self._client.close()


def http_limits(n: int) -> Any:
    """The SDK client's pool: up to ``n`` connections, but only a few kept idle.

    httpx probes the socket of every idle pooled connection each time a request starts
    or ends, so a pool holding dozens of idle connections costs CPU on every call. With
    64 connections, keeping 8 idle instead of 64 cut a worker's CPU per call by 10-15%
    at 0 ms latency (docs/design/concurrency.md). Busy connections are never closed by
    this cap, so latency-bound runs keep all ``n`` open.
    """
    import httpx2

    return httpx2.Limits(max_connections=n, max_keepalive_connections=keepalive_for(n))


def keepalive_for(n: int) -> int:
    """Idle connections kept for a pool of ``n``: an eighth, at least 8."""
    return min(n, max(8, n // 8))
