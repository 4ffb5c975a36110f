"""Reading an instance's images: a file, a ``data:`` URI or (when allowed) a URL, checked
before anything is written (docs/design/images.md).

The type of an image is what its bytes are (Pillow's parsers, restricted to PNG, JPEG,
WebP and GIF), never its file name or the type a ``data:`` URI or a server claims: a
claim that differs from the bytes is refused. SVG and any other XML or text is refused by
name. The size in pixels is read from the header alone (Pillow opens lazily) and checked
before a pixel is decoded: a PNG declaring 50,000 x 50,000 pixels is refused without
allocating it. Then the image is decoded once (JPEG at 1/8 scale), so a truncated or
corrupt file is refused too. Animated images (GIF, APNG, WebP) are refused: OpenAI takes
no animated GIF, and a judge shown the first frame alone would grade something else.

The bytes kept are the bytes read, nothing stripped; the image is known by their SHA-256
(``core.images``). How images are read (fetching URLs, limits) is set for a load with
:func:`reading_images`; every problem is an :class:`ImageProblem`, which the loaders turn
into an InputError naming the instances file and line.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image as PILImage
from PIL import UnidentifiedImageError

from flask_eval.core.errors import InputError
from flask_eval.core.files import open_input
from flask_eval.core.images import MEDIA_TYPES, Image, ImageRef, ReadRef
from flask_eval.core.jsonl import json_type
from flask_eval.core.text import clip
from flask_eval.producer.image_fetch import fetch_image
from flask_eval.producer.image_rules import (
    DEFAULT_MAX_BYTES,
    MAX_IMAGES,
    MAX_PIXELS,
    SVG_REFUSED,
    ImageOptions,
    ImageProblem,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "MAX_IMAGES",
    "MAX_PIXELS",
    "SVG_REFUSED",
    "ImageOptions",
    "ImageProblem",
    "identify",
    "read_bytes",
    "read_image",
    "reading_images",
    "record_images",
]

#: Pillow's own guard, a second line behind the explicit check (it warns above this
#: and raises above twice this; the warning is an error here)
PILImage.MAX_IMAGE_PIXELS = min(PILImage.MAX_IMAGE_PIXELS or MAX_PIXELS, MAX_PIXELS)

#: Pillow format -> media type (MPO is a JPEG with more pictures after the first)
_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "MPO": "image/jpeg"}
_FORMATS |= {"WEBP": "image/webp", "GIF": "image/gif"}
#: the magic of types refused, to name them
_OTHER = (
    (b"BM", "BMP"),
    (b"II*\x00", "TIFF"),
    (b"MM\x00*", "TIFF"),
    (b"%PDF", "PDF"),
    (b"\x00\x00\x01\x00", "ICO"),
    (b"8BPS", "PSD"),
)


@dataclass
class _Reading:
    options: ImageOptions
    #: each reference read once per load (a URL is fetched once)
    seen: dict[str, ReadRef] = field(default_factory=dict)


_READING: ContextVar[_Reading | None] = ContextVar("flask_eval_image_reading", default=None)


@contextmanager
def reading_images(options: ImageOptions) -> Iterator[None]:
    """Load instances with ``options`` (the loaders read images with the options of the
    innermost such block; outside any, the defaults: no URL is fetched)."""
    token = _READING.set(_Reading(options))
    try:
        yield
    finally:
        _READING.reset(token)


def _reading() -> _Reading:
    reading = _READING.get()
    return _Reading(ImageOptions()) if reading is None else reading


# --------------------------------------------------------------------------- bytes


def _text_kind(data: bytes) -> str | None:
    """What ``data`` is when it is text rather than an image: SVG, other XML/HTML, text."""
    head = data[:2048].lstrip(b"\xef\xbb\xbf \t\r\n")
    low = head.lower()
    if b"<svg" in low or (low.startswith(b"<?xml") and b"svg" in data[:8192].lower()):
        return "svg"
    if head.startswith(b"<"):
        return "an XML or HTML document"
    if head and all(32 <= b < 127 or b in b"\t\r\n" for b in head[:512]):
        return "text"
    return None


def _refuse_other(data: bytes) -> ImageProblem:
    kind = _text_kind(data)
    if kind == "svg":
        return ImageProblem(SVG_REFUSED)
    if kind is not None:
        return ImageProblem(f"{kind}, not an image; accepted: PNG, JPEG, WebP, GIF")
    name = next((n for magic, n in _OTHER if data.startswith(magic)), None)
    what = f"a {name} image" if name else "not an image of a known type"
    return ImageProblem(f"unsupported image type: {what}; accepted: PNG, JPEG, WebP, GIF")


def identify(data: bytes, max_pixels: int = MAX_PIXELS) -> tuple[str, int, int]:
    """(media type, width, height) of ``data``, read from its bytes and checked: a
    supported type, not animated, at most ``max_pixels`` pixels (from the header, before
    decoding), and decoding whole; ImageProblem otherwise."""
    if not data:
        raise ImageProblem("the image is empty (0 bytes)")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PILImage.DecompressionBombWarning)
        try:
            with PILImage.open(io.BytesIO(data), formats=("PNG", "JPEG", "WEBP", "GIF")) as img:
                media = _FORMATS.get(str(img.format))
                width, height = img.size
                _check_pixels(width, height, max_pixels)
                if media is None:
                    raise _refuse_other(data)
                if getattr(img, "is_animated", False):
                    raise ImageProblem(
                        f"an animated {img.format} is not accepted (judges would see one "
                        "frame); give a still image"
                    )
        except UnidentifiedImageError:
            raise _refuse_other(data) from None
        except (PILImage.DecompressionBombError, PILImage.DecompressionBombWarning):
            raise ImageProblem(
                f"the image declares more pixels than the {max_pixels:,} allowed "
                "(a decompression bomb?)"
            ) from None
        except ImageProblem:
            raise
        except Exception as exc:  # Pillow's parsers raise many types on broken headers
            raise ImageProblem(f"the image does not decode: {clip(str(exc), 120)}") from None
        _decode(data, media)
    return media, width, height


def _check_pixels(width: int, height: int, max_pixels: int) -> None:
    if width < 1 or height < 1:
        raise ImageProblem(f"the image has no pixels ({width}x{height})")
    if width * height > max_pixels:
        raise ImageProblem(
            f"the image declares {width:,} x {height:,} pixels, more than the "
            f"{max_pixels:,} allowed (checked before decoding: a decompression bomb?)"
        )


def _decode(data: bytes, media: str) -> None:
    """Decode the image once (its size already checked), so that a corrupt or
    truncated file is refused now, not by a provider later."""
    try:
        with PILImage.open(io.BytesIO(data)) as img:
            img.verify()
        with PILImage.open(io.BytesIO(data)) as img:
            if media == "image/jpeg":
                img.draft("RGB", (max(1, img.size[0] // 8), max(1, img.size[1] // 8)))
            img.load()
    except Exception as exc:  # corrupt data: Pillow raises OSError, SyntaxError, ...
        raise ImageProblem(f"the image does not decode: {clip(str(exc), 120)}") from None


def image_of(data: bytes, options: ImageOptions, claimed: str | None = None) -> ReadRef:
    """The checked reference of ``data`` (its bytes attached); ``claimed`` is the type a
    ``data:`` URI or a server names, refused when the bytes are another."""
    if len(data) > options.max_bytes:
        raise ImageProblem(_too_big(len(data), options.max_bytes))
    media, width, height = identify(data, options.max_pixels)
    if claimed is not None and claimed != media:
        raise ImageProblem(f"the image claims to be {clip(claimed, 40)} but its bytes are {media}")
    digest = hashlib.sha256(data).hexdigest()
    return ReadRef(digest, media, width, height, len(data), data)


def _too_big(size: int, limit: int) -> str:
    return (
        f"the image is {size:,} bytes, more than the {limit:,} allowed "
        "(--max-image-mb raises the limit)"
    )


# --------------------------------------------------------------------------- references


def _data_uri(ref: str, options: ImageOptions) -> ReadRef:
    head, comma, payload = ref.partition(",")
    if not comma:
        raise ImageProblem("a data: URI needs a comma before its data (data:image/png;base64,...)")
    params = head[5:].split(";")
    media = params[0].strip().lower()
    if "base64" not in (p.strip().lower() for p in params[1:]):
        raise ImageProblem("a data: URI of an image must be base64 (data:image/png;base64,...)")
    if media == "image/svg+xml":
        raise _refuse_other(b"<svg")
    if media not in MEDIA_TYPES:
        raise ImageProblem(
            f"a data: URI of type {clip(media or '(none)', 40)}; accepted: {', '.join(MEDIA_TYPES)}"
        )
    text = "".join(payload.split())
    if len(text) * 3 // 4 > options.max_bytes + 2:
        raise ImageProblem(_too_big(len(text) * 3 // 4, options.max_bytes))
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ImageProblem("the data: URI's data is not valid base64") from None
    return image_of(data, options, claimed=media)


def _file(ref: str, base: Path, options: ImageOptions) -> ReadRef:
    path = Path(ref) if Path(ref).is_absolute() else base / ref
    try:
        with open_input(str(path), "an image file") as handle:
            data = handle.read(options.max_bytes + 1)
    except InputError as exc:
        raise ImageProblem(f"image {clip(ref)}: {exc.message}") from None
    except OSError as exc:
        raise ImageProblem(f"image {clip(ref)}: cannot read it: {exc.strerror or exc}") from None
    if len(data) > options.max_bytes:
        raise ImageProblem(f"image {clip(ref)}: {_too_big(len(data), options.max_bytes)}")
    try:
        return image_of(data, options)
    except ImageProblem as exc:
        raise ImageProblem(f"image {clip(ref)}: {exc}") from None


def read_image(ref: str, base: Path, options: ImageOptions | None = None) -> ReadRef:
    """The checked image a reference names: a path (relative to ``base``, the instances
    file's folder, or absolute), a ``data:image/...;base64,`` URI, or an ``http(s)://``
    URL (only with ``options.fetch``, from ``options.hosts``)."""
    opts = options or _reading().options
    if "\x00" in ref:
        raise ImageProblem("an image reference contains a NUL character")
    if not ref.strip():
        raise ImageProblem("an image reference is empty")
    scheme = ref.partition(":")[0].lower() if ":" in ref[:12] else ""
    if scheme == "data":
        return _data_uri(ref, opts)
    if scheme in ("http", "https"):
        data, claimed = fetch_image(ref, opts)
        try:
            return image_of(data, opts, claimed)
        except ImageProblem as exc:
            raise ImageProblem(f"image {clip(ref)}: {exc}") from None
    if scheme and len(scheme) > 1 and scheme.isalpha():  # a Windows drive is one letter
        raise ImageProblem(
            f"image {clip(ref)}: scheme {scheme}: is not read; give a file path, a "
            "data:image/...;base64, URI or an http(s):// URL"
        )
    return _file(ref, base, opts)


def record_images(record: dict[str, Any], key: str, path: str, line: int) -> tuple[ImageRef, ...]:
    """The images field ``key`` of an instance record (a list of references, or one
    reference for a single ``image``), read and checked; InputError naming ``path`` and
    ``line``. Absent: no image."""
    if key not in record:
        return ()
    value = record[key]
    refs = [value] if isinstance(value, str) and key == "image" else value
    if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
        shown = json_type(value)
        raise InputError(
            f"field {key!r} must be a list of image references (paths, data: URIs or "
            f"URLs), got {shown}",
            path,
            line,
        )
    reading = _reading()
    if len(refs) > reading.options.max_images:
        raise InputError(
            f"field {key!r} lists {len(refs)} images, more than the "
            f"{reading.options.max_images} an instance may carry",
            path,
            line,
        )
    base = Path(path).parent
    found: list[ImageRef] = []
    for ref in refs:
        seen = f"{base}\x00{ref}"
        try:
            image = reading.seen.get(seen) or read_image(ref, base, reading.options)
        except ImageProblem as exc:
            raise InputError(f"field {key!r}: {exc}", path, line) from None
        reading.seen[seen] = image
        found.append(image)
    return tuple(found)


def read_bytes(data: bytes) -> ReadRef:
    """The checked reference of an image's bytes (read elsewhere: a data set's column),
    with the limits of the current :func:`reading_images` block."""
    return image_of(data, _reading().options)


def as_image(ref: ReadRef) -> Image:
    """The :class:`~core.images.Image` of a reference read here (bytes included)."""
    return Image(ref.plain(), ref.data)
