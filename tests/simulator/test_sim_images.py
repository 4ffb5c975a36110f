"""Images through the judge simulator, sent by the real SDKs in each provider's format:
the simulator decodes and checks them, records each image's digest (``GET /stats``),
bills its tokens by its provider's rule, answers with scores that depend on the image
and names it; a bad image gets its provider's 400."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import struct
import zlib
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types
from PIL import Image

from flask_eval.core.image_tokens import image_tokens
from flask_eval.rubrics.protocol import skills_line
from flask_eval.simulator.answer import estimate_tokens
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import SimHandle, running_simulator

pytestmark = pytest.mark.filterwarnings(
    "ignore:Inheritance class AiohttpClientSession:DeprecationWarning"
)

SKILLS = ["Readability", "Factuality"]
PROMPT = (
    "Score the response below on each skill from 1 to 5, looking at the image.\n"
    "Instruction: how many squares does the image show?\n"
    "<<<RESPONSE\nIt shows three squares.\nRESPONSE>>>\n"
    f"{skills_line(SKILLS)}"
)


def picture(width: int, height: int, fmt: str = "PNG", colour: int = 40) -> bytes:
    """An image of ``width`` x ``height``: a background and three squares."""
    img = Image.new("RGB", (width, height), (colour, 100, 200))
    for k in range(3):
        img.paste((250, 30 * k, 10), (10 + 40 * k, 10, 40 + 40 * k, 40))
    out = io.BytesIO()
    img.save(out, fmt, **({"lossless": True} if fmt == "WEBP" else {}))
    return out.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.fixture(scope="module")
def sim() -> Iterator[SimHandle]:
    with running_simulator(SimConfig(seed=11)) as handle:
        yield handle


def oai(sim: SimHandle) -> openai.OpenAI:
    return openai.OpenAI(base_url=sim.openai_base_url, api_key="sk-test", max_retries=0)


def ant(sim: SimHandle) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=sim.anthropic_base_url, api_key="sk-test", max_retries=0)


def gem(sim: SimHandle) -> genai.Client:
    options = types.HttpOptions(
        base_url=sim.gemini_base_url,
        api_version="v1beta",
        retry_options=types.HttpRetryOptions(attempts=1),
    )
    return genai.Client(api_key="k", vertexai=False, http_options=options)


def openai_ask(
    sim: SimHandle, data: bytes, media_type: str = "image/png", model: str = "gpt-4o"
) -> Any:
    content: Any = [
        {"type": "text", "text": PROMPT},
        {"type": "image_url", "image_url": {"url": f"data:{media_type};base64,{b64(data)}"}},
    ]
    with oai(sim) as client:
        return client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": content}], max_tokens=1024
        )


def anthropic_ask(sim: SimHandle, data: bytes, media_type: str = "image/png") -> Any:
    source: Any = {"type": "base64", "media_type": media_type, "data": b64(data)}
    content: Any = [{"type": "image", "source": source}, {"type": "text", "text": PROMPT}]
    with ant(sim) as client:
        return client.messages.create(
            model="claude-haiku-4-5",
            max_tokens=1024,
            messages=[{"role": "user", "content": content}],
        )


def gemini_ask(sim: SimHandle, data: bytes, media_type: str = "image/png") -> Any:
    parts = [types.Part.from_bytes(data=data, mime_type=media_type), types.Part(text=PROMPT)]
    client = gem(sim)  # held: a client collected mid-call closes its transport
    return client.models.generate_content(
        model="gemini-2.5-flash", contents=[types.Content(role="user", parts=parts)]
    )


def seen(sim: SimHandle, dialect: str) -> list[dict[str, Any]]:
    """Every image the simulator recorded for ``dialect``'s requests."""
    records = sim.stats()["seen_images"]
    return [img for r in records if r["dialect"] == dialect for img in r["images"]]


def scores(text: str) -> dict[str, Any]:
    last = text.rstrip().splitlines()[-1]
    assert last.startswith("[SCORES]"), text
    data: dict[str, Any] = json.loads(last.removeprefix("[SCORES]"))
    return data


def test_openai_sdk_image_arrives_byte_equal_and_is_billed_and_named(sim: SimHandle) -> None:
    data = picture(320, 200)
    r = openai_ask(sim, data)
    digest = hashlib.sha256(data).hexdigest()
    assert digest in [img["sha256"] for img in seen(sim, "openai")]
    text = r.choices[0].message.content or ""
    assert text.startswith(f"Image 1: image/png 320x200 sha256 {digest[:8]}")
    assert set(scores(text)) == set(SKILLS)
    expected = estimate_tokens(PROMPT) + image_tokens("openai", "gpt-4o", 320, 200)
    assert (
        r.usage is not None and r.usage.prompt_tokens == expected == estimate_tokens(PROMPT) + 255
    )


