"""Google Gemini through the official google-genai SDK: the call, its error mapping, its key,
its base URL (the API root, without ``/v1beta``: the SDK adds
``/v1beta/models/MODEL:generateContent``) and its HTTP pool.

What the SDK does unless told otherwise, and why this file tells it:

- with aiohttp importable (the simulator's dependency, so in every worker) ``client.aio``
  sends through aiohttp, not httpx: no pool limits of ours, and a connection error is
  retried once after a hidden 1-10 s sleep. We hand it our own httpx2 client (pool capped
  like the other providers') and ``HttpRetryOptions(attempts=1)``: one request per call,
  our runner's retry loop is the only one;
- it follows "continuation" answers and runs automatic function calling, both extra
  requests we would not count: off;
- its API version, base URL, key and Vertex mode come from ``GOOGLE_GENAI_*`` /
  ``GOOGLE_*`` variables: the version is pinned and Vertex is off, so a stray variable
  never changes the path a worker asks.

Structured outputs (``GenerateConfig.schema``): ``response_mime_type`` application/json
with ``response_json_schema``, which takes JSON Schema as it is (``response_schema``
takes the API's older OpenAPI subset, without ``additionalProperties``); the answer is
the candidate's text, the JSON object.

Images (docs/design/images.md): a user message that holds one is sent as its parts in
the prompt's order, each stretch of text a text part and each image an ``inline_data``
part built by the SDK (``types.Part.from_bytes(data=..., mime_type=...)``; the SDK
writes its bytes in URL-safe base64 on the wire). Gemini reads PNG, JPEG and WebP (not
GIF: such a prompt fails as ``config``). A message without images is one text part, as
before.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from flask_eval.core.errors import ConfigError, CredentialsError, FailureReason, JudgeError
from flask_eval.core.text import clip
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
)
from flask_eval.workers.providers.images import check_images, runs
from flask_eval.workers.providers.openai_judge import http_limits, tls_context

if TYPE_CHECKING:
    from google.genai import errors, types

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
#: pinned: the SDK's default moved between releases (3.x asks ``v1``) and
#: GOOGLE_GENAI_API_VERSION would move it again
API_VERSION = "v1beta"
#: our variable first (the one every message names), then the SDK's other one
KEY_ENVS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
#: the image types Gemini reads (ai.google.dev, "Image understanding": PNG, JPEG, WEBP,
#: HEIC, HEIF; of ours, all but GIF)
IMAGE_TYPES = ("image/png", "image/jpeg", "image/webp")
#: every ``FinishReason`` of the SDK (a test holds this table to it); any other is
#: incomplete. Left out or unspecified (rare): read from the usage (``finish_of``).
STOP_REASONS: Mapping[str, str] = {
    "STOP": FINISHED,
    "MAX_TOKENS": CUT_OFF,
    "CONTINUATION": CUT_OFF,  # the per-request token limit, to be continued
    **dict.fromkeys(
        (
            "SAFETY",
            "RECITATION",
            "LANGUAGE",
            "OTHER",
            "BLOCKLIST",
            "PROHIBITED_CONTENT",
            "SPII",
            "IMAGE_SAFETY",
            "IMAGE_PROHIBITED_CONTENT",
            "IMAGE_RECITATION",
            "ESCALATION",
            "PUP_LIMITED_DISABLED",
            "MODEL_ARMOR",
        ),
        REFUSAL,
    ),  # the model or a filter declined: the text says which
    **dict.fromkeys(
        (
            "MALFORMED_FUNCTION_CALL",
            "UNEXPECTED_TOOL_CALL",
            "TOO_MANY_TOOL_CALLS",
            "MISSING_THOUGHT_SIGNATURE",
            "MALFORMED_RESPONSE",
            "IMAGE_OTHER",
            "NO_IMAGE",
        ),
        INCOMPLETE,
    ),  # stopped short of an answer (we offer no tools, ask for no image)
}
_UNSTATED = (None, "FINISH_REASON_UNSPECIFIED")
#: the HTTP answer of the current call (our httpx client's response hook sets it, in the
#: call's task): the body a malformed answer keeps, which the SDK's parsing loses
_ANSWER: ContextVar[Any] = ContextVar("gemini_answer", default=None)
#: what the SDK adds to a base URL: a version, then models/MODEL:generateContent
_VERSION = re.compile(r"v\d+(?:alpha|beta)?\d*")
_METHOD = re.compile(r"[^/]*:(?:stream)?generateContent", re.IGNORECASE)
#: a google.protobuf.Duration in JSON (RetryInfo.retryDelay): "7s", "1.5s"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)s")


class GeminiJudge(Judge):
    key_env = KEY_ENVS[0]
    base_url_env = "GOOGLE_GEMINI_BASE_URL"
    takes_schema = True
    image_types = IMAGE_TYPES

    def __init__(self, spec: JudgeSpec, max_connections: int | None = None) -> None:
        super().__init__(spec, max_connections)
        import httpx2
        from google import genai  # lazy: only workers that use this provider import the SDK
        from google.genai import types

        env_url = os.environ.get(self.base_url_env, "").rstrip("/")
        base_url = spec.base_url or env_url or DEFAULT_BASE_URL
        key = self.api_key()
        if not key:
            if base_url == DEFAULT_BASE_URL:
                raise CredentialsError(
                    f"judge {spec.name}: set GEMINI_API_KEY (or GOOGLE_API_KEY) in the environment"
                )
            key = "EMPTY"  # a local or proxied server: the SDK refuses to run without a key
        self._http = httpx2.AsyncClient(
            limits=http_limits(self.max_connections),
            verify=tls_context(),
            event_hooks={"response": [_remember]},
        )
        self._client = genai.Client(
            vertexai=False,
            api_key=key,
            http_options=types.HttpOptions(
                base_url=base_url,
                api_version=API_VERSION,
                retry_options=types.HttpRetryOptions(attempts=1),  # one retry loop: ours
                httpx_async_client=self._http,
                # our context for the SDK's own clients too (else it builds one more)
                client_args={"verify": tls_context()},
                async_client_args={"ssl": tls_context()},
            ),
        )

    def api_key(self) -> str | None:
        """GEMINI_API_KEY, else GOOGLE_API_KEY (the budget key tags the one sent)."""
        return next((os.environ[n] for n in KEY_ENVS if os.environ.get(n)), None)

    @classmethod
    def check_spec(cls, spec: JudgeSpec) -> None:
        if ".." in spec.model:  # the SDK refuses it at the first call
            raise ConfigError(f"invalid model name {clip(spec.model)} in judge {spec.name}")
        if not spec.base_url:
            return
        parts = urlsplit(spec.base_url)
        cut = _sdk_part(parts.path.rstrip("/").split("/"))
        if cut is not None:
            root = f"{parts.scheme}://{parts.netloc}{'/'.join(parts.path.split('/')[:cut])}"
            raise ConfigError(
                f"judge {spec.name}: a Gemini base URL is the API root without /v1beta "
                f"(the SDK adds /{API_VERSION}/models/MODEL:generateContent), e.g. {root}"
            )

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> JudgeOutput:
        check_images(self.spec.name, messages, self.image_types)
        contents, request = request_of(messages, config)
        _ANSWER.set(None)
        try:
            response = await self._client.aio.models.generate_content(
                model=self.spec.model, contents=contents, config=request
            )
        except Exception as exc:
            raise self.classify(exc) from exc
        answer = _ANSWER.get()
        return output_of(response, config.max_tokens, lambda: answer.text if answer else "")

    def classify(self, exc: BaseException) -> JudgeError:
        import httpx2
        import pydantic
        from google.genai import errors

        if isinstance(exc, errors.APIError):
            return _status_error(exc)
        if isinstance(exc, httpx2.TimeoutException):
            return JudgeError(FailureReason.TIMEOUT, describe(exc))
        if isinstance(exc, httpx2.TransportError):  # refused, reset, closed mid-answer
            return JudgeError(FailureReason.PROVIDER_ERROR, describe(exc))
        if isinstance(exc, json.JSONDecodeError):  # a 200 whose body is not JSON
            return not_json(exc.doc)
        if isinstance(exc, pydantic.ValidationError):  # JSON, but not a GenerateContentResponse
            return JudgeError(FailureReason.PROVIDER_ERROR, describe(exc))
        return classify_common(exc)

    async def aclose(self) -> None:
        await self._client.aio.aclose()
        await self._http.aclose()  # ours: the SDK leaves a client it was given open
        self._client.close()  # the sync pool the SDK builds beside it (never used)


def request_of(
    messages: Sequence[Message], config: GenerateConfig
) -> tuple[list[types.Content], types.GenerateContentConfig]:
    """Our messages as generateContent's: system messages become the system instruction,
    user and assistant turns the contents (roles ``user`` and ``model``), each message's
    parts joined (Gemini caches a repeated prefix by itself: nothing marks it); a message
    with images is its text and ``inline_data`` parts in order (:func:`parts_of`)."""
    from google.genai import types

    system = "\n\n".join(text_of(m) for m in messages if m["role"] == "system")
    contents = [
        types.Content(role="model" if m["role"] == "assistant" else "user", parts=parts_of(m))
        for m in messages
        if m["role"] != "system"
    ]
    request = types.GenerateContentConfig(
        system_instruction=system or None,
        max_output_tokens=config.max_tokens,
        temperature=config.temperature,  # None: left out, the model's default
        seed=config.seed,  # a repeated judgment's later sample; None: left out
        http_options=types.HttpOptions(timeout=max(1, round(config.timeout * 1000))),  # ms
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        automatic_continuation=False,
    )
    if config.schema is not None:
        request.response_mime_type = "application/json"
        request.response_json_schema = dict(config.schema)
    return contents, request


def parts_of(message: Message) -> list[types.Part]:
    """A message's parts: its text as one part when it holds no image, else each stretch
    of text a text part and each image an ``inline_data`` part (the SDK's own
    ``Part.from_bytes``), in order."""
    from google.genai import types

    if not images_of(message):
        return [types.Part(text=text_of(message))]
    return [
        types.Part(text=run)
        if isinstance(run, str)
        else types.Part.from_bytes(data=run.data, mime_type=run.ref.media_type)
        for run in runs(message)
    ]


def output_of(
    response: types.GenerateContentResponse,
    max_tokens: int,
    body: Callable[[], str] = lambda: "",
) -> JudgeOutput:
    """The first candidate's text (its thoughts left out) and why it stopped
    (:data:`STOP_REASONS`): a refusal's text keeps the reason and any partial text, as
    does a blocked prompt's. Thinking tokens are billed as output, so they count as
    completion tokens; ``cachedContentTokenCount``, the prompt tokens served from the
    cache (implicit caching), is part of ``promptTokenCount``. No candidate (nor a
    blocked prompt), or a whole candidate without content, is JSON that is not an answer:
    a ``provider_error`` that keeps ``body()``."""
    from google.genai import types

    usage = response.usage_metadata or types.GenerateContentResponseUsageMetadata()
    prompt = usage.prompt_token_count or 0  # cached tokens included
    output = (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
    cached = usage.cached_content_token_count or 0
    given = usage.model_dump(mode="json", by_alias=True, exclude_none=True)
    if not response.candidates:
        feedback = response.prompt_feedback
        if feedback is None or feedback.block_reason is None:
            raise malformed("no candidates", body())
        why = f"the prompt was blocked: {_name(feedback.block_reason)}"
        if feedback.block_reason_message:
            why += f": {feedback.block_reason_message}"
        return JudgeOutput(why, prompt, output, finish=REFUSAL, cached_tokens=cached, usage=given)
    candidate = response.candidates[0]
    parts = (candidate.content.parts if candidate.content else None) or []
    text = "".join(p.text for p in parts if p.text and not p.thought)
    reason = _name(candidate.finish_reason)
    said = reason or ""
    unstated = reason in _UNSTATED
    finish = finish_of(None if unstated else reason, STOP_REASONS, output, max_tokens)
    if finish == FINISHED and candidate.content is None:
        raise malformed("a whole candidate without content", body())
    if finish != REFUSAL:
        return JudgeOutput(
            text, prompt, output, finish=finish, stop_reason=said, cached_tokens=cached, usage=given
        )
    why = f"finishReason {reason}"
    blocked = [_name(r.category) for r in candidate.safety_ratings or () if r.blocked]
    if blocked:
        why += f" (blocked: {', '.join(str(b) for b in blocked)})"
    if candidate.finish_message:
        why += f": {candidate.finish_message}"
    text = f"{why}\n{text}" if text else why
    return JudgeOutput(
        text, prompt, output, finish=REFUSAL, stop_reason=said, cached_tokens=cached, usage=given
    )


async def _remember(response: Any) -> None:
    """Our httpx client's response hook: the current call's HTTP answer (its body is read
    by the time the SDK returns)."""
    _ANSWER.set(response)


def _sdk_part(segments: list[str]) -> int | None:
    """Where the part the SDK adds begins in a base URL's path segments, if it has one:
    ``.../models[/MODEL[:generateContent]]`` (and the version before it), or a trailing
    version. A version inside the path is a gateway's own (``/v1/ACCOUNT/GATEWAY/...``)."""
    for i, segment in enumerate(segments):
        collection = segment in ("models", "tunedModels") and len(segments) - i <= 2
        if collection or _METHOD.fullmatch(segment):
            return i - 1 if i > 1 and _VERSION.fullmatch(segments[i - 1]) else i
    return len(segments) - 1 if _VERSION.fullmatch(segments[-1]) else None


