"""An instance's images, served by the viewer (``GET /runs/<run>/images/<sha256>``) and
shown beside its judgments (docs/design/viewer.md, "Images").

An image is served from the store's ``image`` table, the bytes as they were checked when
the run was made or imported (``app.bundle_images`` checks a bundle's), with their
checked media type as ``Content-Type``, ``nosniff`` (a browser never guesses another
type), ``inline`` with a file name, a CSP that lets the response run nothing and load
nothing (``sandbox``: even opened on its own, it is an inert document), readable by this
origin's pages only (``Cross-Origin-Resource-Policy``), and cached for good: its URL
names its content (``ETag`` is the digest; ``If-None-Match`` gets 304)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from flask_eval.core.errors import InputError
from flask_eval.core.images import MEDIA_TYPES, ImageRef
from flask_eval.storage.images import run_images
from flask_eval.storage.store import Store
from flask_eval.viewer.body import run_url

#: what a digest in an image's URL is: the SHA-256 of its bytes, in lowercase hex
DIGEST = re.compile(r"[0-9a-f]{64}")
#: an image's response may run nothing, load nothing and be framed by no page
IMAGE_CSP = "default-src 'none'; sandbox; frame-ancestors 'none'"
#: content-addressed: the bytes of a URL never change
CACHE = "private, max-age=31536000, immutable"
_SUFFIX = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif"}


class ImageNotFound(LookupError):
    """The run holds no image of that digest."""


def image_url(run: str, digest: str) -> str:
    return f"{run_url(run)}/images/{digest}"


def checked_digest(digest: str) -> str:
    """``digest`` if it is 64 lowercase hex digits; else InputError (a 400)."""
    if not DIGEST.fullmatch(digest):
        raise InputError("an image's digest is its SHA-256: 64 lowercase hex digits")
    return digest


def headers_of(ref: ImageRef) -> dict[str, str]:
    """The response headers of image ``ref``. A media type outside ``MEDIA_TYPES`` (a
    store written by other means) is served as bytes to download, never shown."""
    known = ref.media_type in MEDIA_TYPES
    name = f"{ref.sha256[:16]}.{_SUFFIX.get(ref.media_type, 'bin')}"
    return {
        "Content-Type": ref.media_type if known else "application/octet-stream",
        "Content-Disposition": f'{"inline" if known else "attachment"}; filename="{name}"',
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": IMAGE_CSP,
        "Cross-Origin-Resource-Policy": "same-origin",
        "Cache-Control": CACHE,
        "ETag": f'"{ref.sha256}"',
    }


def serve(store: Store, run_id: int, run_name: str, digest: str, match: str | None) -> web.Response:
    """The response of image ``digest`` of the run (``match``: the request's
    ``If-None-Match``); ImageNotFound if the run holds none (blocking: run it in a
    thread)."""
    found = run_images(store, run_id, [digest]).get(digest)
    if found is None:
        raise ImageNotFound(f"run {run_name} holds no image {digest}")
    headers = headers_of(found.ref)
    if match is not None and headers["ETag"] in (m.strip() for m in match.split(",")):
        headers.pop("Content-Type")
        return web.Response(status=304, headers=headers)
    return web.Response(body=found.data, headers=headers)


@dataclass(frozen=True)
class Shown:
    """An image as a page shows it: its URL, size and alternative text."""

    url: str
    width: int
    height: int
    alt: str
    media_type: str
    sha256: str


def shown(refs: tuple[ImageRef, ...], url_of: Callable[[str], str], of: str) -> list[Shown]:
    """Images as a page shows them: each at ``url_of(digest)``, named in its alt text
    (``of``: whose images they are, e.g. "instance 81")."""
    return [
        Shown(
            url_of(ref.sha256),
            ref.width,
            ref.height,
            f"Image {k} of {len(refs)} of {of} "
            f"({ref.media_type}, {ref.width} x {ref.height} pixels)",
            ref.media_type,
            ref.sha256,
        )
        for k, ref in enumerate(refs, start=1)
    ]
