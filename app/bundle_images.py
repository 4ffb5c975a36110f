"""The images a bundle carries, checked before anything is written (docs/design/bundles.md,
"Images").

An ``image`` row of a bundle holds the image's digest, media type, size in pixels and
bytes, and its bytes as base64 text. Each is checked as an image read from a file is:
the bytes are valid base64 whose SHA-256 is the row's digest and whose length is its
size (at most ``core.image_limits.MAX_IMAGE_BYTES``, as for an image read for a run);
the media type is one of ``core.images.MEDIA_TYPES`` and is what the bytes are (Pillow
reads their magic, among those formats only: an SVG, or a PNG labelled JPEG, is
refused); the width and height are the image's own, at most
``core.image_limits.MAX_PIXELS`` in all (a small file declaring 50,000 x 50,000 pixels,
a decompression bomb, is refused before it is decoded); and the image decodes whole.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import re
import warnings
from typing import Any

from PIL import Image as Pillow
from PIL import UnidentifiedImageError

from flask_eval.core.files import MIB
from flask_eval.core.image_limits import MAX_IMAGE_BYTES, MAX_PIXELS
from flask_eval.core.images import MEDIA_TYPES, ImageRef

#: Pillow's format name of each media type
FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/webp": "WEBP", "image/gif": "GIF"}
_HEX64 = re.compile(r"[0-9a-f]{64}")


class BadImage(ValueError):
    """What is wrong with an image (one line)."""


def decoded(text: Any) -> bytes:
    """The bytes a bundle's base64 ``text`` holds; BadImage if it holds none."""
    if not isinstance(text, str):
        raise BadImage("its data is not base64 text")
    if len(text) > (MAX_IMAGE_BYTES + 2) // 3 * 4:
        raise BadImage(f"it is larger than {MAX_IMAGE_BYTES // MIB} MiB")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BadImage("its data is not base64") from None


def encoded(data: bytes) -> str:
    """``data`` as a bundle holds it (base64 text)."""
    return base64.b64encode(data).decode("ascii")


def check_image(ref: ImageRef, data: bytes) -> None:
    """Check ``data`` against what its row says of it (``ref``); BadImage if it is not
    that image."""
    if not _HEX64.fullmatch(ref.sha256):
        raise BadImage("its sha256 is not 64 lowercase hex digits")
    if hashlib.sha256(data).hexdigest() != ref.sha256:
        raise BadImage("its bytes' SHA-256 is not its digest (the bytes were changed)")
    if len(data) != ref.size:
        raise BadImage(f"it holds {len(data)} bytes, its size says {ref.size}")
    if len(data) > MAX_IMAGE_BYTES:
        raise BadImage(f"it is larger than {MAX_IMAGE_BYTES // MIB} MiB")
    if ref.media_type not in FORMATS:
        raise BadImage(f"its media type {ref.media_type!r} is not one of {list(MEDIA_TYPES)}")
    found = _format(data)
    if found != FORMATS[ref.media_type]:
        raise BadImage(f"its bytes are {found}, not the {ref.media_type} it is labelled")
    _decode(ref, data)


def _format(data: bytes) -> str:
    """The format the bytes' magic says (Pillow's name), among :data:`FORMATS` only."""
    for name in FORMATS.values():
        try:
            with warnings.catch_warnings():  # its size is checked next, once
                warnings.simplefilter("ignore", Pillow.DecompressionBombWarning)
                with Pillow.open(io.BytesIO(data), formats=[name]):
                    return name
        except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
            continue
        except Pillow.DecompressionBombError:
            return name  # its size is checked next
    raise BadImage(f"its bytes are no image of {list(MEDIA_TYPES)} (an SVG, text, or damaged)")


def _decode(ref: ImageRef, data: bytes) -> None:
    """Read the image's size from its header, then decode it whole within the limit."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Pillow.DecompressionBombWarning)
            with Pillow.open(io.BytesIO(data), formats=[FORMATS[ref.media_type]]) as image:
                width, height = image.size
                if width * height > MAX_PIXELS:
                    raise BadImage(
                        f"it declares {width} x {height} pixels, more than {MAX_PIXELS:,} "
                        "(a decompression bomb?)"
                    )
                if (width, height) != (ref.width, ref.height):
                    raise BadImage(
                        f"it is {width} x {height} pixels, its row says {ref.width} x {ref.height}"
                    )
                image.load()
    except (Pillow.DecompressionBombError, Pillow.DecompressionBombWarning):
        raise BadImage(
            f"it declares more than {MAX_PIXELS:,} pixels (a decompression bomb?)"
        ) from None
    except BadImage:
        raise
    except (OSError, ValueError, SyntaxError, UnidentifiedImageError, EOFError) as exc:
        raise BadImage(f"it does not decode: {type(exc).__name__}") from None
