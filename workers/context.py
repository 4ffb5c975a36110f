"""A judge call's sampling settings and the identity of its prompt (the cache key). Pure."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from flask_eval.core.models import model_info
from flask_eval.core.types import JudgeConfig
from flask_eval.rubrics.messages import image_digests, plain
from flask_eval.workers.judge import GenerateConfig, Message


def generate_config(
    judge: JudgeConfig, timeout: float, schema: Mapping[str, Any] | None = None
) -> GenerateConfig:
    """A judge's sampling settings (its own, or the defaults) with the call timeout and,
    for a structured judge, the JSON schema its answer must follow. A repeated judgment's
    later sample (``JudgeConfig.sample`` > 1) is sent with its index as the seed, which
    also makes it an answer of its own in the cache (:func:`cache_key`). The defaults are
    the model's (``core.models``): a reasoning model's budget leaves room to think, a
    model that takes only its own temperature is sent none, Gemini 3 is sent 1.0."""
    sample = judge.sample or 1
    model = model_info(judge.spec.partition("@")[0])  # provider/model: a canonical spec's
    return GenerateConfig(
        max_tokens=model.budget(judge.max_tokens),
        temperature=model.sampling_temperature(judge.temperature),
        timeout=timeout,
        schema=schema,
        seed=sample if sample > 1 else None,
    )


def cache_key(judge: str, messages: Sequence[Message], config: GenerateConfig) -> str:
    """The identity of an answer: judge model, rendered prompt and sampling parameters
    (a later sample's seed among them: each sample is an answer of its own).
    The prompt is its plain text (``rubrics.messages.plain``): where a protocol marks its
    shared prefix changes nothing the judge reads, so it does not change the key. A
    prompt's images count by their SHA-256, message by message (``core.images``)."""
    payload: dict[str, Any] = {
        "judge": judge,
        "messages": plain(messages),
        "max_tokens": config.max_tokens,
        "temperature": config.temperature,
    }
    digests = image_digests(messages)
    if any(digests):  # absent otherwise: text-only prompts keep their keys
        payload["images"] = digests
    if config.schema is not None:  # absent otherwise: free-text answers keep their keys
        payload["schema"] = config.schema
    if config.seed is not None:  # a later sample: absent for the first, whose key is as before
        payload["seed"] = config.seed
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
