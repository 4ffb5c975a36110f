"""The images in a request, as the simulated judge receives them (pure, no I/O): each
image part of the three wire formats is decoded and checked as a provider checks it
(valid base64; its bytes' type, by their magic, is the type declared; Pillow decodes
it; not past a provider's size), billed by its provider's rule
(``core.image_tokens``) and summed up in what the judge saw (:class:`SeenImage`: its
SHA-256, type, size, mean brightness and distinct colours).

A bad image is refused with the 400 its provider answers (:class:`simulator.wire.
BadRequest`, in the provider's words). An image given by URL (OpenAI ``image_url``
with an ``http(s)`` URL, Anthropic's ``url`` source) is refused too: the simulator
fetches nothing.

The judge's answer depends on what it saw (:func:`seeded`, :func:`named`): its draws
are keyed on each image's decoded content (size, brightness, colours: the same picture
in another lossless encoding draws the same), and its answer opens by naming each image
(``Image 1: image/png 320x200 sha256 abcd1234``), so a test can tell the image arrived.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from PIL import Image, ImageStat, UnidentifiedImageError

from flask_eval.core.image_limits import MAX_PIXELS, MAX_SIDE
from flask_eval.core.image_tokens import image_tokens
from flask_eval.core.images import ImageRef

from .config import SimConfig

Dialect = Literal["openai", "anthropic", "gemini"]
#: media type -> Pillow's format name
FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/webp": "WEBP", "image/gif": "GIF"}
#: distinct colours are counted up to this many
MAX_COLOURS = 4096


class ImageRefused(ValueError):
    """An image a provider refuses: ``why`` is one of base64, type, mismatch, decode,
    too_large, url."""

    def __init__(self, why: str, detail: str) -> None:
        super().__init__(detail)
        self.why = why


@dataclass(frozen=True)
class SeenImage(ImageRef):
    """One image of a request as the judge saw it (its digest, type and sizes as
    ``core.images.ImageRef`` names them), and what it bills."""

    #: mean luminance, 0..255
    brightness: int
    #: distinct colours, counted up to :data:`MAX_COLOURS`
    colours: int
    tokens: int = 0
    detail: str = "auto"

    def label(self, n: int) -> str:
        """``Image N: TYPE WxH sha256 PREFIX``: how the judge names it."""
        size = f"{self.width}x{self.height}"
        return f"Image {n}: {self.media_type} {size} sha256 {self.sha256[:8]}"

    def to_data(self) -> dict[str, Any]:
        return {
            **super().to_data(),
            "brightness": self.brightness,
            "colours": self.colours,
            "tokens": self.tokens,
        }


def sniffed(data: bytes) -> str | None:
    """The media type of ``data`` by its magic bytes, None when none of the four."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _b64(text: object, proto: bool = False) -> bytes:
    """The bytes of base64 ``text``; ``proto``: as Gemini's JSON bytes fields take them,
    in the standard or the URL-safe alphabet (google-genai sends the latter), padded or
    not."""
    if not isinstance(text, str) or not text:
        raise ImageRefused("base64", "the image data must be a non-empty base64 string")
    if proto:
        text = text.replace("-", "+").replace("_", "/")
        text += "=" * (-len(text) % 4)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ImageRefused("base64", "the image data is not valid base64") from None


