"""One set of limits bounds every image flask-eval takes in (``core.image_limits``): an
image read for a run and an image a bundle carries are held to the same bytes and pixels,
and a bundle's line bound leaves room for the largest image."""

from __future__ import annotations

import base64
import hashlib

import pytest

from flask_eval.app.bundle import MAX_ROW_BYTES
from flask_eval.app.bundle_images import BadImage, check_image, decoded
from flask_eval.core.image_limits import MAX_IMAGE_BYTES, MAX_PIXELS, base64_size
from flask_eval.core.images import ImageRef
from flask_eval.producer.image_rules import ImageOptions, ImageProblem
from flask_eval.producer.images import identify, image_of
from tests.imagegen import png_header


def test_a_run_reads_images_within_the_limits_a_bundle_carries() -> None:
    options = ImageOptions()
    assert (options.max_bytes, options.max_pixels) == (MAX_IMAGE_BYTES, MAX_PIXELS)


def test_one_byte_over_is_refused_by_both() -> None:
    data = b"\x89PNG\r\n\x1a\n" + b"\x00" * (MAX_IMAGE_BYTES - 7)
    assert len(data) == MAX_IMAGE_BYTES + 1
    with pytest.raises(ImageProblem, match="more than the 20,971,520 allowed"):
        image_of(data, ImageOptions())
    ref = ImageRef(hashlib.sha256(data).hexdigest(), "image/png", 1, 1, len(data))
    with pytest.raises(BadImage, match="larger than 20 MiB"):
        check_image(ref, data)
    # the base64 text is bounded before it is decoded, to the quantum past the limit
    with pytest.raises(BadImage, match="larger than 20 MiB"):
        decoded(base64.b64encode(data + b"\x00\x00").decode("ascii"))


@pytest.mark.filterwarnings("error")  # refused in one line, no warning printed
def test_a_bomb_is_refused_by_both_past_the_same_pixels() -> None:
    side = int(MAX_PIXELS**0.5)
    bomb = png_header(side + 1, side)
    with pytest.raises(ImageProblem, match="than the 64,000,000 allowed"):
        identify(bomb)
    ref = ImageRef(hashlib.sha256(bomb).hexdigest(), "image/png", side + 1, side, len(bomb))
    with pytest.raises(BadImage, match="more than 64,000,000"):
        check_image(ref, bomb)


def test_the_largest_image_fits_a_bundle_line() -> None:
    assert base64_size(MAX_IMAGE_BYTES) + 4096 < MAX_ROW_BYTES
