"""A provider's token usage is untrusted input: the one check every paid answer's usage
passes (live and batch, every provider) before it is stored and costed.

A provider reports how many tokens it billed; a bug, a proxy or a hostile server may report
counts no request of ours can have: none at all (an answer is never free), negative ones,
ones that are not integers, more cached prompt tokens than prompt tokens, a prompt larger
than the request (no tokenizer makes more tokens than the request has bytes, and no
provider more tokens for an image than :func:`image_tokens_limit` allows), or more
completion tokens than the request can be billed (its ``max_tokens``, which bounds
reasoning tokens too; Gemini's thinking tokens go past it, up to its output limit). Such
usage is never stored as given: the answer is kept, with the usage as given in the call's
``usage_note`` (which ``status`` and the report count), and the call is costed at a safe
estimate, never below the request's own estimate (what ``--max-cost`` reserved for it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flask_eval.rubrics.messages import from_data, images_of, text_of
from flask_eval.rubrics.prompt import Message, estimate_tokens
from flask_eval.workers.judge import JudgeOutput

#: tokens a provider may add to a request's own text (its chat template, a tool or a
#: schema's system prompt) and to an answer past ``max_tokens`` (a closing token)
PROMPT_OVERHEAD = 1024
PER_MESSAGE = 16
COMPLETION_OVERHEAD = 16
#: completion tokens a provider may bill past ``max_tokens``: Gemini's thinking tokens
#: (billed as output; its documentation counts them apart from ``maxOutputTokens``), up to
#: its models' output limit. OpenAI's reasoning tokens and Anthropic's thinking count
#: within the request's token limit.
BEYOND_MAX_TOKENS = {"gemini": 65_536}
#: how much of the usage as given a note keeps
NOTE_LIMIT = 1000
#: the most prompt tokens an image can be billed, whatever the provider and model: a
#: floor for any image (OpenAI's patch rule reaches about 3,800 tokens for one image on
#: its smallest models) plus a token per :data:`PIXELS_PER_TOKEN` pixels (each
#: provider's rule counts fewer: Anthropic one per 750, OpenAI's 512-pixel tiles one per
#: ~1,540, Gemini's 768-pixel tiles one per ~2,290, OpenAI's patches at the largest
#: multiplier one per ~420)
IMAGE_TOKENS_FLOOR = 4096
PIXELS_PER_TOKEN = 400


def image_tokens_limit(messages: Sequence[Message]) -> int:
    """The most prompt tokens the images of ``messages`` can be billed (0: none)."""
    return sum(
        IMAGE_TOKENS_FLOOR + image.ref.width * image.ref.height // PIXELS_PER_TOKEN
        for m in messages
        for image in images_of(m)
    )


@dataclass(frozen=True)
class Request:
    """What a paid answer was asked: its messages, JSON schema and token limit, and the
    completion tokens its protocol expects (the producer's estimate)."""

    messages: Sequence[Message]
    max_tokens: int
    expected_completion: int = 0
    schema: Mapping[str, Any] | None = None
    provider: str = ""  # the judge's provider (its spec's first part)

    @classmethod
    def of_parked(cls, data: Mapping[str, Any], provider: str) -> Request:
        """The request of a parked batch call (``batch_parked.request_of``'s form)."""
        generate = data["generate"]
        return cls(
            from_data(data["messages"]),
            int(generate["max_tokens"]),
            0,
            generate.get("schema"),
            provider,
        )

    def prompt_estimate(self) -> int:
        """The request's prompt tokens as the producer estimates them."""
        return estimate_tokens(self.messages)

    def prompt_limit(self) -> int:
        """The most prompt tokens the request can be: one per byte of its text and schema,
        its images' bound (:func:`image_tokens_limit`), plus what a provider adds around
        it."""
        size = sum(len(text_of(m).encode()) for m in self.messages)
        schema = len(json.dumps(self.schema).encode()) if self.schema else 0
        images = image_tokens_limit(self.messages)
        return size + schema + images + PER_MESSAGE * len(self.messages) + PROMPT_OVERHEAD

    def completion_limit(self) -> int:
        """The most completion tokens the request can be billed."""
        return self.max_tokens + COMPLETION_OVERHEAD + BEYOND_MAX_TOKENS.get(self.provider, 0)


@dataclass(frozen=True)
class Counted:
    """The usage a paid answer is stored and costed with; ``note`` (None: the provider's
    usage was taken as given) says why it was not trusted, with the usage as given."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    note: str | None = None


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def problems(output: JudgeOutput, request: Request) -> list[str]:
    """What is impossible in ``output``'s usage for ``request`` (empty: nothing)."""
    counts = {
        "prompt": output.prompt_tokens,
        "completion": output.completion_tokens,
        "cached": output.cached_tokens,
        "cache-written": output.cache_write_tokens,
    }
    found = [f"{name} tokens not a count" for name, v in counts.items() if not _is_count(v)]
    if found:
        return found
    if output.prompt_tokens == 0 and request.messages:  # no usage, or a zero: never free
        return ["no prompt tokens reported" + ("" if output.usage else " (no usage)")]
    if output.cached_tokens + output.cache_write_tokens > output.prompt_tokens:
        found.append("more cached tokens than prompt tokens")
    if output.prompt_tokens > (limit := request.prompt_limit()):
        found.append(f"prompt tokens above the request's size ({limit})")
    if output.completion_tokens > (limit := request.completion_limit()):
        found.append(f"completion tokens above the request's limit ({limit})")
    return found


def checked_usage(output: JudgeOutput, request: Request) -> Counted:
    """``output``'s usage as it is stored and costed: as given when it is possible for
    ``request``; else a safe estimate (the request's estimated prompt, the given prompt if
    possible and larger, no cache discount, and the larger of the expected completion
    and the given one if possible, else the whole ``max_tokens``) with a note."""
    found = problems(output, request)
    if not found:
        return Counted(
            output.prompt_tokens,
            output.completion_tokens,
            output.cached_tokens,
            output.cache_write_tokens,
        )
    prompt = request.prompt_estimate()
    if _is_count(output.prompt_tokens) and output.prompt_tokens <= request.prompt_limit():
        prompt = max(prompt, output.prompt_tokens)
    completion = request.completion_limit()
    if _is_count(output.completion_tokens) and output.completion_tokens <= completion:
        completion = max(request.expected_completion, output.completion_tokens)
    given = json.dumps(output.usage, default=str, sort_keys=True)
    if len(given) > NOTE_LIMIT:
        given = given[:NOTE_LIMIT] + "..."
    note = (
        f"usage not trusted ({'; '.join(found)}): counted {prompt} prompt + {completion} "
        f"completion tokens; as given: {given}"
    )
    return Counted(prompt, completion, 0, 0, note)