def seen(data: bytes, declared: str) -> SeenImage:
    """Check ``data`` (an image declared ``declared``) and sum up what it shows;
    :class:`ImageRefused` when a provider would refuse it."""
    if declared not in FORMATS:
        raise ImageRefused("type", f"unsupported image media type {declared[:60]!r}")
    actual = sniffed(data)
    if actual != declared:
        what = actual or "not an image of a supported type"
        raise ImageRefused("mismatch", f"declared {declared}, but the bytes are {what}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=[FORMATS[actual]]) as img:
                width, height = img.size
                if width > MAX_SIDE or height > MAX_SIDE or width * height > MAX_PIXELS:
                    raise ImageRefused("too_large", f"{width}x{height} is larger than 8000x8000")
                rgb = img.convert("RGB")
    except ImageRefused:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise ImageRefused("too_large", "the image is larger than 8000x8000") from None
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise ImageRefused(
            "decode", f"the image cannot be decoded ({type(exc).__name__})"
        ) from None
    brightness = round(ImageStat.Stat(rgb.convert("L")).mean[0])
    colours = rgb.getcolors(MAX_COLOURS)
    return SeenImage(
        hashlib.sha256(data).hexdigest(),
        actual,
        width,
        height,
        len(data),
        brightness,
        MAX_COLOURS if colours is None else len(colours),
    )


def _data_url(url: object) -> tuple[str, str]:
    """(media type, base64) of an OpenAI ``data:`` URL."""
    if not isinstance(url, str) or not url:
        raise ImageRefused("url", "image_url.url must be a non-empty string")
    if not url.startswith("data:"):
        raise ImageRefused("url", "the judge simulator fetches no image URLs: send a data: URL")
    head, sep, payload = url[5:].partition(",")
    if not sep or not head.endswith(";base64"):
        raise ImageRefused("base64", "a data: URL must be base64 (data:TYPE;base64,...)")
    return head.removesuffix(";base64"), payload


def openai_image(part: Any, model: str) -> SeenImage:
    """An OpenAI ``{"type": "image_url", "image_url": {"url": ..., "detail": ...}}``."""
    spec = part.get("image_url")
    if isinstance(spec, str):  # the short form some clients send
        spec = {"url": spec}
    if not isinstance(spec, dict):
        raise ImageRefused("url", "image_url must be an object with a url")
    media_type, payload = _data_url(spec.get("url"))
    detail = spec.get("detail") or "auto"
    if detail not in ("auto", "low", "high"):
        raise ImageRefused("type", f"image_url.detail must be auto, low or high, not {detail!r}")
    image = seen(_b64(payload), media_type)
    return replace(
        image,
        detail=detail,
        tokens=image_tokens("openai", model, image.width, image.height, detail),
    )


def anthropic_image(block: Any, model: str) -> SeenImage:
    """An Anthropic ``{"type": "image", "source": {"type": "base64", ...}}`` block."""
    source = block.get("source")
    if not isinstance(source, dict):
        raise ImageRefused("type", "image.source must be an object")
    if source.get("type") != "base64":
        raise ImageRefused("url", "the judge simulator takes base64 image sources only")
    image = seen(_b64(source.get("data")), str(source.get("media_type")))
    return replace(image, tokens=image_tokens("anthropic", model, image.width, image.height))


def gemini_image(inline: Any, model: str) -> SeenImage:
    """A Gemini ``inline_data`` / ``inlineData`` blob (``mime_type`` / ``mimeType``)."""
    if not isinstance(inline, dict):
        raise ImageRefused("type", "inline_data must be an object")
    mime = inline.get("mimeType", inline.get("mime_type"))
    image = seen(_b64(inline.get("data"), proto=True), str(mime))
    return replace(image, tokens=image_tokens("gemini", model, image.width, image.height))


def refusal_message(dialect: Dialect, exc: ImageRefused, where: str) -> tuple[str, str | None]:
    """The message (and OpenAI's error code) a provider answers a refused image with;
    ``where`` the image's place in the request, in the provider's notation."""
    if dialect == "openai":
        if exc.why in ("base64", "url"):
            return f"Invalid image_url at {where}: {exc}", "invalid_image_url"
        if exc.why == "too_large":
            return f"Image at {where} is too large: {exc}", "image_too_large"
        return (
            f"You uploaded an unsupported image. Please make sure your image is valid. ({exc})",
            "invalid_image_format",
        )
    if dialect == "anthropic":
        if exc.why == "mismatch":
            return f"{where}: The image was specified using {exc}", None
        return f"{where}: {exc}", None
    return f"Unable to process input image at {where}: {exc}", None


def seeded(config: SimConfig, images: Sequence[SeenImage]) -> SimConfig:
    """``config`` whose request seed mixes in what the images show: the judge's draws
    (its nudges, noise, rounding) then depend on the images' content."""
    if not images:
        return config
    parts = [str(config.request_seed)]
    parts += [f"{i.width}x{i.height}/{i.brightness}/{i.colours}" for i in images]
    digest = hashlib.blake2b("|".join(parts).encode(), digest_size=6).digest()
    return replace(config, request_seed=int.from_bytes(digest, "big"))


def named(text: str, images: Sequence[SeenImage]) -> str:
    """The judge's answer ``text`` opening with a line naming each image it saw."""
    if not images:
        return text
    lines = [image.label(n) for n, image in enumerate(images, 1)]
    return "\n".join(lines) + "\n\n" + text
