"""Images an instance's instruction carries (data objects, no I/O).

An image is known by the SHA-256 of its bytes: the ledger stores each image of a run once
(table ``image``), an instance names its images by digest (:class:`ImageRef`), and the
answer cache keys a prompt's images by digest. The bytes travel as :class:`Image` only
where they are sent (a judge call, a bundle, the viewer). docs/design/images.md says how
an image is read and checked (``producer.images``) and what each provider is sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
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


@dataclass(frozen=True, eq=False)
class ReadRef(ImageRef):
    """The :class:`ImageRef` of an image read in this process, its bytes attached: they
    go wherever the instance goes (sampling, probes, custom criteria) until the run is
    written (:func:`attached`). It equals and hashes as the plain reference."""

    data: bytes = field(default=b"", repr=False)

    def plain(self) -> ImageRef:
        return ImageRef(self.sha256, self.media_type, self.width, self.height, self.size)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ImageRef):
            return NotImplemented
        return self.to_data() == other.to_data()

    def __hash__(self) -> int:
        return hash(self.plain())


def attached(refs: Iterable[ImageRef]) -> list[Image]:
    """The images whose bytes ``refs`` carry (:class:`ReadRef`), each digest once."""
    found: dict[str, Image] = {}
    for ref in refs:
        if isinstance(ref, ReadRef) and ref.sha256 not in found:
            found[ref.sha256] = Image(ref.plain(), ref.data)
    return list(found.values())
