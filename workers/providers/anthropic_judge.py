"""Anthropic's messages API through the official SDK: the call, its error mapping, its key
and its base URL (the API root, without ``/v1``: the SDK adds it).

Structured outputs (``GenerateConfig.schema``): the SDK's own option,
``output_config={"format": {"type": "json_schema", "schema": ...}}``, whose answer is a
text block holding the JSON object, decoded under the schema. The schema goes through
the SDK's ``transform_schema`` first (the API takes a subset of JSON Schema: it closes
every object and moves bounds such as ``minimum`` into descriptions). A forced tool
call would also carry a schema, but the model may still stray from it; the format
option holds the answer to it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from flask_eval.core.errors import ConfigError, CredentialsError, FailureReason, JudgeError
from flask_eval.core.types import JudgeSpec
from flask_eval.workers.errors import RESET_HEADERS as STANDARD_RESETS
from flask_eval.workers.errors import classify_common, describe, from_status, not_json
from flask_eval.workers.judge import (
    CUT_OFF,
    FINISHED,
    REFUSAL,
    GenerateConfig,
    Judge,
    JudgeOutput,
    Message,
)
from flask_eval.workers.providers.openai_judge import http_limits

DEFAULT_BASE_URL = "https://api.anthropic.com"
#: Anthropic says when its request budget resets in a header of its own
RESET_HEADERS = (*STANDARD_RESETS, "anthropic-ratelimit-requests-reset")


class AnthropicJudge(Judge):
    key_env = "ANTHROPIC_API_KEY"
    takes_temperature = False  # the current SDK's messages.create has no temperature
    takes_schema = True

    def __init__(self, spec: JudgeSpec, max_connections: int | None = None) -> None:
        super().__init__(spec, max_connections)
        import anthropic  # lazy

        base_url = spec.base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        key = self.api_key()
        if not key:
            if base_url == DEFAULT_BASE_URL:
                raise CredentialsError(
                    f"judge {spec.name}: set ANTHROPIC_API_KEY in the environment"
                )
            key = "EMPTY"
        self._client = anthropic.AsyncAnthropic(
            api_key=key,
            base_url=base_url,
            max_retries=0,  # one retry loop only: ours
            http_client=anthropic.DefaultAsyncHttpxClient(limits=http_limits(self.max_connections)),
        )

    @classmethod
    def check_spec(cls, spec: JudgeSpec) -> None:
        path = (spec.base_url or "").rstrip("/")
        if path.endswith(("/v1", "/v1/messages")):
            raise ConfigError(
                f"judge {spec.name}: an Anthropic base URL is the API root without /v1 "
                f"(the SDK adds /v1/messages), e.g. {path.rsplit('/v1', 1)[0] or path}"
            )

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> JudgeOutput:
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        chat = [
            {"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"
        ]
        options: dict[str, Any] = {}
        if config.schema is not None:
            options["output_config"] = output_config(config.schema)
        try:
            message = await self._client.messages.create(
                model=self.spec.model,
                system=system,
                messages=chat,  # type: ignore[arg-type]
                max_tokens=config.max_tokens,
                # the current SDK takes no temperature: the model's default applies
                timeout=config.timeout,
                **options,
            )
        except Exception as exc:
            raise self.classify(exc) from exc
        if isinstance(message, str):  # the SDK hands back a body that was not JSON
            raise not_json(message)
        texts = [
            getattr(b, "text", "") for b in message.content if getattr(b, "type", "") == "text"
        ]
        usage = message.usage
        tokens = (usage.input_tokens, usage.output_tokens) if usage else (0, 0)
        if not texts or message.stop_reason == "refusal":
            return JudgeOutput("".join(texts), *tokens, finish=REFUSAL)
        finish = CUT_OFF if message.stop_reason == "max_tokens" else FINISHED
        return JudgeOutput("".join(texts), *tokens, finish=finish)

    def classify(self, exc: BaseException) -> JudgeError:
        import anthropic

        if isinstance(exc, anthropic.APITimeoutError):
            return JudgeError(FailureReason.TIMEOUT, describe(exc))
        if isinstance(exc, anthropic.APIStatusError):
            response = exc.response
            return from_status(exc.status_code, describe(exc), dict(response.headers),
                               response.text, RESET_HEADERS)  # fmt: skip
        if isinstance(exc, anthropic.APIConnectionError | anthropic.APIResponseValidationError):
            return JudgeError(FailureReason.PROVIDER_ERROR, describe(exc))
        return classify_common(exc)

    async def aclose(self) -> None:
        await self._client.close()


def output_config(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The ``output_config`` asking for an answer that follows ``schema``."""
    import anthropic

    return {"format": {"type": "json_schema", "schema": anthropic.transform_schema(dict(schema))}}
