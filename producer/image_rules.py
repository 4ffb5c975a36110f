"""What an image read for a run must be (``producer.images``) and how images are read:
the options and the one error type."""

from __future__ import annotations

from dataclasses import dataclass

from flask_eval.core.image_limits import MAX_IMAGE_BYTES, MAX_PIXELS

__all__ = [
    "DEFAULT_MAX_BYTES",
    "MAX_IMAGES",
    "MAX_PIXELS",
    "SVG_REFUSED",
    "ImageOptions",
    "ImageProblem",
]

#: bytes per image, by default (``--max-image-mb``): ``core.image_limits.MAX_IMAGE_BYTES``
DEFAULT_MAX_BYTES = MAX_IMAGE_BYTES
#: images per instance
MAX_IMAGES = 20


#: why an SVG is refused
SVG_REFUSED = (
    "an SVG image is not accepted (XML that may carry scripts and links); convert it to PNG"
)


class ImageProblem(Exception):
    """A reference that does not give an acceptable image (a one-line message)."""


@dataclass(frozen=True)
class ImageOptions:
    """How images are read: URLs fetched only with ``fetch`` and only from ``hosts``
    (``--fetch-images``, ``--image-hosts``), and the limits."""

    fetch: bool = False
    hosts: tuple[str, ...] = ()
    max_bytes: int = DEFAULT_MAX_BYTES
    max_pixels: int = MAX_PIXELS
    max_images: int = MAX_IMAGES
    timeout: float = 10.0
