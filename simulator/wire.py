"""OpenAI chat-completions, Anthropic messages and Gemini generateContent wire shapes (pure,
no I/O)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from .config import NULL_REASON
from .models import Unsupported, check
from .structured import Wanted, wanted

Dialect = Literal["openai", "anthropic", "gemini"]


class BadRequest(ValueError):
    """The request body is not something the real API would accept; ``param`` and
    ``code``: the field at fault and the error's code, where the API names them."""

    def __init__(self, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.param = param
        self.code = code


@dataclass(frozen=True)
class ParsedRequest:
    model: str
    prompt: str
    max_tokens: int | None
    #: the structured answer asked for (simulator/structured.py), None for free text
    structured: Wanted | None = None
    #: where Anthropic ``cache_control`` blocks end, as offsets in ``prompt``
    breakpoints: tuple[int, ...] = ()
    #: the request's sampling seed (OpenAI ``seed``, Gemini ``generationConfig.seed``)
    seed: int | None = None

    @property
    def tool(self) -> str | None:
        """The tool the answer must call (Anthropic's forced tool), if any."""
        return self.structured.tool if self.structured is not None else None


def content_text(content: object, sep: str = "\n") -> str:
    """Text of a message ``content``: a string, or a list of text parts/blocks (their
    texts joined by ``sep``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping) and part.get("type") == "text":
                text = part.get("text")
                if isinstance(text, str):
                    texts.append(text)
        return sep.join(texts)
    raise BadRequest("message content must be a string or a list of content parts")


def _marked_text(content: object) -> tuple[str, list[int]]:
    """Text of an Anthropic ``content`` (a string, or blocks whose texts are joined with
    nothing between them: one message's text split in blocks reads back whole) and the
    offsets in it where a block marked ``cache_control`` ends."""
    if not isinstance(content, list):
        return content_text(content), []
    text, marks = "", []
    for block in content:
        text += content_text([block], "")
        if isinstance(block, Mapping) and block.get("cache_control") is not None:
            marks.append(len(text))
    return text, marks


def _anthropic_prompt(body: Mapping[str, Any]) -> tuple[str, tuple[int, ...]]:
    """The prompt of a Messages API body (system, then every message, one per line) and
    its cache breakpoints (offsets in it)."""
    pieces = [_marked_text(body.get("system"))]
    if not pieces[0][0]:
        pieces = []
    pieces += [_marked_text(m.get("content")) for m in _messages(body)]
    prompt, breakpoints = "", []
    for i, (text, marks) in enumerate(pieces):
        start = len(prompt) + (1 if i else 0)
        prompt += ("\n" if i else "") + text
        breakpoints += [start + mark for mark in marks]
    return prompt, tuple(breakpoints)


def _model(body: Mapping[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("'model' is required and must be a non-empty string")
    return model


def _messages(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' is required and must be a non-empty list")
    if not all(isinstance(m, Mapping) for m in messages):
        raise BadRequest("each message must be an object")
    return messages


def _max_tokens(body: Mapping[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = body.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise BadRequest(f"'{key}' must be a positive integer")
        return value
    return None


def _field(body: Mapping[str, Any], camel: str, snake: str) -> Any:
    """A Gemini field by its JSON name or its proto name (the API accepts both)."""
    value = body.get(camel)
    return body.get(snake) if value is None else value


def _gemini_text(content: object, where: str) -> str:
    """Text of a Gemini ``Content`` (``{"role": ..., "parts": [{"text": ...}]}``)."""
    if not isinstance(content, Mapping):
        raise BadRequest(f"{where} must be an object with 'parts'")
    parts = content.get("parts")
    if not isinstance(parts, list) or not all(isinstance(p, Mapping) for p in parts):
        raise BadRequest(f"{where}.parts must be a list of objects")
    role = content.get("role")
    if role is not None and role not in ("user", "model"):
        raise BadRequest(f"{where}.role must be 'user' or 'model', got {str(role)[:40]!r}")
    return "\n".join(p["text"] for p in parts if isinstance(p.get("text"), str))


def _parse_gemini(body: Mapping[str, Any], model: str | None) -> ParsedRequest:
    """``POST /v1beta/models/{model}:generateContent``: the model is in the path."""
    if not model:
        raise BadRequest("the model is required in the path: models/{model}:generateContent")
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        raise BadRequest("* GenerateContentRequest.contents: contents is not specified")
    parts: list[str] = []
    system = _field(body, "systemInstruction", "system_instruction")
    if system is not None:
        text = _gemini_text(system, "systemInstruction")
        if text:
            parts.append(text)
    parts.extend(_gemini_text(c, f"contents[{i}]") for i, c in enumerate(contents))
    config = _field(body, "generationConfig", "generation_config") or {}
    if not isinstance(config, Mapping):
        raise BadRequest("generationConfig must be an object")
    limit = _field(config, "maxOutputTokens", "max_output_tokens")
    max_tokens = _max_tokens({"maxOutputTokens": limit}, "maxOutputTokens")
    return ParsedRequest(
        model=model.removeprefix("models/"),
        prompt="\n".join(parts),
        max_tokens=max_tokens,
        seed=_seed(config),
    )


def _seed(body: Mapping[str, Any]) -> int | None:
    """The request's ``seed``: an integer, as the real APIs take it, or absent."""
    value = body.get("seed")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"seed must be an integer, not {type(value).__name__}")
    return value


def parse_request(dialect: Dialect, body: object, model: str | None = None) -> ParsedRequest:
    """Model, concatenated prompt text (system + all messages) and max tokens. ``model``:
    the model named in the URL path (Gemini), where the body does not name it."""
    if not isinstance(body, Mapping):
        raise BadRequest("request body must be a JSON object")
    if body.get("stream"):
        raise BadRequest("the judge simulator does not support streaming")
    try:
        asked = wanted(dialect, body)
        if dialect != "gemini":  # what this model refuses (simulator/models.py)
            check(dialect, body, _model(body))
    except Unsupported as exc:
        raise BadRequest(str(exc), exc.param, exc.code) from None
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    if dialect == "gemini":
        return replace(_parse_gemini(body, model), structured=asked)
    model = _model(body)
    if dialect == "anthropic":
        prompt, breakpoints = _anthropic_prompt(body)
        return ParsedRequest(model, prompt, _max_tokens(body, "max_tokens"), asked, breakpoints)
    max_tokens = _max_tokens(body, "max_completion_tokens", "max_tokens")
    prompt = "\n".join(content_text(m.get("content")) for m in _messages(body))
    return ParsedRequest(model, prompt, max_tokens, asked, seed=_seed(body))


def as_served(
    dialect: Dialect,
    body: dict[str, Any],
    *,
    whole: bool,
    stop_reason: str | None = None,
    malformed: str | None = None,
) -> Any:
    """``body`` (:func:`success_body`) as a misbehaving server sends it: ``stop_reason``
    the wire value of why a ``whole`` answer stopped (``"null"``: JSON null);
    ``malformed`` a body that is not a message (``simulator.config.MALFORMED``)."""
    if stop_reason is not None and whole:
        value = None if stop_reason == NULL_REASON else stop_reason
        if dialect == "openai":
            body["choices"][0]["finish_reason"] = value
        elif dialect == "anthropic":
            body["stop_reason"] = value
        else:
            body["candidates"][0]["finishReason"] = value
    if malformed == "list":
        return [body]
    if malformed == "null_content":
        if dialect == "openai":
            body["choices"][0]["message"].update(content=None, refusal=None)
        elif dialect == "anthropic":
            body["content"] = None
        else:
            body["candidates"][0]["content"] = None
    return body


@dataclass(frozen=True)
class TokenCounts:
    """A completion's usage: its prompt tokens (``cache``: of them, those read from the
    prompt cache and those written to it, simulator/prompt_cache.py) and its completion
    tokens (``reasoning``: of them, a reasoning model's thinking)."""

    prompt: int
    completion: int
    cache: tuple[int, int] = (0, 0)
    reasoning: int = 0


def success_body(
    dialect: Dialect,
    model: str,
    text: str,
    tokens: TokenCounts,
    truncated: bool,
    refusal: bool = False,
    tool: str | None = None,
) -> dict[str, Any]:
    """The JSON body of a successful completion in ``dialect``'s shape, ``tokens`` in each
    dialect's usage fields (the cached prompt tokens too; the reasoning tokens as OpenAI's
    ``completion_tokens_details.reasoning_tokens``). ``refusal``: the
    model declined (OpenAI: ``content`` null and the text in ``refusal``; Anthropic:
    ``stop_reason`` ``refusal``; Gemini: ``finishReason`` ``SAFETY``, no content).
    ``tool``: Anthropic's forced tool, whose ``tool_use`` input is ``text``'s JSON
    object (a text block still, where ``text`` is cut off, a refusal or not JSON)."""
    prompt_tokens, completion_tokens = tokens.prompt, tokens.completion
    cache, reasoning = tokens.cache, tokens.reasoning
    if dialect == "gemini":
        body = _gemini_success(model, text, prompt_tokens, completion_tokens, truncated, refusal)
        if cache[0]:  # the API leaves out counts that are zero
            body["usageMetadata"]["cachedContentTokenCount"] = cache[0]
        return body
    if dialect == "anthropic":
        stop = "refusal" if refusal else "max_tokens" if truncated else "end_turn"
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        answer = _json_object(text) if tool is not None and stop == "end_turn" else None
        if answer is not None:
            use = {
                "type": "tool_use",
                "id": f"toolu_sim{uuid.uuid4().hex[:20]}",
                "name": tool,
                "input": answer,
            }
            content, stop = [use], "tool_use"
        return {
            "id": f"msg_sim{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {
                # input_tokens leaves out what was read from the cache or written to it
                "input_tokens": prompt_tokens - cache[0] - cache[1],
                "cache_creation_input_tokens": cache[1],
                "cache_read_input_tokens": cache[0],
                "output_tokens": completion_tokens,
            },
        }
    return {
        "id": f"chatcmpl-sim{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None if refusal else text,
                    "refusal": text if refusal else None,
                },
                "logprobs": None,
                "finish_reason": "length" if truncated else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cache[0], "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0},
        },
        "system_fingerprint": "fp_simulator",
    }


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _gemini_success(
    model: str,
    text: str,
    prompt_tokens: int,
    completion_tokens: int,
    truncated: bool,
    refusal: bool,
) -> dict[str, Any]:
    """A ``GenerateContentResponse``. A refusal is a candidate blocked by the safety
    filters: ``finishReason`` SAFETY, a blocked rating and no content (nor output tokens)."""
    candidate: dict[str, Any] = {"index": 0}
    if refusal:
        candidate["finishReason"] = "SAFETY"
        candidate["safetyRatings"] = [
            {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True},
        ]
        completion_tokens = 0
    else:
        candidate["content"] = {"parts": [{"text": text}], "role": "model"}
        candidate["finishReason"] = "MAX_TOKENS" if truncated else "STOP"
    usage: dict[str, Any] = {
        "promptTokenCount": prompt_tokens,
        "totalTokenCount": prompt_tokens + completion_tokens,
    }
    if completion_tokens:  # the API leaves out counts that are zero
        usage["candidatesTokenCount"] = completion_tokens
    return {
        "candidates": [candidate],
        "usageMetadata": usage,
        "modelVersion": model,
        "responseId": f"sim{uuid.uuid4().hex[:20]}",
    }


