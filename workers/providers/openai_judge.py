"""OpenAI and any OpenAI-compatible server (vLLM, Ollama, ...) through the official SDK."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from flask_eval.exceptions import ConfigError
from workers.errors import classify
from workers.judge import GenerateConfig, Judge, JudgeOutput, JudgeSpec, Message, check_not_refused


class OpenAIJudge(Judge):
    def __init__(self, spec: JudgeSpec, max_connections: int | None = None) -> None:
        super().__init__(spec, max_connections)
        import openai  # lazy: only workers that use this provider import the SDK

        key = os.environ.get("OPENAI_API_KEY")
        if not key:
            if spec.base_url is None and not os.environ.get("OPENAI_BASE_URL"):
                raise ConfigError(f"judge {spec.name}: set OPENAI_API_KEY in the environment")
            key = "EMPTY"  # OpenAI-compatible servers usually accept any key
        self._client = openai.AsyncOpenAI(
            api_key=key,
            base_url=spec.base_url,
            max_retries=0,  # one retry loop only: ours (workers/runner.py)
            http_client=openai.DefaultAsyncHttpxClient(limits=http_limits(self.max_connections)),
        )

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> JudgeOutput:
        try:
            completion = await self._client.chat.completions.create(
                model=self.spec.model,
                messages=list(messages),  # type: ignore[arg-type]
                max_tokens=config.max_tokens,
                temperature=config.temperature,
                timeout=config.timeout,
            )
        except Exception as exc:
            raise classify(exc) from exc
        choice = completion.choices[0] if completion.choices else None
        text = check_not_refused(
            choice.message.content if choice is not None else None,
            f"no text in the answer (finish_reason={getattr(choice, 'finish_reason', None)})",
        )
        usage = completion.usage
        return JudgeOutput(
            text,
            usage.prompt_tokens if usage else 0,
            usage.completion_tokens if usage else 0,
        )

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
