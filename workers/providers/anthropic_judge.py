"""Anthropic's messages API through the official SDK."""

from __future__ import annotations

import os
from collections.abc import Sequence

from flask_eval.exceptions import ConfigError
from workers.errors import classify
from workers.judge import GenerateConfig, Judge, JudgeOutput, JudgeSpec, Message, check_not_refused
from workers.providers.openai_judge import http_limits


class AnthropicJudge(Judge):
    def __init__(self, spec: JudgeSpec, max_connections: int | None = None) -> None:
        super().__init__(spec, max_connections)
        import anthropic  # lazy

        key = os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            if spec.base_url is None and not os.environ.get("ANTHROPIC_BASE_URL"):
                raise ConfigError(f"judge {spec.name}: set ANTHROPIC_API_KEY in the environment")
            key = "EMPTY"
        self._client = anthropic.AsyncAnthropic(
            api_key=key,
            base_url=spec.base_url,
            max_retries=0,  # one retry loop only: ours
            http_client=anthropic.DefaultAsyncHttpxClient(limits=http_limits(self.max_connections)),
        )

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> JudgeOutput:
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        chat = [
            {"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"
        ]
        try:
            message = await self._client.messages.create(
                model=self.spec.model,
                system=system,
                messages=chat,  # type: ignore[arg-type]
                max_tokens=config.max_tokens,
                # anthropic 2.x has no temperature parameter: the model's default applies
                timeout=config.timeout,
            )
        except Exception as exc:
            raise classify(exc) from exc
        texts = [
            getattr(b, "text", "") for b in message.content if getattr(b, "type", "") == "text"
        ]
        text = check_not_refused(
            "".join(texts) if texts else None,
            f"no text in the answer (stop_reason={message.stop_reason})",
        )
        return JudgeOutput(text, message.usage.input_tokens, message.usage.output_tokens)

    async def aclose(self) -> None:
        await self._client.close()
