"""What the simulated judge answers one parsed request (pure, no I/O): the body a live
call is served and the body of the same request's answer inside a batch, so that the same
request gets the same answer, live or batched."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from flask_eval.rubrics.conversation import graded_turn

from . import generate, images
from .answer import REFUSAL_TEXT, cut_off, estimate_tokens, make_answer
from .config import SimConfig
from .models import thinking_tokens
from .structured import structured_answer
from .wire import Dialect, ParsedRequest
from .wire_bodies import TokenCounts, as_served, success_body


@dataclass(frozen=True)
class Reply:
    """A served answer: its JSON (as the misbehaving server of ``SimConfig`` sends it) and
    the completion tokens it bills."""

    body: Any
    completion_tokens: int
    #: the turn of a conversation the request asked to grade (None: a one-shot prompt)
    turn: int | None = None


def reply(
    dialect: Dialect,
    parsed: ParsedRequest,
    cfg: SimConfig,
    prompt_tokens: int,
    *,
    garbage: bool = False,
    refusal: bool = False,
    echoed: str | None = None,
    cache: tuple[int, int] = (0, 0),
) -> Reply:
    """The answer to ``parsed``: ``garbage`` and ``refusal`` are the caller's draws;
    ``echoed`` the request's headers a debugging proxy echoes (None: not echoed);
    ``cache`` the prompt tokens read from and written to the prompt cache."""
    if parsed.seed is not None:
        cfg = replace(cfg, request_seed=parsed.seed)
    cfg = images.seeded(cfg, parsed.images)  # the judge's draws depend on what it saw
    text = (
        REFUSAL_TEXT
        if refusal
        else make_answer(parsed.prompt, parsed.model, cfg, garbage=garbage, turns=parsed.turns)
    )
    asked = parsed.structured
    if asked is not None and not (refusal or garbage):
        text = structured_answer(parsed.prompt, parsed.model, asked.schema, cfg)
    elif not refusal and generate.instance_level(parsed.prompt, parsed.model, cfg) is None:
        text = images.named(text, parsed.images)  # a judge names the images it saw
    completion_tokens = estimate_tokens(text)
    # a reasoning model thinks first: its thinking comes out of the budget before the answer
    thinking = 0 if refusal else thinking_tokens(dialect, parsed.model, completion_tokens)
    limit = parsed.max_tokens
    truncated = limit is not None and completion_tokens + thinking > limit
    if limit is not None and cfg.min_max_tokens is not None and limit < cfg.min_max_tokens:
        truncated = True  # the answer needed more than the request allowed
    if truncated and limit is not None and not refusal:
        thinking = min(thinking, limit)
        left = limit - thinking
        text = cut_off(text, parsed.prompt, left) if left > 0 else ""
        completion_tokens = min(left, estimate_tokens(text))
    completion_tokens += thinking  # billed as completion tokens
    if refusal and dialect == "gemini":
        completion_tokens = 0  # a blocked candidate carries no text, bills no output
    if echoed is not None:  # a debugging proxy's echo: the key is among the headers
        text = f"request headers:\n{echoed}\n{text}"
    tokens = TokenCounts(prompt_tokens, completion_tokens, cache, thinking)
    payload = success_body(dialect, parsed.model, text, tokens, truncated, refusal, parsed.tool)
    if cfg.usage:  # a provider whose usage cannot be trusted
        payload["usageMetadata" if dialect == "gemini" else "usage"].update(cfg.usage)
    served = as_served(
        dialect,
        payload,
        whole=not (truncated or refusal),
        stop_reason=cfg.stop_reason,
        malformed=cfg.malformed,
    )
    return Reply(served, completion_tokens, graded_turn(parsed.prompt))
