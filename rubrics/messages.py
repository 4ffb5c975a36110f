"""Chat messages made of text parts, and where a prompt's shared prefix ends (pure).

Providers discount a prompt prefix they have processed before (prompt caching): OpenAI
and Gemini find a repeated prefix by themselves, Anthropic caches only up to a content
block marked ``cache_control``. A judge prompt has a static part, the same for every
call with the same criteria (system prompt, protocol instructions, criteria and rubrics),
and a part of its own (instruction, reference, response). So a message's content is a
sequence of text :class:`Part` s, and a part may end the shared prefix
(``Part.ends_prefix``, a cache breakpoint): everything up to and including the last such
part of a call's messages is what the protocol expects every call with the same
criteria to share (docs/design/caching.md).

A part may be an image (:class:`ImagePart`): it has no text, and each provider sends it
in its own format. A message's text is its parts joined with nothing between them
(:func:`text_of`), so a provider that takes plain text (OpenAI, Gemini), the answer
cache key, token estimates and the simulator see exactly the text the protocol rendered,
parts or not. A content that is a plain string is one part that ends no prefix (a
reminder turn, a test's message).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, TypedDict

from flask_eval.core.images import Image, ImageRef


class Part(NamedTuple):
    """A piece of a message's text; ``ends_prefix``: the shared prefix ends after it;
    ``ends_instance``: a second, longer prefix ends after it, the one every call on the
    same instance and criteria shares (the instruction and reference, before the
    response: the calls judging each model's response to one instance). Both are cache
    breakpoints; only the first is "the shared prefix" of :func:`prefix_end`."""

    text: str
    ends_prefix: bool = False
    ends_instance: bool = False


class ImagePart(NamedTuple):
    """An image in a message's content (its bytes with it). It has no text, ends no
    prefix, and reads as "" wherever a message's text is taken (:func:`text_of`): each
    provider sends it in its own format, and the answer cache keys it by digest
    (:func:`image_digests`)."""

    text: str = ""
    ends_prefix: bool = False
    ends_instance: bool = False
    image: Image | None = None


#: a message's content: its parts in order, or a plain string (one part, nothing shared)
Content = str | tuple[Part | ImagePart, ...]


class Message(TypedDict):
    """One chat message: ``role`` (system, user or assistant) and its ``content``."""

    role: str
    content: Content


def message(role: str, shared: str, rest: str = "", *, instance: str = "") -> Message:
    """A message whose text ``shared`` ends the shared prefix, ``instance`` (if any) the
    instance's prefix after it, and ``rest`` follows (empty pieces left out)."""
    parts = [Part(shared, True)]
    if instance:
        parts.append(Part(instance, ends_instance=True))
    if rest:
        parts.append(Part(rest))
    return {"role": role, "content": tuple(parts)}


def image_part(image: Image) -> ImagePart:
    """A content part holding ``image``."""
    return ImagePart(image=image)


def images_of(message: Message) -> list[Image]:
    """The images in ``message``'s content, in order."""
    return [p.image for p in parts_of(message) if isinstance(p, ImagePart) and p.image]


def image_digests(messages: Sequence[Message]) -> list[list[str]]:
    """Each message's images by SHA-256 (empty lists for messages without any)."""
    return [[image.ref.sha256 for image in images_of(m)] for m in messages]


def parts_of(message: Message) -> tuple[Part | ImagePart, ...]:
    """The parts of ``message`` (a plain string is one part that ends no prefix)."""
    content = message["content"]
    return (Part(content),) if isinstance(content, str) else tuple(content)


def text_of(message: Message) -> str:
    """The plain text of ``message``: its parts joined with nothing between them."""
    content = message["content"]
    return content if isinstance(content, str) else "".join(p.text for p in content)


def to_data(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """``messages`` as JSON data that :func:`from_data` reads back exactly (a parked
    batch call keeps its rendering in the ledger): a plain content stays a string, parts
    become ``{"text", "prefix", "instance"}`` objects."""
    out: list[dict[str, Any]] = []
    for m in messages:
        content = m["content"]
        data: Any = content if isinstance(content, str) else [_part_data(p) for p in content]
        out.append({"role": m["role"], "content": data})
    return out


def from_data(data: Sequence[Mapping[str, Any]]) -> list[Message]:
    """The messages :func:`to_data` wrote (ValueError: not such data)."""
    messages: list[Message] = []
    for m in data:
        role, content = m.get("role"), m.get("content")
        if not isinstance(role, str):
            raise ValueError("a message without a role")
        if isinstance(content, str):
            messages.append({"role": role, "content": content})
            continue
        if not isinstance(content, list) or not all(
            isinstance(p, dict) and (isinstance(p.get("text"), str) or "image" in p)
            for p in content
        ):
            raise ValueError("a message whose content is neither text nor parts")
        messages.append({"role": role, "content": tuple(_part_of(p) for p in content)})
    return messages


def _part_data(part: Part | ImagePart) -> dict[str, Any]:
    if isinstance(part, ImagePart) and part.image is not None:
        return {
            "image": part.image.ref.to_data(),
            "data": base64.b64encode(part.image.data).decode("ascii"),
        }
    return {"text": part.text, "prefix": part.ends_prefix, "instance": part.ends_instance}


def _part_of(data: Mapping[str, Any]) -> Part | ImagePart:
    if "image" in data:
        try:
            ref = ImageRef.from_data(data["image"])
            raw = base64.b64decode(str(data["data"]), validate=True)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"an image part that does not read: {exc}") from None
        return image_part(Image(ref, raw))
    return Part(data["text"], bool(data.get("prefix")), bool(data.get("instance")))


def plain(messages: Sequence[Message]) -> list[dict[str, str]]:
    """``messages`` as plain role/text pairs (what OpenAI's chat API and the answer
    cache key take: the same text whether a protocol marks a prefix or not)."""
    return [{"role": m["role"], "content": text_of(m)} for m in messages]


def prefix_end(messages: Sequence[Message]) -> tuple[int, int] | None:
    """Where the shared prefix of ``messages`` ends: (message index, part index) of the
    last part that ends a prefix, or None when nothing is shared."""
    end = None
    for i, m in enumerate(messages):
        for j, part in enumerate(parts_of(m)):
            if part.ends_prefix:
                end = (i, j)
    return end


#: what joins two messages' texts in :func:`split_prefix`
MESSAGE_SEPARATOR = "\n\n"


def split_prefix(messages: Sequence[Message]) -> tuple[str, str]:
    """(the shared prefix's text, the rest's text) of a rendered call, for counting the
    tokens of each (the cost benchmark): every message's text in order, separated by a
    blank line, cut after the last part that ends a prefix. With nothing shared the
    prefix is empty."""
    end = prefix_end(messages)
    shared: list[str] = []
    rest: list[str] = []
    for i, m in enumerate(messages):
        parts = parts_of(m)
        if end is None or i > end[0]:
            rest.append(text_of(m))
        elif i < end[0]:
            shared.append(text_of(m))
        else:
            shared.append("".join(p.text for p in parts[: end[1] + 1]))
            tail = "".join(p.text for p in parts[end[1] + 1 :])
            if tail:
                rest.append(tail)
    return MESSAGE_SEPARATOR.join(shared), MESSAGE_SEPARATOR.join(rest)


def shared_prefix(messages: Sequence[Message]) -> list[Message]:
    """The messages up to the end of the shared prefix (the last of them cut after its
    part that ends the prefix): what every call with the same criteria should repeat,
    byte for byte. Empty when nothing is shared."""
    end = prefix_end(messages)
    if end is None:
        return []
    head = list(messages[: end[0]])
    last = messages[end[0]]
    return [*head, {"role": last["role"], "content": parts_of(last)[: end[1] + 1]}]
