"""Anthropic's messages API through the official SDK: the call, its error mapping, its key
and its base URL (the API root, without ``/v1``: the SDK adds it).

The call goes through the SDK client's ``post`` with the JSON body built here, as the
OpenAI judge's does (docs/design/concurrency.md): the client still authenticates, times
out and raises its error types, and the answer's body is read here, field by field, so
a body that is not a message is a ``provider_error`` that keeps the body (the typed
``messages.create`` handed back whatever JSON came and failed later, as ``internal``).

Prompt caching: Anthropic caches a prompt only up to a content block marked
``cache_control`` (:func:`request_of` marks where the protocol's shared prefix ends), and
its usage reports the tokens read from the cache and written to it apart from
``input_tokens`` (:func:`output_of` adds them back: ``prompt_tokens`` counts them all).

Structured outputs (``GenerateConfig.schema``): the SDK's own option,
``output_config={"format": {"type": "json_schema", "schema": ...}}``, whose answer is a
text block holding the JSON object, decoded under the schema. The schema goes through
the SDK's ``transform_schema`` first (the API takes a subset of JSON Schema: it closes
every object and moves bounds such as ``minimum`` into descriptions). A forced tool
call would also carry a schema, but the model may still stray from it; the format
option holds the answer to it.

Images (docs/design/images.md): a user message that holds one is sent as content
blocks in the prompt's order, each image an ``image`` block with a ``base64`` source
(the SDK's ``ImageBlockParam``: ``{"type": "image", "source": {"type": "base64",
"media_type", "data"}}``) and the text around it ``text`` blocks; the cache breakpoints
stay where the text's prefixes end (the images come after the shared prefix, so its
block, ``cache_control`` and all, is the one a prompt without images sends). A message
without images is sent exactly as before.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from flask_eval.core.errors import ConfigError, CredentialsError, FailureReason, JudgeError
from flask_eval.core.images import MEDIA_TYPES
from flask_eval.core.types import JudgeSpec
from flask_eval.rubrics.messages import images_of, parts_of, text_of
from flask_eval.workers.errors import RESET_HEADERS as STANDARD_RESETS
from flask_eval.workers.errors import classify_common, describe, from_status, malformed, not_json
from flask_eval.workers.judge_base import (
    CONTEXT_FULL,
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
from flask_eval.workers.providers.images import base64_of, check_images, runs
from flask_eval.workers.providers.openai_judge import http_limits, tls_context

DEFAULT_BASE_URL = "https://api.anthropic.com"
#: Anthropic says when its request budget resets in a header of its own
RESET_HEADERS = (*STANDARD_RESETS, "anthropic-ratelimit-requests-reset")


class AnthropicJudge(Judge):
    key_env = "ANTHROPIC_API_KEY"
    base_url_env = "ANTHROPIC_BASE_URL"
    takes_temperature = False  # the current SDK's messages.create has no temperature
    takes_schema = True
    image_types = MEDIA_TYPES  # the SDK's Base64ImageSourceParam media types

    def __init__(self, spec: JudgeSpec, max_connections: int | None = None) -> None:
        super().__init__(spec, max_connections)
        import anthropic  # lazy
        import httpx2  # the SDK's HTTP client

        base_url = spec.base_url or os.environ.get(self.base_url_env) or DEFAULT_BASE_URL
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
            http_client=anthropic.DefaultAsyncHttpxClient(
                limits=http_limits(self.max_connections), verify=tls_context()
            ),
        )
        self._response_type = httpx2.Response  # `post` then returns the HTTP response as is

    @classmethod
    def check_spec(cls, spec: JudgeSpec) -> None:
        path = (spec.base_url or "").rstrip("/")
        if path.endswith(("/v1", "/v1/messages")):
            raise ConfigError(
                f"judge {spec.name}: an Anthropic base URL is the API root without /v1 "
                f"(the SDK adds /v1/messages), e.g. {path.rsplit('/v1', 1)[0] or path}"
            )

    def request_body(self, messages: Sequence[Message], config: GenerateConfig) -> dict[str, Any]:
        """The Messages API body of a call (live, or one request of a message batch); a
        prompt with an image this judge cannot take fails as ``config``."""
        check_images(self.spec.name, messages, self.image_types)
        return request_of(self.spec.model, messages, config)

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> JudgeOutput:
        request = self.request_body(messages, config)
        try:  # the SDK's client sends, authenticates, times out and raises (as OpenAI's)
            raw = await self._client.post(
                "/v1/messages",
                cast_to=self._response_type,
                body=request,
                options={"timeout": config.timeout},
            )
        except Exception as exc:
            raise self.classify(exc) from exc
        content: bytes = raw.content
        try:
            body = json.loads(content)
        except ValueError:  # a body that was not JSON (a proxy's HTML page)
            raise not_json(content.decode("utf-8", "replace")) from None
        return output_of(body, content, config.max_tokens)

    def classify(self, exc: BaseException) -> JudgeError:
        import anthropic

        if isinstance(exc, anthropic.APITimeoutError):
            return JudgeError(FailureReason.TIMEOUT, describe(exc))
        if isinstance(exc, anthropic.APIStatusError):
            response = exc.response
            return from_status(
                exc.status_code, describe(exc), dict(response.headers), response.text, RESET_HEADERS
            )
        if isinstance(exc, anthropic.APIConnectionError | anthropic.APIResponseValidationError):
            return JudgeError(FailureReason.PROVIDER_ERROR, describe(exc))
        return classify_common(exc)

    async def aclose(self) -> None:
        await self._client.close()


#: the mark of the last block of a cached prefix (Anthropic's only cache type)
EPHEMERAL: Mapping[str, str] = {"type": "ephemeral"}


def request_of(model: str, messages: Sequence[Message], config: GenerateConfig) -> dict[str, Any]:
    """The Messages API body of a call (the batch API's ``params`` too): system messages
    become ``system``, the others ``messages``. Where the protocol's shared prefix ends
    (the last part marked ``ends_prefix``, ``rubrics.messages``) a content block with
    ``cache_control`` (:data:`EPHEMERAL`) ends, and so does one at the end of each
    instance's prefix after it (``Part.ends_instance``); earlier marks add nothing (the
    API looks for a cached prefix at the blocks before a breakpoint by itself). A message
    without a breakpoint is a plain string; the blocks' texts joined are its text."""
    marks = [_cuts(m) for m in messages]
    last = max(
        (i for i, cuts in enumerate(marks) for _, kind in cuts if kind == "prefix"), default=-1
    )
    kept: list[list[int]] = []
    for i, cuts in enumerate(marks):
        at_last = [c for c, kind in cuts if kind == "prefix"][-1:] if i == last else []
        instance = [c for c, kind in cuts if kind == "instance" and i >= last]
        kept.append(sorted({*at_last, *instance}))
    systems = [i for i, m in enumerate(messages) if m["role"] == "system"]
    system_text = SYSTEM_SEPARATOR.join(text_of(messages[i]) for i in systems)
    system_cuts: list[int] = []
    offset = 0
    for i in systems:
        system_cuts += [offset + cut for cut in kept[i]]
        offset += len(text_of(messages[i])) + len(SYSTEM_SEPARATOR)
    chat = [
        {"role": m["role"], "content": content_of(m, kept[i])}
        for i, m in enumerate(messages)
        if m["role"] != "system"
    ]
    request: dict[str, Any] = {
        "model": model,
        "messages": chat,
        "max_tokens": config.max_tokens,
        # the current SDK takes no temperature: the model's default applies
    }
    if system_text:
        request["system"] = cached_blocks(system_text, system_cuts)
    if config.schema is not None:
        request["output_config"] = output_config(config.schema)
    return request


