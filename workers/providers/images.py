"""What every provider does with a prompt's images before it writes them in its own wire
format (docs/design/images.md, "Providers").

A message's content is text parts and image parts (``rubrics.messages``); a provider sends
a message without images exactly as it did before images existed, and a message with
images as its runs (:func:`runs`): the text between two images joined into one piece,
each image in its place. Before that, :func:`check_images` refuses, as a ``config``
failure naming the judge, what the provider cannot take: an image outside a user message
(no provider takes one in a system prompt, nor in an assistant turn of ours), an image of
a media type the provider does not read, and any image at all for a provider that reads
none (``Judge.image_types`` empty: the tests' in-memory judge). An image is never
dropped silently: the judge would grade an instruction it cannot see.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

from flask_eval.core.errors import FailureReason, JudgeError
from flask_eval.core.images import Image
from flask_eval.rubrics.messages import ImagePart, Message, images_of, parts_of

#: the one run of a message's content: a piece of text, or an image
Run = str | Image


def has_images(messages: Sequence[Message]) -> bool:
    """Whether any of ``messages`` holds an image."""
    return any(images_of(m) for m in messages)


def check_images(judge: str, messages: Sequence[Message], types: Sequence[str]) -> None:
    """JudgeError (``config``) when ``messages`` hold an image the provider cannot take:
    any image when ``types`` is empty, an image in a message that is not the user's, or
    one of a media type not in ``types``."""
    for m in messages:
        for image in images_of(m):
            if not types:
                raise JudgeError(
                    FailureReason.CONFIG,
                    f"judge {judge}: its provider takes no images, and this prompt has one "
                    f"({image.ref.media_type}, sha256 {image.ref.sha256[:12]})",
                )
            if m["role"] != "user":
                raise JudgeError(
                    FailureReason.CONFIG,
                    f"judge {judge}: an image in a {m['role']} message (images go in a "
                    "user message)",
                )
            if image.ref.media_type not in types:
                raise JudgeError(
                    FailureReason.CONFIG,
                    f"judge {judge}: its provider takes no {image.ref.media_type} images "
                    f"(it takes {', '.join(types)}); sha256 {image.ref.sha256[:12]}",
                )


def runs(message: Message) -> list[Run]:
    """``message``'s content in order: each stretch of text between images joined into
    one string (empty stretches left out), each image in its place."""
    out: list[Run] = []
    text: list[str] = []
    for part in parts_of(message):
        if isinstance(part, ImagePart) and part.image is not None:
            if "".join(text):
                out.append("".join(text))
            text = []
            out.append(part.image)
        else:
            text.append(part.text)
    if "".join(text):
        out.append("".join(text))
    return out


def base64_of(image: Image) -> str:
    """The image's bytes in standard base64 (RFC 4648, with padding)."""
    return base64.b64encode(image.data).decode("ascii")


def data_uri(image: Image) -> str:
    """The image as a ``data:`` URI of its checked media type (RFC 2397)."""
    return f"data:{image.ref.media_type};base64,{base64_of(image)}"