def test_anthropic_sdk_image_arrives_byte_equal_and_is_billed_and_named(sim: SimHandle) -> None:
    data = picture(1092, 1092, "JPEG")
    m = anthropic_ask(sim, data, "image/jpeg")
    digest = hashlib.sha256(data).hexdigest()
    got = [img for img in seen(sim, "anthropic") if img["sha256"] == digest]
    assert got and got[0]["media_type"] == "image/jpeg" and got[0]["tokens"] == 1590
    block = m.content[0]
    assert block.type == "text"
    assert block.text.startswith(f"Image 1: image/jpeg 1092x1092 sha256 {digest[:8]}")
    assert m.usage.input_tokens == estimate_tokens(PROMPT) + 1590


def test_gemini_sdk_image_arrives_byte_equal_and_is_billed_and_named(sim: SimHandle) -> None:
    data = picture(1600, 900, "WEBP")
    r = gemini_ask(sim, data, "image/webp")
    digest = hashlib.sha256(data).hexdigest()
    assert digest in [img["sha256"] for img in seen(sim, "gemini")]
    assert (r.text or "").startswith(f"Image 1: image/webp 1600x900 sha256 {digest[:8]}")
    usage = r.usage_metadata
    assert usage is not None and usage.prompt_token_count == estimate_tokens(PROMPT) + 258 * 6


def test_the_scores_depend_on_the_image_content_not_its_encoding(sim: SimHandle) -> None:
    """Same text, different pictures: the scores differ for some; the same picture as a
    PNG and as a lossless WebP (other bytes, same content) draws the same scores."""
    drawn = set()
    for colour in range(0, 250, 25):
        text = openai_ask(sim, picture(120, 90, colour=colour)).choices[0].message.content
        drawn.add(json.dumps(scores(text or ""), sort_keys=True))
    assert len(drawn) > 1
    png = openai_ask(sim, picture(120, 90, "PNG")).choices[0].message.content or ""
    webp = openai_ask(sim, picture(120, 90, "WEBP"), "image/webp").choices[0].message.content
    assert scores(png) == scores(webp or "")


def bad_images() -> list[tuple[bytes, str]]:
    return [
        (picture(50, 50, "JPEG"), "image/png"),  # the bytes are a JPEG
        (b"\x89PNG\r\n\x1a\n" + b"\0" * 40, "image/png"),  # a PNG's magic, no image
        (b"<svg xmlns='http://www.w3.org/2000/svg'/>", "image/png"),
    ]


@pytest.mark.parametrize("case", range(3))
def test_a_bad_image_gets_each_providers_400(sim: SimHandle, case: int) -> None:
    data, declared = bad_images()[case]
    with pytest.raises(openai.BadRequestError) as oerr:
        openai_ask(sim, data, declared)
    body: Any = oerr.value.body
    assert body["type"] == "invalid_request_error" and "image" in body["message"].lower()
    assert body["param"] == "messages[0].content[1].image_url"
    with pytest.raises(anthropic.BadRequestError) as aerr:
        anthropic_ask(sim, data, declared)
    error: Any = aerr.value.body
    assert error["error"]["type"] == "invalid_request_error"
    assert error["error"]["message"].startswith("messages.0.content.0.image.source.base64")
    with pytest.raises(genai_errors.ClientError) as gerr:
        gemini_ask(sim, data, declared)
    assert gerr.value.code == 400 and gerr.value.status == "INVALID_ARGUMENT"


def test_invalid_base64_and_image_urls_are_refused(sim: SimHandle) -> None:
    with oai(sim) as client:
        for url in ("data:image/png;base64,@@@not-base64", "https://example.com/cat.png"):
            content: Any = [{"type": "image_url", "image_url": {"url": url}}]
            with pytest.raises(openai.BadRequestError, match="image_url"):
                client.chat.completions.create(
                    model="gpt-4o", messages=[{"role": "user", "content": content}]
                )


def test_a_huge_declared_size_is_refused_before_decoding(sim: SimHandle) -> None:
    """A PNG whose header declares 50,000 x 50,000 pixels (a decompression bomb)."""
    with pytest.raises(anthropic.BadRequestError, match="8000x8000"):
        anthropic_ask(sim, png_header(50_000, 50_000))


def png_header(width: int, height: int) -> bytes:
    """A PNG declaring ``width`` x ``height`` whose pixels are a few compressed bytes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\0" * 1000)
    body = chunk(b"IHDR", ihdr) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body
