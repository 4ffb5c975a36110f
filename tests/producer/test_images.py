"""Reading and checking an instance's images (producer/images.py, image_fetch.py,
image_plan.py), the Perception-Bench loader, and the images reaching the ledger once."""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from PIL import Image as PILImage

from flask_eval.core.errors import InputError
from flask_eval.core.images import ReadRef, attached
from flask_eval.core.types import Instance, JudgeConfig, Response, ResponseSet
from flask_eval.producer.image_plan import check_provider_limits
from flask_eval.producer.images import (
    ImageOptions,
    ImageProblem,
    identify,
    read_image,
    reading_images,
)
from flask_eval.producer.loaders import load_instances
from flask_eval.producer.perception_bench import load_perception_bench
from flask_eval.storage.images import run_images
from flask_eval.storage.store import Store
from tests.bad_input_cases import FLASK_SKILLS
from tests.imagegen import MEDIA, bar_chart, encode, gallery, png_header, shapes, text_image


def _uri(data: bytes, media: str = "image/png") -> str:
    return f"data:{media};base64,{base64.b64encode(data).decode()}"


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "WEBP", "GIF"])
def test_each_format_is_known_by_its_bytes_and_kept_whole(fmt: str, tmp_path: Path) -> None:
    data = encode(shapes({"circle": 3, "square": 1}), fmt)
    path = tmp_path / "wrong-extension.txt"  # the name says nothing
    path.write_bytes(data)
    ref = read_image(path.name, tmp_path)
    assert ref.media_type == MEDIA[fmt]
    assert (ref.width, ref.height, ref.size) == (160, 160, len(data))
    assert ref.sha256 == hashlib.sha256(data).hexdigest()
    assert ref.data == data  # nothing stripped
    assert read_image(str(path), Path("/nonexistent")) == ref  # absolute path
    assert read_image(_uri(data, MEDIA[fmt]), tmp_path) == ref


def test_gallery_is_varied_and_readable() -> None:
    made = gallery(9)
    assert {m.media_type for m in made} == {"image/png", "image/jpeg", "image/webp"}
    assert len({m.data for m in made}) == 9
    assert any(m.truth.startswith("bars") for m in made)
    assert any("circles" in m.truth for m in made) and any("CODE-" in m.truth for m in made)
    for m in made:
        assert identify(m.data)[0] == m.media_type


def test_bar_chart_heights_are_its_values() -> None:
    img = bar_chart([3, 7], scale=10)
    column = [img.getpixel((10, y)) for y in range(img.size[1])]
    assert sum(1 for p in column if p != (255, 255, 255)) == 30
    assert text_image("HELLO").size == (200, 40)


def test_a_decompression_bomb_is_refused_from_its_header_alone(tmp_path: Path) -> None:
    bomb = png_header(50_000, 50_000)
    assert len(bomb) < 100  # 2.5 billion pixels declared, none present
    (tmp_path / "bomb.png").write_bytes(bomb)
    with pytest.raises(ImageProblem, match="declares more pixels than the 64,000,000 allowed"):
        read_image("bomb.png", tmp_path)
    with pytest.raises(
        ImageProblem, match="declares 3,000 x 3,000 pixels, more than the 1,000,000"
    ):
        identify(png_header(3000, 3000), max_pixels=1_000_000)


def test_animated_truncated_and_oversized_images_are_refused(tmp_path: Path) -> None:
    frames = [PILImage.new("RGB", (8, 8), c) for c in ("red", "blue")]
    buffer = io.BytesIO()
    frames[0].save(buffer, "GIF", save_all=True, append_images=frames[1:])
    with pytest.raises(ImageProblem, match="an animated GIF is not accepted"):
        identify(buffer.getvalue())
    data = encode(bar_chart([5, 9, 2]), "PNG")
    with pytest.raises(ImageProblem, match="does not decode"):
        identify(data[: len(data) - 30])
    with pytest.raises(ImageProblem, match="more than the 100 allowed"):
        read_image(_uri(data), tmp_path, ImageOptions(max_bytes=100))
    with pytest.raises(ImageProblem, match="scheme file: is not read"):
        read_image("file:///etc/passwd", tmp_path)