#: what joins the texts of several system messages in ``system``
SYSTEM_SEPARATOR = "\n\n"


def _cuts(message: Message) -> list[tuple[int, str]]:
    """Where the prefixes ``message`` marks end (character offsets in its text), each
    with its kind: ``prefix`` (the protocol's shared prefix) or ``instance``."""
    cuts, at = [], 0
    for part in parts_of(message):
        at += len(part.text)
        if part.ends_prefix:
            cuts.append((at, "prefix"))
        elif part.ends_instance:
            cuts.append((at, "instance"))
    return cuts


def cached_blocks(text: str, cuts: Sequence[int]) -> str | list[dict[str, Any]]:
    """``text`` as text blocks, each of the ``cuts`` (character offsets) ending one that
    ends a cached prefix (``cache_control``), the rest a last plain block; the API refuses
    an empty block, so empty pieces are left out, and without a cut the text is a plain
    string."""
    blocks: list[dict[str, Any]] = []
    start = 0
    for cut in sorted(set(cuts)):
        if cut > start:
            blocks.append({"type": "text", "text": text[start:cut], "cache_control": EPHEMERAL})
            start = cut
    if not blocks:
        return text
    if start < len(text):
        blocks.append({"type": "text", "text": text[start:]})
    return blocks


def content_of(message: Message, cuts: Sequence[int]) -> str | list[dict[str, Any]]:
    """A chat message's ``content``: :func:`cached_blocks` of its text when it holds no
    image; else its runs in order (``workers.providers.images.runs``), each stretch of
    text as :func:`cached_blocks` cut where its own ``cuts`` fall (a cut at a stretch's
    end marks its last block) and each image an ``image`` block."""
    if not images_of(message):
        return cached_blocks(text_of(message), cuts)
    blocks: list[dict[str, Any]] = []
    start = 0
    for run in runs(message):
        if not isinstance(run, str):
            blocks.append(image_block(run.ref.media_type, base64_of(run)))
            continue
        end = start + len(run)
        own = [cut - start for cut in cuts if start < cut <= end]
        text = cached_blocks(run, own)
        blocks += [{"type": "text", "text": text}] if isinstance(text, str) else text
        start = end
    return blocks


