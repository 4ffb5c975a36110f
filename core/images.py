"""Images an instance's instruction carries (data objects, no I/O).

An image is known by the SHA-256 of its bytes: the ledger stores each image of a run once
(table ``image``), an instance names its images by digest (:class:`ImageRef`), and the
answer cache keys a prompt's images by digest. The bytes travel as :class:`Image` only
where they are sent (a judge call, a bundle, the viewer). docs/design/images.md says how
an image is read and checked (``producer.images``) and what each provider is sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: the media types an image may have (what OpenAI, Anthropic and Gemini all take)
MEDIA_TYPES: tuple[str, ...] = ("image/png", "image/jpeg", "image/webp", "image/gif")


@dataclass(frozen=True)
class ImageRef:
    """An image as an instance names it: digest, checked media type, size in pixels and
    bytes."""

    sha256: str
    media_type: str
    width: int
    height: int
    size: int

    def to_data(self) -> dict[str, Any]:
        return {
            "sha256": self.sha256,
            "media_type": self.media_type,
            "width": self.width,
            "height": self.height,
            "size": self.size,
        }

    @classmethod
    def from_data(cls, data: Any) -> ImageRef:
        return cls(
            str(data["sha256"]),
            str(data["media_type"]),
            int(data["width"]),
            int(data["height"]),
            int(data["size"]),
        )


@dataclass(frozen=True)
class Image:
    """An image with its bytes (checked when read: ``producer.images``)."""

    ref: ImageRef
    data: bytes = b""
