"""OpenAI chat-completions and Anthropic messages wire shapes (pure, no I/O)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Dialect = Literal["openai", "anthropic"]


class BadRequest(ValueError):
    """The request body is not something the real API would accept."""


@dataclass(frozen=True)
class ParsedRequest:
    model: str
    prompt: str
    max_tokens: int | None


def content_text(content: object) -> str:
    """Text of a message ``content``: a string, or a list of text parts/blocks."""
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
        return "\n".join(texts)
    raise BadRequest("message content must be a string or a list of content parts")


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


def parse_request(dialect: Dialect, body: object) -> ParsedRequest:
    """Model, concatenated prompt text (system + all messages) and max tokens."""
    if not isinstance(body, Mapping):
        raise BadRequest("request body must be a JSON object")
    if body.get("stream"):
        raise BadRequest("the judge simulator does not support streaming")
    model = _model(body)
    parts: list[str] = []
    if dialect == "anthropic":
        system = content_text(body.get("system"))
        if system:
            parts.append(system)
        max_tokens = _max_tokens(body, "max_tokens")
    else:
        max_tokens = _max_tokens(body, "max_completion_tokens", "max_tokens")
    parts.extend(content_text(m.get("content")) for m in _messages(body))
    return ParsedRequest(model=model, prompt="\n".join(parts), max_tokens=max_tokens)


def success_body(
    dialect: Dialect,
    model: str,
    text: str,
    prompt_tokens: int,
    completion_tokens: int,
    truncated: bool,
) -> dict[str, Any]:
    """The JSON body of a successful completion in ``dialect``'s shape."""
    if dialect == "anthropic":
        return {
            "id": f"msg_sim{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "max_tokens" if truncated else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": prompt_tokens, "output_tokens": completion_tokens},
        }
    return {
        "id": f"chatcmpl-sim{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": "length" if truncated else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
        "system_fingerprint": "fp_simulator",
    }


ErrorKind = Literal["invalid_request", "rate_limit", "server_error", "overloaded", "not_found"]

_OPENAI_ERRORS: dict[ErrorKind, tuple[str, str | None]] = {
    "invalid_request": ("invalid_request_error", None),
    "rate_limit": ("requests", "rate_limit_exceeded"),
    "server_error": ("server_error", "internal_error"),
    "overloaded": ("server_error", "service_unavailable"),
    "not_found": ("invalid_request_error", "not_found"),
}
_ANTHROPIC_ERRORS: dict[ErrorKind, str] = {
    "invalid_request": "invalid_request_error",
    "rate_limit": "rate_limit_error",
    "server_error": "api_error",
    "overloaded": "overloaded_error",
    "not_found": "not_found_error",
}


def error_body(dialect: Dialect, kind: ErrorKind, message: str) -> dict[str, Any]:
    """The JSON body of an error in ``dialect``'s shape."""
    if dialect == "anthropic":
        return {"type": "error", "error": {"type": _ANTHROPIC_ERRORS[kind], "message": message}}
    err_type, code = _OPENAI_ERRORS[kind]
    return {"error": {"message": message, "type": err_type, "param": None, "code": code}}
