"""A judge call's sampling settings and the identity of its prompt (the cache key). Pure."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from flask_eval.core.types import DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE, JudgeConfig
from flask_eval.rubrics.messages import plain
from flask_eval.workers.judge import GenerateConfig, Message


def generate_config(
    judge: JudgeConfig, timeout: float, schema: Mapping[str, Any] | None = None
) -> GenerateConfig:
    """A judge's sampling settings (its own, or the defaults) with the call timeout and,
    for a structured judge, the JSON schema its answer must follow."""
    return GenerateConfig(
        max_tokens=judge.max_tokens or DEFAULT_MAX_TOKENS,
        temperature=judge.temperature if judge.temperature is not None else DEFAULT_TEMPERATURE,
        timeout=timeout,
        schema=schema,
    )


def cache_key(judge: str, messages: Sequence[Message], config: GenerateConfig) -> str:
    """The identity of an answer: judge model, rendered prompt and sampling parameters.
    The prompt is its plain text (``rubrics.messages.plain``): where a protocol marks its
    shared prefix changes nothing the judge reads, so it does not change the key."""
    payload: dict[str, Any] = {
        "judge": judge,
        "messages": plain(messages),
        "max_tokens": config.max_tokens,
        "temperature": config.temperature,
    }
    if config.schema is not None:  # absent otherwise: free-text answers keep their keys
        payload["schema"] = config.schema
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
