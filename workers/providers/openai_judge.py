"""OpenAI and any OpenAI-compatible server (vLLM, llama.cpp, Ollama, ...) through the
official SDK: the call, its error mapping, its key and its base URL.

What a call may carry is its model's (the model table, ``core.models``): OpenAI's API is
sent ``max_completion_tokens`` (which every OpenAI model takes, and its reasoning models
require: they refuse ``max_tokens``, and any temperature but their own, so none is
sent); an OpenAI-compatible server's own models keep ``max_tokens``.

Structured outputs (``GenerateConfig.schema``) come in two ``response_format`` dialects:

- ``{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}``: OpenAI, vLLM
  (guided decoding), llama.cpp's own ``llama-server`` and Ollama;
- ``{"type": "json_object", "schema": ...}``: llama.cpp's ``llama-server`` again and
  llama-cpp-python's server, whose request model allows only ``text`` and
  ``json_object``. vLLM and OpenAI read ``json_object`` as "any JSON object" and drop
  the schema, so it cannot be the one form either.

So a judge asks ``json_schema`` first. A server other than OpenAI's own that refuses it
naming ``json_object`` (llama-cpp-python answers a 500 whose message says the type
should be 'text' or 'json_object') is asked again at once with ``json_object`` and the
schema, and that base URL is asked that way from then on (per process: one refused,
unbilled request per worker). ``strict`` is true only for a schema OpenAI's strict mode
takes (every object closed and all its properties required), which the protocols'
schemas are; OpenAI answers a strict refusal in ``message.refusal``: a REFUSAL.

Images (docs/design/images.md): a message that holds one is sent with ``content`` as a
list of parts, as the SDK types it (``ChatCompletionContentPartTextParam`` and
``ChatCompletionContentPartImageParam``): ``{"type": "text", "text"}`` for each stretch
of text and ``{"type": "image_url", "image_url": {"url": "data:<media type>;base64,..."}}``
for each image, in the order the prompt places them. An ``openai`` judge (OpenAI's API,
or a server named by a base URL) is sent ``"detail": "high"``: the judge reads charts and
text in images at full resolution, and its image tokens follow one documented rule
(512-pixel tiles) that an estimate can count; ``auto`` would let the model choose per
image. An OpenAI-compatible provider of the table (``compatible``) is sent no
``detail``: its server's own default applies (vLLM and llama.cpp ignore the field, other
APIs document only the URL). A message without images is a plain string, as before.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import ssl

from flask_eval.core.errors import ConfigError, CredentialsError, FailureReason, JudgeError
from flask_eval.core.images import MEDIA_TYPES
from flask_eval.core.models import MAX_COMPLETION_TOKENS, MAX_TOKENS, model_info
from flask_eval.core.types import JudgeSpec
from flask_eval.rubrics.messages import images_of, text_of
from flask_eval.workers.errors import classify_common, describe, from_status, malformed, not_json
from flask_eval.workers.judge_base import (
    CUT_OFF,
    FINISHED,
    INCOMPLETE,
    REFUSAL,
    GenerateConfig,
    Judge,
    JudgeOutput,
    Message,
    finish_of,
    usage_count,
)
from flask_eval.workers.providers.images import check_images, data_uri, runs

#: the SDK's own default, passed explicitly: the SDK would take an empty OPENAI_BASE_URL
#: (as docker compose sets it) as the base URL
DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: the two response_format dialects of structured outputs (see the module docstring)
JSON_SCHEMA, JSON_OBJECT = "json_schema", "json_object"
#: the name OpenAI's json_schema format requires (``^[a-zA-Z0-9_-]{1,64}$``)
SCHEMA_NAME = "judgment"


class OpenAIJudge(Judge):
    key_env = "OPENAI_API_KEY"
    takes_schema = True
    image_types = MEDIA_TYPES  # GIF: its first frame only (OpenAI's vision guide)
    #: where requests go unless the spec names a base URL (or ``base_url_env`` is set)
    default_base_url: ClassVar[str] = DEFAULT_BASE_URL
    base_url_env: ClassVar[str | None] = "OPENAI_BASE_URL"
    #: the default base URL refuses requests without a key (else "EMPTY" is sent)
    key_required: ClassVar[bool] = True
    #: base URL -> the response_format dialect it takes, where it refused json_schema
    schema_forms: ClassVar[dict[str, str]] = {}
    #: whether the model table's capabilities apply (OpenAI's own models; an
    #: OpenAI-compatible server's models are its own, and take ``max_tokens``)
    openai_models: ClassVar[bool] = True

    def __init__(self, spec: JudgeSpec, max_connections: int | None = None) -> None:
        super().__init__(spec, max_connections)
        import httpx2  # the SDK's HTTP client
        import openai  # lazy: only workers that use this provider import the SDK

        from_env = os.environ.get(self.base_url_env) if self.base_url_env else None
        base_url = spec.base_url or from_env or self.default_base_url
        self._base_url = base_url
        key = self.api_key()
        if not key:
            if base_url == self.default_base_url and self.key_required:
                raise CredentialsError(f"judge {spec.name}: set {self.key_env} in the environment")
            key = "EMPTY"  # OpenAI-compatible servers usually accept any key
        self._client = openai.AsyncOpenAI(
            api_key=key,
            base_url=base_url,
            max_retries=0,  # one retry loop only: ours (workers/runner.py)
            http_client=openai.DefaultAsyncHttpxClient(
                limits=http_limits(self.max_connections), verify=tls_context()
            ),
        )
        self._response_type = httpx2.Response  # `post` then returns the HTTP response as is

    @classmethod
    def check_spec(cls, spec: JudgeSpec) -> None:
        if spec.base_url and spec.base_url.rstrip("/").endswith("/chat/completions"):
            raise ConfigError(
                f"judge {spec.name}: the base URL is the server's API root (e.g. "
                "http://host:8000/v1), without /chat/completions"
            )

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> JudgeOutput:
        body = self.request_body(messages, config)
        try:
            completion = await self._create(body, config)
        except Exception as exc:
            sent = body.get("response_format", {}).get("type")  # the form this request took
            if config.schema is None or sent != JSON_SCHEMA or not self._refuses_json_schema(exc):
                raise self.classify(exc) from exc
            body["response_format"] = response_format(config.schema, JSON_OBJECT)
            try:
                completion = await self._create(body, config)
            except Exception as again:
                raise self.classify(again) from again
            self.schema_forms[self._base_url] = JSON_OBJECT
        try:
            answer = json.loads(completion)
        except ValueError:  # a body that was not JSON (a proxy's HTML page)
            raise not_json(completion.decode("utf-8", "replace")) from None
        return output_of(answer, completion, config.max_tokens)

    async def _create(self, request: dict[str, Any], config: GenerateConfig) -> bytes:
        """The answer's body as sent.

        The SDK sends, authenticates, times out and raises its errors, through the client's
        ``post`` (the SDK's documented way to call an endpoint without its typed wrapper:
        the client's options apply). Its typed ``create`` costs ~30% more CPU per call
        (bench/bare_sdk.py, ``--call``): it walks the whole request (every message's
        text) to transform TypedDicts, a no-op for our plain JSON, and ``with_raw_response``
        still does that walk; we also read the few fields we need from the body instead of
        building the SDK's pydantic models."""
        raw = await self._client.post(
            "/chat/completions",
            cast_to=self._response_type,
            body=request,
            options={"timeout": config.timeout},
        )
        content: bytes = raw.content
        return content

    def request_body(self, messages: Sequence[Message], config: GenerateConfig) -> dict[str, Any]:
        """The body of a chat completion request as :meth:`generate` first sends it: a
        batch's request lines (workers/providers/openai_batch.py) are these. A prompt
        with an image this judge cannot take fails as ``config`` (nothing is sent)."""
        check_images(self.spec.name, messages, self.image_types)
        detail = "high" if self.openai_models else None
        body: dict[str, Any] = {
            "model": self.spec.model,
            # parts joined: OpenAI caches a prefix by itself
            "messages": [chat_message(m, detail) for m in messages],
            self.limit_field(): config.max_tokens,
        }
        if config.temperature is not None and self.takes_temperature_now():
            body["temperature"] = config.temperature
        if config.seed is not None:  # a repeated judgment's later sample
            body["seed"] = config.seed
        if config.schema is not None:
            form = self.schema_forms.get(self._base_url, JSON_SCHEMA)
            body["response_format"] = response_format(config.schema, form)
        return body

    def limit_field(self) -> str:
        """The request field of the completion budget: ``max_completion_tokens`` on
        OpenAI's own API and for the models the table says need it (OpenAI's reasoning
        models refuse ``max_tokens``, wherever they are served); ``max_tokens`` for the
        other models of an OpenAI-compatible server (which may not know the newer field)."""
        if not self.openai_models:
            return MAX_TOKENS
        model = model_info(self.spec.default_name)
        own_api = self._base_url == DEFAULT_BASE_URL
        needs = model.token_limit == MAX_COMPLETION_TOKENS
        return MAX_COMPLETION_TOKENS if needs and (own_api or model.reasoning) else MAX_TOKENS

    def takes_temperature_now(self) -> bool:
        """Whether this judge's model takes a temperature (OpenAI's reasoning models take
        only their own default and refuse any value sent)."""
        return not self.openai_models or model_info(self.spec.default_name).takes_temperature

    def _refuses_json_schema(self, exc: BaseException) -> bool:
        """Whether ``exc`` is a server other than OpenAI's refusing the json_schema
        dialect because it takes json_object (the module docstring)."""
        import openai

        if self._base_url == DEFAULT_BASE_URL or not isinstance(exc, openai.APIStatusError):
            return False
        if exc.status_code not in (400, 422, 500):
            return False
        text = f"{exc.message} {exc.response.text}".lower()
        return "json_object" in text and ("response_format" in text or "json_schema" in text)

    def classify(self, exc: BaseException) -> JudgeError:
        import openai

        if isinstance(exc, openai.APITimeoutError):
            return JudgeError(FailureReason.TIMEOUT, describe(exc))
        if isinstance(exc, openai.APIStatusError):
            response = exc.response
            return from_status(
                exc.status_code, describe(exc), dict(response.headers), response.text
            )
        if isinstance(exc, openai.APIConnectionError | openai.APIResponseValidationError):
            return JudgeError(FailureReason.PROVIDER_ERROR, describe(exc))
        return classify_common(exc)

    async def aclose(self) -> None:
        await self._client.close()


@functools.cache
def compatible_judge(provider: str) -> type[OpenAIJudge]:
    """The judge class of an OpenAI-compatible provider of the table
    (``workers.providers.compatible.COMPATIBLE``): this judge, with its base URL and key."""
    from flask_eval.workers.providers.compatible import COMPATIBLE

    api = COMPATIBLE[provider]
    attrs = {
        "key_env": api.key_env,
        "default_base_url": api.base_url,
        "base_url_env": None,
        "key_required": api.key_required,
        "openai_models": False,
    }
    return type(f"{provider.title()}Judge", (OpenAIJudge,), attrs)


def chat_message(message: Message, detail: str | None = None) -> dict[str, Any]:
    """``message`` as the chat API takes it: its text as a string when it holds no image
    (exactly ``rubrics.messages.plain``'s), else a list of text and ``image_url`` parts in
    order, each image a ``data:`` URI (with ``detail`` when one is given)."""
    if not images_of(message):
        return {"role": message["role"], "content": text_of(message)}
    content: list[dict[str, Any]] = []
    for run in runs(message):
        if isinstance(run, str):
            content.append({"type": "text", "text": run})
            continue
        url: dict[str, str] = {"url": data_uri(run)}
        if detail is not None:
            url["detail"] = detail
        content.append({"type": "image_url", "image_url": url})
    return {"role": message["role"], "content": content}


def response_format(schema: Mapping[str, Any], form: str) -> dict[str, Any]:
    """The ``response_format`` asking for an answer that follows ``schema``, in ``form``."""
    if form == JSON_OBJECT:
        return {"type": JSON_OBJECT, "schema": capped(schema)}
    spec = {"name": SCHEMA_NAME, "schema": dict(schema), "strict": strict_ready(schema)}
    return {"type": JSON_SCHEMA, "json_schema": spec}


#: the longest free string (a rationale) a json_object server may write: its grammar
#: holds a small model that repeats one sentence to a budget that fits every criterion
#: (OpenAI's strict mode takes no maxLength, so only this dialect gets it)
MAX_FREE_TEXT = 800


def capped(schema: Any) -> Any:
    """``schema`` with every free string (no enum, pattern, format or length of its own)
    limited to :data:`MAX_FREE_TEXT` characters."""
    if isinstance(schema, list):
        return [capped(s) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {k: capped(v) for k, v in schema.items()}
    free = not any(k in schema for k in ("enum", "const", "pattern", "format", "maxLength"))
    if schema.get("type") == "string" and free:
        out["maxLength"] = MAX_FREE_TEXT
    return out


def strict_ready(schema: object) -> bool:
    """Whether OpenAI's strict mode takes ``schema``: every object in it closed
    (``additionalProperties: false``) with all of its properties required. A strict
    request with any other schema is refused (400), a non-strict one is only best effort."""
    if isinstance(schema, list):
        return all(strict_ready(s) for s in schema)
    if not isinstance(schema, Mapping):
        return True
    properties = schema.get("properties")
    if schema.get("type") == "object" or isinstance(properties, Mapping):
        fields = properties if isinstance(properties, Mapping) else {}
        if schema.get("additionalProperties") is not False:
            return False
        if set(schema.get("required") or ()) != set(fields):
            return False
        if not all(strict_ready(s) for s in fields.values()):
            return False
    defs = schema.get("$defs")
    nested = [schema.get(k) for k in ("items", "anyOf", "oneOf", "allOf")]
    nested += list(defs.values()) if isinstance(defs, Mapping) else []
    return all(strict_ready(s) for s in nested if s is not None)


#: every ``finish_reason`` of the SDK's ``Choice`` (a test holds this table to it), then
#: what OpenAI-compatible servers say instead: older TGI (``eos_token``,
#: ``stop_sequence``), vLLM for an aborted request (``abort``); any other is incomplete
STOP_REASONS: Mapping[str, str] = {
    "stop": FINISHED,
    "length": CUT_OFF,
    "content_filter": REFUSAL,
    "tool_calls": INCOMPLETE,  # we offer no tools: not an answer
    "function_call": INCOMPLETE,
    "eos_token": FINISHED,
    "stop_sequence": FINISHED,
    "abort": INCOMPLETE,
}


def output_of(body: object, raw: bytes, max_tokens: int) -> JudgeOutput:
    """The answer of a chat completion's JSON ``body``: its text (or refusal), token usage
    and why it stopped (:data:`STOP_REASONS`; ``finish_reason: null`` by the usage,
    ``workers.judge.finish_of``). JSON that is not a completion (a list, no choices, a
    whole answer whose content is null) is a ``provider_error`` that keeps ``raw``.
    ``usage.prompt_tokens_details.cached_tokens`` (the prompt tokens served from
    OpenAI's prompt cache, counted in ``prompt_tokens`` too) is ``cached_tokens``."""

    def bad(what: str) -> JudgeError:
        return malformed(what, raw.decode("utf-8", "replace"))

    choices = body.get("choices") if isinstance(body, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(body, dict) or not isinstance(choice, dict) or not isinstance(message, dict):
        raise bad("no choices with a message")
    usage = body.get("usage")
    tokens = (usage_count(usage, "prompt_tokens"), usage_count(usage, "completion_tokens"))
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    cached = usage_count(details, "cached_tokens")  # of prompt_tokens
    text, refusal = message.get("content"), message.get("refusal")
    reason = choice.get("finish_reason")
    if (text is not None and not isinstance(text, str)) or not isinstance(reason, str | None):
        raise bad("its content or finish_reason is not text")
    said = reason or ""
    if isinstance(refusal, str) and refusal and (text is None or reason == "content_filter"):
        return JudgeOutput(
            refusal, *tokens, finish=REFUSAL, stop_reason=said, cached_tokens=cached, usage=usage
        )
    finish = finish_of(reason, STOP_REASONS, tokens[1], max_tokens)
    if text is None and finish == FINISHED:
        raise bad("a whole answer whose content is null")
    return JudgeOutput(
        text or "", *tokens, finish=finish, stop_reason=said, cached_tokens=cached, usage=usage
    )


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


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The one TLS context of this process, shared by every judge's HTTP clients.

    Each client would otherwise build its own, and building one loads the CA bundle:
    ~30 ms of CPU per OpenAI or Anthropic client and ~160 ms per Gemini client (whose SDK
    builds two more, for its synchronous client and for websockets), paid again by every
    `run` (its judges are checked, then built again to judge). The context verifies as
    each client's own would (``httpx2.create_ssl_context``: SSL_CERT_FILE and SSL_CERT_DIR
    honoured, read when it is first built).
    """
    import httpx2

    return httpx2.create_ssl_context()


def keepalive_for(n: int) -> int:
    """Idle connections kept for a pool of ``n``: an eighth, at least 8."""
    return min(n, max(8, n // 8))