def image_block(media_type: str, data: str) -> dict[str, Any]:
    """An ``image`` content block of base64 ``data`` (the SDK's ``ImageBlockParam``)."""
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def output_config(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The ``output_config`` asking for an answer that follows ``schema``."""
    import anthropic

    return {"format": {"type": "json_schema", "schema": anthropic.transform_schema(dict(schema))}}


#: every ``stop_reason`` of the SDK's ``StopReason`` (a test holds this table to it); any
#: other is incomplete
STOP_REASONS: Mapping[str, str] = {
    "end_turn": FINISHED,
    "stop_sequence": FINISHED,  # we send none; a stop sequence ends a whole answer
    "max_tokens": CUT_OFF,
    "model_context_window_exceeded": CONTEXT_FULL,
    "refusal": REFUSAL,
    "pause_turn": INCOMPLETE,  # a long turn paused (server tools): to be continued
    "tool_use": INCOMPLETE,  # we offer no tools: not an answer
}


def output_of(body: object, raw: bytes, max_tokens: int) -> JudgeOutput:
    """The answer of a Messages API JSON ``body``: its text blocks, token usage and why it
    stopped (:data:`STOP_REASONS`). JSON that is not a message (a list, ``content``
    null) is a ``provider_error`` that keeps ``raw``."""

    def bad(what: str) -> JudgeError:
        return malformed(what, raw.decode("utf-8", "replace"))

    blocks = body.get("content") if isinstance(body, dict) else None
    if not isinstance(body, dict) or not isinstance(blocks, list):
        raise bad("not a message with a list of content blocks")
    reason = body.get("stop_reason")
    if not isinstance(reason, str | None):
        raise bad("its stop_reason is not text")
    texts = [b.get("text") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    if not all(isinstance(t, str) for t in texts):
        raise bad("a text block without text")
    usage = body.get("usage")
    read, written = (usage_count(usage, k) for k in CACHE_USAGE)
    # input_tokens counts only what follows the last cache breakpoint: every prompt
    # token is the three together
    prompt = usage_count(usage, "input_tokens") + read + written
    tokens = (prompt, usage_count(usage, "output_tokens"))
    cache = {"cached_tokens": read, "cache_write_tokens": written}
    text, said = "".join(t for t in texts if isinstance(t, str)), reason or ""
    finish = finish_of(reason, STOP_REASONS, tokens[1], max_tokens)
    if not texts and finish == FINISHED:  # a whole answer without a word: nothing to read
        return JudgeOutput(text, *tokens, finish=REFUSAL, stop_reason=said, usage=usage, **cache)
    return JudgeOutput(text, *tokens, finish=finish, stop_reason=said, usage=usage, **cache)


#: the usage fields of the prompt tokens read from the cache and written to it
#: (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching)
CACHE_USAGE = ("cache_read_input_tokens", "cache_creation_input_tokens")