def _record(idx: int, images: object) -> dict[str, object]:
    return {
        "idx": idx,
        "instruction": "Read the chart.",
        "answer": "x",
        "skill": ["Comprehension"],
        "domain": ["Humanities"],
        "difficulty": 1,
        "images": images,
    }


def test_instances_carry_their_images_and_each_is_stored_once(tmp_path: Path) -> None:
    chart = encode(bar_chart([2, 4, 6]), "PNG")
    (tmp_path / "chart.png").write_bytes(chart)
    other = encode(text_image("CODE-1234"), "JPEG")
    lines = [_record(1, ["chart.png"]), _record(2, ["chart.png", _uri(other, "image/jpeg")])]
    path = tmp_path / "i.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    instances = load_instances(str(path), FLASK_SKILLS)
    assert [len(i.images) for i in instances] == [1, 2]
    assert instances[0].images[0] == instances[1].images[0]
    images = attached(r for i in instances for r in i.images)
    assert [i.data for i in images] == [chart, other]
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    try:
        run, _ = store.create_run(
            name="r",
            fingerprint="f" * 64,
            mode="instance",
            config={"judges": [], "skills": [], "mode": "instance"},
            instances=instances,
            response_sets=[ResponseSet("m", "m.jsonl", (Response("m", "1", "a"),))],
            judges=["memory/j"],
        )
        held = run_images(store, run.id, [r.sha256 for i in instances for r in i.images])
        assert {k: v.data for k, v in held.items()} == {i.ref.sha256: i.data for i in images}
        assert store.instances(run.id)["2"].images == instances[1].images
    finally:
        store.close()


def test_too_many_images_per_instance(tmp_path: Path) -> None:
    path = tmp_path / "i.jsonl"
    data = _uri(encode(bar_chart([1]), "PNG"))
    path.write_text(json.dumps(_record(1, [data] * 3)) + "\n")
    with reading_images(ImageOptions(max_images=2)), pytest.raises(InputError) as info:
        load_instances(str(path), FLASK_SKILLS)
    assert str(info.value).endswith(
        ":1: field 'images' lists 3 images, more than the 2 an instance may carry"
    )


def test_provider_limits_name_file_line_judge_and_limit() -> None:
    big = ReadRef("a" * 64, "image/png", 100, 100, 4 * (1 << 20), b"")
    instance = Instance("7", "q", "", ("rubric",), line=3, images=(big,))
    check_provider_limits([instance], [JudgeConfig("gpt", "openai/gpt-5.4")], "i.jsonl")
    with pytest.raises(InputError) as info:
        check_provider_limits(
            [instance], [JudgeConfig("claude", "anthropic/claude-sonnet-4-5")], "i.jsonl"
        )
    text = str(info.value)
    assert text.startswith("i.jsonl:3: instance 7: judge claude: image 1 ")
    assert "5,592,408 base64 bytes sent, over anthropic's limit of 5,242,880 per image" in text
    many = tuple(ReadRef(str(n) * 64, "image/png", 2100, 10, 100, b"") for n in range(3)) * 7
    with pytest.raises(InputError, match="over anthropic's limit of 2000x2000 pixels"):
        check_provider_limits(
            [Instance("8", "q", "", ("r",), images=many)],
            [JudgeConfig("c", "anthropic/claude-sonnet-4-5")],
            "i.jsonl",
        )


# --------------------------------------------------------------------------- URLs


