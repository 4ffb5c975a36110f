"""Where a prompt's images go among its rendered messages (pure).

A protocol renders text; the instruction's images (``Subject.images``, bytes included)
are then placed by :func:`with_images`, the same way for every protocol and both of its
forms (free text and structured): in the user message, right after the shared prefix
(``rubrics.messages``: the last part that ends it) and before the instance's own text,
so that the prefix every call with the same criteria repeats stays byte for byte the
same, and the image sits beside the instruction it belongs to. When the shared prefix
ends in an earlier message (a system prompt), or nothing is shared, the images open the
first user message after it.

A protocol whose trained layout puts the image elsewhere places it itself
(``rubrics.prometheus_vision``: the image first, then the text, as LLaVA was trained):
rendered messages that already hold an image are left as they are. A subject without
images renders exactly as before: the messages are returned unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

from flask_eval.core.images import Image
from flask_eval.rubrics.messages import Message, image_part, images_of, parts_of, prefix_end


def with_images(messages: Sequence[Message], images: Sequence[Image]) -> list[Message]:
    """``messages`` with ``images`` placed after the shared prefix, in the user message
    (see the module docstring); ValueError when there is no user message to hold them."""
    if not images or any(images_of(m) for m in messages):
        return list(messages)
    end = prefix_end(messages)
    at_message, at_part = (0, -1) if end is None else end
    while at_message < len(messages) and messages[at_message]["role"] != "user":
        at_message, at_part = at_message + 1, -1
    if at_message == len(messages):
        raise ValueError("a prompt with images needs a user message to hold them")
    target = messages[at_message]
    parts = list(parts_of(target))
    placed = [*parts[: at_part + 1], *(image_part(i) for i in images), *parts[at_part + 1 :]]
    out = list(messages)
    out[at_message] = {"role": target["role"], "content": tuple(placed)}
    return out
