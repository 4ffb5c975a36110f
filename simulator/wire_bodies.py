"""The bodies the simulator answers in the OpenAI, Anthropic and Gemini shapes: a
completion (:func:`success_body`), as a misbehaving server sends it (:func:`as_served`),
and an error (:func:`error_body`) (pure, no I/O)."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from .config import NULL_REASON
from .wire import Dialect


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