class _Handler(http.server.BaseHTTPRequestHandler):
    routes: ClassVar[dict[str, tuple[int, dict[str, str], bytes]]] = {}

    def do_GET(self) -> None:
        status, headers, body = self.routes.get(self.path, (404, {}, b""))
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_urls_are_fetched_only_when_allowed_from_listed_hosts(server: str, tmp_path: Path) -> None:
    png = encode(bar_chart([1, 2, 3]), "PNG")
    port = server.rsplit(":", 1)[1]
    _Handler.routes = {
        "/c.png": (200, {"Content-Type": "image/png"}, png),
        "/lies.png": (200, {"Content-Type": "image/jpeg"}, png),
        "/svg": (200, {"Content-Type": "image/svg+xml"}, b"<svg/>"),
        "/html": (200, {"Content-Type": "text/html"}, b"<html></html>"),
        "/big": (200, {"Content-Type": "image/png"}, png * 10),
        "/moved": (302, {"Location": "/c.png"}, b""),
        "/away": (302, {"Location": f"http://localhost:{port}/c.png"}, b""),
    }
    on = ImageOptions(fetch=True, hosts=("127.0.0.1",))
    with pytest.raises(ImageProblem, match="given while fetching is off; --fetch-images"):
        read_image(f"{server}/c.png", tmp_path)
    ref = read_image(f"{server}/c.png", tmp_path, on)
    assert ref.data == png and ref.media_type == "image/png"
    assert read_image(f"{server}/moved", tmp_path, on) == ref
    for route, message in (
        ("/lies.png", "claims to be 'image/jpeg' but its bytes are image/png"),
        ("/svg", "an SVG image is not accepted"),
        ("/html", "the server says the body is 'text/html', not an image"),
        ("/away", "redirects to another host or scheme"),
        ("/nothing", "HTTP 404"),
    ):
        with pytest.raises(ImageProblem, match=message):
            read_image(f"{server}{route}", tmp_path, on)
    with pytest.raises(ImageProblem, match="more than the 1,000 allowed"):
        read_image(f"{server}/big", tmp_path, ImageOptions(True, ("127.0.0.1",), max_bytes=1000))
    with pytest.raises(ImageProblem, match="host 'localhost' is not in --image-hosts"):
        read_image(f"http://localhost:{port}/c.png", tmp_path, on)
    local = ImageOptions(fetch=True, hosts=("localhost",))
    with pytest.raises(ImageProblem, match=r"'localhost' resolves to .*, a non-public address"):
        read_image(f"http://localhost:{port}/c.png", tmp_path, local)
    with pytest.raises(ImageProblem, match="only http and https"):
        from flask_eval.producer.image_fetch import fetch_image

        fetch_image("ftp://127.0.0.1/c.png", on)


# --------------------------------------------------------------------------- Perception-Bench


def _perception(image: object, **extra: object) -> dict[str, object]:
    return {
        "image": image,
        "instruction": "###Task Description: ... (Prometheus-Vision's filled prompt)",
        "orig_instruction": "How many circles are there?",
        "orig_reference_answer": "There are 3 circles.",
        "orig_criteria": "Does the answer count the circles correctly?",
        **{f"orig_score{n}_description": f"level {n}" for n in range(1, 6)},
        **extra,
    }


def test_perception_bench_records_carry_image_reference_and_rubric(tmp_path: Path) -> None:
    png = encode(shapes({"circle": 3}), "PNG")
    (tmp_path / "a.png").write_bytes(png)
    jpeg = encode(shapes({"circle": 2}), "JPEG")
    records = [
        _perception("a.png"),
        _perception({"bytes": base64.b64encode(jpeg).decode()}, id="x"),
    ]
    path = tmp_path / "pb.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    first, second = load_perception_bench(str(path))
    assert (first.id, second.id) == ("0", "x")
    assert first.instruction == "How many circles are there?"
    assert first.answer == "There are 3 circles."
    assert first.rubrics["rubric"].criteria.startswith("Does the answer count")
    assert first.rubrics["rubric"].scores[5] == "level 5"
    assert first.images[0].media_type == "image/png" and second.images[0].media_type == "image/jpeg"
    path.write_text(json.dumps(_perception("missing.png")) + "\n")
    with pytest.raises(
        InputError, match=r"pb\.jsonl:1: field 'image': image 'missing.png': file not found"
    ):
        load_perception_bench(str(path))
