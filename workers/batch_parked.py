"""A parked batch call (workers/batch_lane.py) as the ledger keeps it: what it keeps of
the call's rendering (:func:`request_of`, read back by :func:`generate_of`), its estimated
prompt tokens (:func:`tokens_of`) and which planned calls fit a token budget
(:func:`within_tokens`)."""

from __future__ import annotations

import math
from typing import Any

from flask_eval.core.images import ImageRef
from flask_eval.rubrics.messages import images_of, text_of, to_data
from flask_eval.storage.batch_rows import OpenCall
from flask_eval.workers.calls import Call
from flask_eval.workers.judge import GenerateConfig


def request_of(call: Call) -> dict[str, Any]:
    """What a parked call keeps of its rendering: enough to send it in a batch."""
    g = call.generate
    schema = None if g.schema is None else dict(g.schema)
    generate = {
        "max_tokens": g.max_tokens,
        "temperature": g.temperature,
        "timeout": g.timeout,
        "schema": schema,
        "seed": g.seed,
    }
    return {"messages": to_data(call.messages), "generate": generate}


def tokens_of(call: Call) -> int:
    """A parked call's prompt tokens, estimated: four characters a token, and each image
    its :func:`image_tokens` (a batch's token budget counts them, as the providers'
    enqueued-token limits do)."""
    text = sum(len(text_of(m)) for m in call.messages) // 4 + 1
    return text + sum(image_tokens(i.ref) for m in call.messages for i in images_of(m))


#: the longest side an image is scaled down to before its tokens are counted here
IMAGE_LONG_SIDE = 1568
#: the pixels of one image token here (Anthropic's rule, the highest count of the three
#: providers' usual rules for an image of a megapixel or so)
IMAGE_PIXELS_PER_TOKEN = 750


def image_tokens(ref: ImageRef) -> int:
    """An image's prompt tokens, estimated by Anthropic's rule: scaled to fit
    :data:`IMAGE_LONG_SIDE` pixels, then one token per 750 pixels (a 1024 x 1024 image:
    1,399; OpenAI's high detail counts 765 for it, Gemini 1,032)."""
    scale = min(1.0, IMAGE_LONG_SIDE / max(ref.width, ref.height, 1))
    pixels = round(ref.width * scale) * round(ref.height * scale)
    return max(1, math.ceil(pixels / IMAGE_PIXELS_PER_TOKEN))


def generate_of(data: dict[str, Any]) -> GenerateConfig:
    return GenerateConfig(**data)


def within_tokens(calls: list[OpenCall], room: int, at_least_one: bool) -> list[OpenCall]:
    """The first of ``calls`` whose tokens fit in ``room`` (one at least if ``at_least_one``:
    a call larger than the whole limit still goes, alone)."""
    chosen: list[OpenCall] = []
    used = 0
    for c in calls:
        if used + c.tokens > room and (chosen or not at_least_one):
            break
        chosen.append(c)
        used += c.tokens
    return chosen
