"""Small, varied test images with known content, made with Pillow (no data set needed).

* :func:`bar_chart`: bars of known values (their heights in pixels are the values
  times ``scale``), each bar its own colour;
* :func:`shapes`: a known number of circles, squares and triangles;
* :func:`text_image`: a line of text rendered on a plain background;
* :func:`encode`: any of them as PNG, JPEG or WebP bytes; :func:`png_header` a PNG
  whose header declares any size (a decompression bomb is 50,000 x 50,000) without its
  pixels; :func:`gallery`: ``n`` varied images with what each one shows.
"""

from __future__ import annotations

import io
import random
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from PIL import Image, ImageDraw

FORMATS = ("PNG", "JPEG", "WEBP")
MEDIA = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}
_COLOURS = ((220, 50, 47), (38, 139, 210), (133, 153, 0), (181, 137, 0), (108, 113, 196))


def bar_chart(values: Sequence[int], scale: int = 10, width: int = 24) -> Image.Image:
    """Bars of heights ``value * scale`` pixels on white, left to right."""
    height = max(values) * scale + 20
    img = Image.new("RGB", (len(values) * (width + 8) + 8, height), "white")
    draw = ImageDraw.Draw(img)
    for n, value in enumerate(values):
        x = 8 + n * (width + 8)
        draw.rectangle((x, height - value * scale, x + width - 1, height - 1), _COLOURS[n % 5])
    return img


def shapes(counts: dict[str, int], size: int = 160, seed: int = 0) -> Image.Image:
    """``counts`` circles, squares and triangles on a grid of cells (none overlap)."""
    img = Image.new("RGB", (size, size), "white")
    draw = ImageDraw.Draw(img)
    cell = size // 5
    cells = random.Random(seed).sample(range(25), sum(counts.values()))
    kinds = [k for k, n in counts.items() for _ in range(n)]
    for kind, c in zip(kinds, cells, strict=True):
        x, y, m = (c % 5) * cell, (c // 5) * cell, cell // 6
        box = (x + m, y + m, x + cell - m, y + cell - m)
        if kind == "circle":
            draw.ellipse(box, fill=(38, 139, 210))
        elif kind == "square":
            draw.rectangle(box, fill=(220, 50, 47))
        else:
            draw.polygon(
                [(x + cell // 2, y + m), (x + m, y + cell - m), (x + cell - m, y + cell - m)],
                fill=(133, 153, 0),
            )
    return img


def text_image(text: str, size: tuple[int, int] = (200, 40)) -> Image.Image:
    """``text`` in black on a light background (Pillow's default font)."""
    img = Image.new("RGB", size, (250, 250, 240))
    ImageDraw.Draw(img).text((6, 12), text, fill="black")
    return img


def encode(img: Image.Image, fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    img.save(buffer, format=fmt, **({"quality": 90} if fmt in ("JPEG", "WEBP") else {}))
    return buffer.getvalue()


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_header(width: int, height: int) -> bytes:
    """A PNG whose IHDR declares ``width`` x ``height`` (8-bit RGB), with one tiny IDAT
    and IEND: what a decompression bomb's header looks like, without its pixels."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 16)
    return (
        b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")
    )


@dataclass(frozen=True)
class Made:
    """One generated image: its bytes, media type, and what it shows."""

    name: str
    data: bytes
    media_type: str
    truth: str


def gallery(n: int, seed: int = 0) -> list[Made]:
    """``n`` varied images (charts, shapes, text; PNG, JPEG and WebP in turn), each with
    the answer a reader of it should give."""
    rng = random.Random(seed)
    made: list[Made] = []
    for k in range(n):
        fmt = FORMATS[k % 3]
        kind = k % 3 if n > 1 else 0
        if kind == 0:
            values = [rng.randint(1, 9) for _ in range(rng.randint(3, 5))]
            img, truth = bar_chart(values), f"bars {values}"
        elif kind == 1:
            counts = {"circle": rng.randint(1, 4), "square": rng.randint(0, 3)}
            img, truth = (
                shapes(counts, seed=k),
                f"{counts['circle']} circles, {counts['square']} squares",
            )
        else:
            word = f"CODE-{rng.randint(1000, 9999)}"
            img, truth = text_image(word), word
        made.append(Made(f"img{k:03d}.{fmt.lower()}", encode(img, fmt), MEDIA[fmt], truth))
    return made
