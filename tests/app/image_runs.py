"""Runs whose instances carry images, made in a store directly (for the bundle and viewer
tests): small images drawn with Pillow (PNG, JPEG, WebP) whose content is known."""

from __future__ import annotations

import hashlib
import io

from PIL import Image as Pillow
from PIL import ImageDraw
from sqlalchemy import insert

from flask_eval.core.images import Image, ImageRef
from flask_eval.core.types import Instance, Response, ResponseSet
from flask_eval.storage.models import IMAGE
from flask_eval.storage.records import IMAGE_COLUMNS, RunInfo, image_values
from flask_eval.storage.store import Store
from tests.storage.test_store import SKILLS, run_config

FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/webp": "WEBP"}


def drawn(media_type: str, bars: tuple[int, ...], size: tuple[int, int] = (160, 120)) -> bytes:
    """A bar chart of ``bars`` (heights in pixels) as ``media_type`` bytes."""
    picture = Pillow.new("RGB", size, "white")
    pen = ImageDraw.Draw(picture)
    width = size[0] // (len(bars) + 1)
    for k, height in enumerate(bars):
        left = width // 2 + k * width
        pen.rectangle((left, size[1] - height, left + width - 4, size[1] - 1), fill=(40, 90, 200))
    out = io.BytesIO()
    picture.save(out, FORMATS[media_type])
    return out.getvalue()


def image_of(data: bytes, media_type: str) -> Image:
    with Pillow.open(io.BytesIO(data)) as picture:
        width, height = picture.size
    ref = ImageRef(hashlib.sha256(data).hexdigest(), media_type, width, height, len(data))
    return Image(ref, data)


def sample_images() -> list[Image]:
    """A PNG, a JPEG and a WebP chart, each of other bars."""
    return [
        image_of(drawn("image/png", (30, 80, 50)), "image/png"),
        image_of(drawn("image/jpeg", (90, 20), (200, 100)), "image/jpeg"),
        image_of(drawn("image/webp", (10, 40, 70, 100)), "image/webp"),
    ]


def create_image_run(store: Store, name: str = "pictures") -> tuple[RunInfo, list[Image]]:
    """A run of 3 instances, the first naming the PNG and the JPEG, the second the WebP,
    the third none; two models' responses; pending judgments of two judges."""
    images = sample_images()
    names = SKILLS.names
    named = [(images[0].ref, images[1].ref), (images[2].ref,), ()]
    instances = [
        Instance(
            id=f"q{i}",
            instruction=f"What does chart {i} show?",
            answer=f"bars {i}",
            skills=(names[0], names[4]),
            images=refs,
        )
        for i, refs in enumerate(named)
    ]
    sets = [
        ResponseSet(m, f"{m}.jsonl", tuple(Response(m, i.id, f"{m}: {i.id}") for i in instances))
        for m in ("alpha", "beta")
    ]
    run, created = store.create_run(
        name=name,
        fingerprint=hashlib.sha256(name.encode()).hexdigest(),
        mode="instance",
        config=run_config(),
        instances=instances,
        response_sets=sets,
        judges=["memory/j1", "memory/j2"],
    )
    assert created
    with store.engine.begin() as conn:
        conn.execute(
            insert(IMAGE),
            [dict(zip(IMAGE_COLUMNS, image_values(run.id, i), strict=True)) for i in images],
        )
    return run, images