def _name(value: object) -> str | None:
    """An SDK enum's wire name (``FinishReason.STOP`` -> ``"STOP"``)."""
    if value is None:
        return None
    return str(getattr(value, "value", value))


def _status_error(exc: errors.APIError) -> JudgeError:
    """An HTTP error through the shared table, after what only Gemini says: a wrong key is
    a 400 whose ErrorInfo reason is API_KEY_INVALID (auth, not a refusal), and a 429's wait
    is in a RetryInfo (``retryDelay``) rather than a Retry-After header."""
    response = exc.response
    headers = dict(getattr(response, "headers", None) or {})
    body = getattr(response, "text", None)
    if not isinstance(body, str):
        body = json.dumps(exc.details, default=str)
    details = _details(exc.details)
    status = exc.code if isinstance(exc.code, int) and exc.code else 500
    if status == 400 and any(d.get("reason") == "API_KEY_INVALID" for d in details):
        status = 401
    if status == 429 and not any(k.lower() == "retry-after" for k in headers):
        delays = [m[1] for d in details if (m := _DURATION.fullmatch(str(d.get("retryDelay"))))]
        if delays:
            headers["retry-after"] = delays[0]
    return from_status(status, describe(exc), headers, body)


def _details(payload: object) -> list[Mapping[str, Any]]:
    """The ``error.details`` entries of a Gemini error body (google.rpc.Status)."""
    error = payload.get("error", payload) if isinstance(payload, Mapping) else None
    details = error.get("details") if isinstance(error, Mapping) else None
    return [d for d in details if isinstance(d, Mapping)] if isinstance(details, list) else []
