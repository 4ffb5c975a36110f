"""What an image may be, and what each provider accepts of one: media types, bytes,
pixels, images per request.

:data:`MAX_IMAGE_BYTES` and :data:`MAX_PIXELS` bound every image flask-eval takes in, the
same wherever it comes from: read for a run (``producer.images``; ``--max-image-mb``
lowers or raises the bytes) or carried by a bundle (``app.bundle_images``). Then one
table, each provider's limits with their published source and the day they were read; a
run whose images a judge's provider would refuse is refused before anything is written
(``producer.image_plan.check_provider_limits``). How many tokens an image counts for is
not here. docs/design/images.md lists the same table.
"""

from __future__ import annotations

from dataclasses import dataclass

MB = 1_000_000
MIB = 1 << 20

#: bytes an image may have: the default of ``--max-image-mb``, and the most a bundle's
#: image holds (the largest any provider takes inline: OpenAI's 20 MB)
MAX_IMAGE_BYTES = 20 * MIB
#: the longest side any provider takes (Anthropic refuses more than 8000 x 8000)
MAX_SIDE = 8000
#: pixels an image may have, checked from its header before a pixel is decoded (a small
#: file declaring 50,000 x 50,000 pixels is a decompression bomb)
MAX_PIXELS = MAX_SIDE * MAX_SIDE


@dataclass(frozen=True)
class ProviderImageLimits:
    """A provider's published limits on images in one request (None: no published
    limit). ``base64_bytes``: the limit applies to the image's base64 text, not to its
    bytes (4/3 of them, rounded up to a multiple of 4)."""

    provider: str
    media_types: tuple[str, ...]
    max_image_bytes: int | None
    max_side: int | None
    max_images: int | None
    max_request_bytes: int | None
    base64_bytes: bool
    source: str
    checked: str


#: provider (the judge spec's prefix) -> its limits
PROVIDER_LIMITS: dict[str, ProviderImageLimits] = {
    "openai": ProviderImageLimits(
        provider="openai",
        media_types=("image/png", "image/jpeg", "image/webp", "image/gif"),
        # "Up to 20MB per image; up to 500 individual images per request; up to 50 MB
        # image bytes per request"; GIF only non-animated
        max_image_bytes=20 * MB,
        max_side=None,
        max_images=500,
        max_request_bytes=50 * MB,
        base64_bytes=False,
        source="https://platform.openai.com/docs/guides/images-vision (Image input requirements)",
        checked="2026-07-01",
    ),
    "anthropic": ProviderImageLimits(
        provider="anthropic",
        media_types=("image/png", "image/jpeg", "image/webp", "image/gif"),
        # 5 MB per image (the API's error: "image exceeds 5 MB maximum: N bytes > 5242880
        # bytes", counted on the base64 text); larger than 8000x8000 px is rejected; up
        # to 100 images per API request; 32 MB per request on the standard endpoints
        max_image_bytes=5 * MIB,
        max_side=MAX_SIDE,
        max_images=100,
        max_request_bytes=32 * MB,
        base64_bytes=True,
        source="https://docs.anthropic.com/en/docs/build-with-claude/vision (Basics and Limits)",
        checked="2026-07-01",
    ),
    "gemini": ProviderImageLimits(
        provider="gemini",
        # image/heic and image/heif too, which flask-eval does not read; no GIF
        media_types=("image/png", "image/jpeg", "image/webp"),
        max_image_bytes=None,
        max_side=None,
        max_images=3000,
        # "the total request size limit is 20 MB" for inline data (base64 in transit)
        max_request_bytes=20 * MB,
        base64_bytes=True,
        source="https://ai.google.dev/gemini-api/docs/image-understanding (inline image data)",
        checked="2026-07-01",
    ),
}

#: Anthropic: a request with more than 20 images takes at most 2000x2000 px per image
ANTHROPIC_MANY_IMAGES = 20
ANTHROPIC_MANY_IMAGES_SIDE = 2000


def base64_size(size: int) -> int:
    """The length of the base64 text of ``size`` bytes."""
    return 4 * ((size + 2) // 3)


def limits_of(spec: str) -> ProviderImageLimits | None:
    """The limits of a judge spec's provider (``provider/model[@url]``); None for a
    provider without a published table (an OpenAI-compatible server: its own)."""
    return PROVIDER_LIMITS.get(spec.partition("/")[0])