ErrorKind = Literal[
    "invalid_request", "rate_limit", "server_error", "overloaded", "not_found", "auth"
]

_OPENAI_ERRORS: dict[ErrorKind, tuple[str, str | None]] = {
    "auth": ("invalid_request_error", "invalid_api_key"),
    "invalid_request": ("invalid_request_error", None),
    "rate_limit": ("requests", "rate_limit_exceeded"),
    "server_error": ("server_error", "internal_error"),
    "overloaded": ("server_error", "service_unavailable"),
    "not_found": ("invalid_request_error", "not_found"),
}
_ANTHROPIC_ERRORS: dict[ErrorKind, str] = {
    "auth": "authentication_error",
    "invalid_request": "invalid_request_error",
    "rate_limit": "rate_limit_error",
    "server_error": "api_error",
    "overloaded": "overloaded_error",
    "not_found": "not_found_error",
}


#: google.rpc status names of the HTTP codes the simulator answers
_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_GEMINI_CODES: dict[ErrorKind, int] = {
    "invalid_request": 400,
    "auth": 400,
    "rate_limit": 429,
    "server_error": 500,
    "overloaded": 503,
    "not_found": 404,
}


def _gemini_error(
    kind: ErrorKind, message: str, status: int | None, retry_after: int | None
) -> dict[str, Any]:
    """``{"error": {"code", "message", "status", "details"}}`` as the Gemini API sends it:
    a 429 carries a RetryInfo, a wrong key is a 400 whose ErrorInfo says API_KEY_INVALID."""
    code = status or _GEMINI_CODES[kind]
    error: dict[str, Any] = {
        "code": code,
        "message": message,
        "status": _GEMINI_STATUS.get(code, "UNKNOWN"),
    }
    if kind == "rate_limit" and retry_after is not None:
        error["details"] = [
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{retry_after}s"}
        ]
    elif kind == "auth":
        error["details"] = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "API_KEY_INVALID",
                "domain": "googleapis.com",
                "metadata": {"service": "generativelanguage.googleapis.com"},
            },
        ]
    return {"error": error}


def error_body(
    dialect: Dialect,
    kind: ErrorKind,
    message: str,
    status: int | None = None,
    retry_after: int | None = None,
    param: str | None = None,
    code: str | None = None,
) -> dict[str, Any]:
    """The JSON body of an error in ``dialect``'s shape. Gemini's body repeats the HTTP
    ``status`` and carries a 429's wait (``retry_after`` seconds) in a RetryInfo;
    OpenAI's names the ``param`` at fault and the error's ``code`` where given."""
    if dialect == "gemini":
        return _gemini_error(kind, message, status, retry_after)
    if dialect == "anthropic":
        return {"type": "error", "error": {"type": _ANTHROPIC_ERRORS[kind], "message": message}}
    err_type, default_code = _OPENAI_ERRORS[kind]
    return {
        "error": {
            "message": message,
            "type": err_type,
            "param": param,
            "code": code or default_code,
        }
    }
