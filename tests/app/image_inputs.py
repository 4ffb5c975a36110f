"""The inputs of a run whose instances carry images, as a user writes them: generated
images (``tests.imagegen``: charts, shapes and text as PNG, JPEG and WebP) in a folder,
an instances file naming them (paths relative to the file, some as ``data:`` URIs), two
models' responses and a judges file."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from tests.imagegen import FORMATS, MEDIA, Made, bar_chart, encode, gallery

#: the skills each instance is judged on (FLASK's)
SKILLS = ("Logical Correctness", "Readability")
MODELS = ("a", "b")
#: every instance of these also carries a second, larger chart
TWO_IMAGES = 10
#: the first image of every instance of these is given as a ``data:`` URI
DATA_URI = 5


@dataclass(frozen=True)
class ImageInputs:
    """Where the inputs are, and which images each instance names (by id, in order)."""

    instances: Path
    responses: dict[str, Path]
    images: dict[str, tuple[Made, ...]]

    def args(self) -> list[str]:
        """`run`'s input flags."""
        flags = ["--instances", str(self.instances)]
        for model, path in self.responses.items():
            flags += ["--responses", f"{model}={path}"]
        return flags

    def digests(self) -> dict[str, tuple[str, ...]]:
        """instance id -> the SHA-256 of each of its images, in order."""
        return {i: tuple(sha256(m.data) for m in made) for i, made in self.images.items()}

    def files(self) -> dict[str, Made]:
        """Every image, by its SHA-256."""
        return {sha256(m.data): m for made in self.images.values() for m in made}

    def sizes(self, instance: str) -> list[tuple[int, int]]:
        """(width, height) of each image of ``instance``, as Pillow reads them."""
        return [pixels(m.data) for m in self.images[instance]]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def pixels(data: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(data)) as image:
        return image.size


def _large(k: int) -> Made:
    """A chart of 5 bars, 798 x 560 px or so: several tiles or patches on every provider."""
    values = [(k + n) % 9 + 1 for n in range(5)]
    fmt = FORMATS[(k // TWO_IMAGES + 1) % 3]
    data = encode(bar_chart(values, scale=60, width=150), fmt)
    return Made(f"large{k:02d}.{fmt.lower()}", data, MEDIA[fmt], f"bars {values}")


def write_image_inputs(folder: Path, count: int = 40) -> ImageInputs:
    """``count`` instances in ``folder`` (ids ``0``..``count-1``): instance k shows image k
    of :func:`tests.imagegen.gallery` (one of each kind and format in turn), every
    :data:`TWO_IMAGES`-th a large chart too, every :data:`DATA_URI`-th its first image
    as a ``data:`` URI; each image is also written to ``folder/images``."""
    pictures = folder / "images"
    pictures.mkdir(parents=True, exist_ok=True)
    shown: dict[str, tuple[Made, ...]] = {}
    records = []
    for k, made in enumerate(gallery(count)):
        own = (made, _large(k)) if k % TWO_IMAGES == 0 else (made,)
        refs = []
        for n, image in enumerate(own):
            (pictures / image.name).write_bytes(image.data)
            if n == 0 and k % DATA_URI == 0:
                text = base64.b64encode(image.data).decode("ascii")
                refs.append(f"data:{image.media_type};base64,{text}")
            else:
                refs.append(f"images/{image.name}")
        shown[str(k)] = own
        records.append(
            {
                "idx": k,
                "instruction": f"What does image {k} show? Answer in one line.",
                "answer": made.truth,
                "skill": list(SKILLS),
                "domain": ["Math"],
                "difficulty": "simple lifestyle knowledge",
                "images": refs,
            }
        )
    digests = [sha256(m.data) for made in shown.values() for m in made]
    assert len(set(digests)) == len(digests), "two generated images are the same bytes"
    instances = folder / "instances.jsonl"
    instances.write_text("".join(json.dumps(r) + "\n" for r in records))
    responses = {}
    for model in MODELS:
        path = folder / f"{model}.jsonl"
        lines = [
            {"question_id": k, "text": f"Model {model} reads it as: {made[0].truth}."}
            for k, made in enumerate(shown.values())
        ]
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
        responses[model] = path
    return ImageInputs(instances, responses, shown)


def write_judges(path: Path, entries: list[dict[str, object]]) -> Path:
    """A judges file of ``entries`` (each a flat mapping of scalars)."""
    lines = []
    for entry in entries:
        for n, (key, value) in enumerate(entry.items()):
            shown = json.dumps(value) if not isinstance(value, str) else value
            lines.append(f"{'- ' if n == 0 else '  '}{key}: {shown}")
    path.write_text("\n".join(lines) + "\n")
    return path
