"""OpenAI chat-completions, Anthropic messages and Gemini generateContent requests: their
parsing (pure, no I/O); the bodies answered are in simulator/wire_bodies.py."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from .images import (
    ImageRefused,
    SeenImage,
    anthropic_image,
    gemini_image,
    openai_image,
    refusal_message,
)
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
    #: the request's images, in the order sent (simulator/images.py)
    images: tuple[SeenImage, ...] = ()
    #: the request's messages in order, as (role, text): ``system``, ``user`` or
    #: ``assistant`` whatever the wire calls them (Gemini's ``model`` is ``assistant``,
    #: OpenAI's ``developer`` is ``system``)
    turns: tuple[tuple[str, str], ...] = ()

    @property
    def image_tokens(self) -> int:
        """The prompt tokens the images bill, by their provider's rule."""
        return sum(image.tokens for image in self.images)

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


#: each wire's role names, as :attr:`ParsedRequest.turns` names them
_ROLES = {"developer": "system", "model": "assistant"}


def _role(role: object) -> str:
    """A message's role as :attr:`ParsedRequest.turns` names it (none: ``user``)."""
    name = role if isinstance(role, str) else "user"
    return _ROLES.get(name, name)


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
    turns: list[tuple[str, str]] = []
    system = _field(body, "systemInstruction", "system_instruction")
    if system is not None:
        text = _gemini_text(system, "systemInstruction")
        if text:
            turns.append(("system", text))
    turns += [
        (_role(c.get("role")), _gemini_text(c, f"contents[{i}]")) for i, c in enumerate(contents)
    ]
    parts = [text for _, text in turns]
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
        turns=tuple(turns),
    )


def _seed(body: Mapping[str, Any]) -> int | None:
    """The request's ``seed``: an integer, as the real APIs take it, or absent."""
    value = body.get("seed")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"seed must be an integer, not {type(value).__name__}")
    return value


def _images(dialect: Dialect, body: Mapping[str, Any], model: str) -> tuple[SeenImage, ...]:
    """Every image part of ``body``, decoded and checked (BadRequest, in the provider's
    words, on the first one it refuses)."""
    found: list[SeenImage] = []
    key = "contents" if dialect == "gemini" else "messages"
    for i, message in enumerate(body.get(key) or ()):
        if not isinstance(message, Mapping):
            continue
        parts = message.get("parts" if dialect == "gemini" else "content")
        if not isinstance(parts, list):
            continue
        for j, part in enumerate(parts):
            if not isinstance(part, Mapping):
                continue
            where = _image_place(dialect, i, j)
            try:
                if dialect == "openai" and part.get("type") == "image_url":
                    found.append(openai_image(part, model))
                elif dialect == "anthropic" and part.get("type") == "image":
                    found.append(anthropic_image(part, model))
                elif dialect == "gemini":
                    inline = part.get("inlineData", part.get("inline_data"))
                    if inline is not None:
                        found.append(gemini_image(inline, model))
            except ImageRefused as exc:
                message_text, code = refusal_message(dialect, exc, where)
                param = where if dialect == "openai" else None
                raise BadRequest(message_text, param, code) from None
    return tuple(found)


def _image_place(dialect: Dialect, i: int, j: int) -> str:
    """Where an image part is, as its provider's errors say it."""
    if dialect == "openai":
        return f"messages[{i}].content[{j}].image_url"
    if dialect == "anthropic":
        return f"messages.{i}.content.{j}.image.source.base64"
    return f"contents[{i}].parts[{j}].inline_data"


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
        parsed = _parse_gemini(body, model)
        images = _images(dialect, body, parsed.model)
        return replace(parsed, structured=asked, images=images)
    model = _model(body)
    if dialect == "anthropic":
        prompt, breakpoints = _anthropic_prompt(body)
        images = _images(dialect, body, model)
        system = _marked_text(body.get("system"))[0]
        turns = [("system", system)] if system else []
        turns += [
            (_role(m.get("role")), _marked_text(m.get("content"))[0]) for m in _messages(body)
        ]
        limit = _max_tokens(body, "max_tokens")
        return ParsedRequest(
            model, prompt, limit, asked, breakpoints, images=images, turns=tuple(turns)
        )
    max_tokens = _max_tokens(body, "max_completion_tokens", "max_tokens")
    turns = [(_role(m.get("role")), content_text(m.get("content"))) for m in _messages(body)]
    prompt = "\n".join(text for _, text in turns)
    images = _images(dialect, body, model)
    return ParsedRequest(
        model, prompt, max_tokens, asked, seed=_seed(body), images=images, turns=tuple(turns)
    )
