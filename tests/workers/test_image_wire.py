"""Each provider's request body with images (live and batch), held to its SDK's types:
the bytes round-trip exactly, a body without images is unchanged, what a provider cannot
take is refused as ``config``, and an image's bytes key the cached answer."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import typing
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from flask_eval.core.errors import FailureReason, JudgeError
from flask_eval.core.images import Image, ImageRef
from flask_eval.rubrics.grading import Subject, protocol
from flask_eval.rubrics.images import with_images
from flask_eval.rubrics.messages import Message, text_of
from flask_eval.rubrics.skills import load_default
from flask_eval.workers.batching import BatchRequest
from flask_eval.workers.context import cache_key
from flask_eval.workers.judge import GenerateConfig, Judge, create_judge
from flask_eval.workers.providers.anthropic_judge import EPHEMERAL
from flask_eval.workers.usage import IMAGE_TOKENS_FLOOR, Request

from .test_judges import no_gemini_env  # noqa: F401  (a fixture: Gemini's variables unset)

SKILLS = load_default()
CRITERIA = [SKILLS.get(n) for n in SKILLS.names[:2]]
SUBJECT = Subject("What does the chart show?", "Sales rose 40%.", "Sales went up.")
CONFIG = GenerateConfig(max_tokens=300)


def image(data: bytes, media_type: str = "image/png", size: tuple[int, int] = (8, 6)) -> Image:
    ref = ImageRef(hashlib.sha256(data).hexdigest(), media_type, *size, len(data))
    return Image(ref, data)


#: every byte value, so that any base64 slip shows
PNG = image(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 3)
WEBP = image(b"RIFF\x00\x00\x00\x00WEBPVP8 " + bytes(range(255, -1, -1)), "image/webp")
GIF = image(b"GIF89a" + bytes(range(64)), "image/gif")


def rendered(*images: Image) -> list[Message]:
    return with_images(protocol("flask-eval").render(SUBJECT, CRITERIA), images)


def judge(spec: str) -> Judge:
    return create_judge(spec)


def close(j: Judge) -> None:
    asyncio.run(j.aclose())


def keys_of(typed: Any) -> tuple[set[str], set[str]]:
    """(every key, the required keys) of an SDK TypedDict."""
    return set(typing.get_type_hints(typed)), set(typed.__required_keys__)


def follows(part: dict[str, Any], typed: Any) -> None:
    every, required = keys_of(typed)
    assert required <= set(part) <= every, (set(part), every, required)


# --- OpenAI (and OpenAI-compatible servers) ------------------------------------------


@pytest.mark.parametrize(
    ("spec", "detail"),
    [("openai/gpt-4o@http://127.0.0.1:9/v1", "high"), ("vllm/llava@http://127.0.0.1:9/v1", None)],
)
def test_openai_sends_text_and_image_url_parts(spec: str, detail: str | None) -> None:
    from openai.types.chat import (
        ChatCompletionContentPartImageParam,
        ChatCompletionContentPartTextParam,
    )
    from openai.types.chat.chat_completion_content_part_image_param import ImageURL

    j = judge(spec)
    try:
        messages = rendered(PNG, WEBP)
        body = j.request_body(messages, CONFIG)
        plain = j.request_body(rendered(), CONFIG)
    finally:
        close(j)
    system, user = body["messages"]
    assert system == plain["messages"][0]  # a message without images: a string, as before
    assert isinstance(user["content"], list)
    kinds = [p["type"] for p in user["content"]]
    assert kinds == ["text", "image_url", "image_url", "text"]
    for part in user["content"]:
        if part["type"] == "text":
            follows(part, ChatCompletionContentPartTextParam)
        else:
            follows(part, ChatCompletionContentPartImageParam)
            follows(part["image_url"], ImageURL)
            assert part["image_url"].get("detail") == detail
    # the text is the rendering's, image parts between the shared prefix and the rest
    assert "".join(p["text"] for p in user["content"] if p["type"] == "text") == text_of(
        messages[1]
    )
    assert (
        user["content"][0]["text"]
        == plain["messages"][1]["content"][: len(user["content"][0]["text"])]
    )
    sent = [p["image_url"]["url"] for p in user["content"] if p["type"] == "image_url"]
    for url, original in zip(sent, (PNG, WEBP), strict=True):
        head, _, data = url.partition(",")
        assert head == f"data:{original.ref.media_type};base64"
        assert base64.b64decode(data, validate=True) == original.data
    assert {k: v for k, v in body.items() if k != "messages"} == {
        k: v for k, v in plain.items() if k != "messages"
    }
    json.dumps(body)  # the batch line and the live body are JSON


def test_openai_without_images_sends_the_plain_text() -> None:
    j = judge("openai/gpt-4o@http://127.0.0.1:9/v1")
    try:
        body = j.request_body(rendered(), CONFIG)
    finally:
        close(j)
    assert body["messages"] == [{"role": m["role"], "content": text_of(m)} for m in rendered()]


def test_the_openai_batch_line_carries_the_same_parts() -> None:
    from flask_eval.workers.providers.openai_batch import ENDPOINT, OpenAIBatch

    j = judge("openai/gpt-4o@http://127.0.0.1:9/v1")
    sent: dict[str, bytes] = {}

    async def upload(file: tuple[str, bytes], purpose: str) -> Any:
        sent["data"] = file[1]
        return SimpleNamespace(id="file-1")

    async def create(**kwargs: Any) -> Any:
        return SimpleNamespace(
            id="batch-1",
            status="validating",
            request_counts=None,
            expires_at=None,
            input_file_id="file-1",
            output_file_id=None,
            error_file_id=None,
        )

    api = OpenAIBatch(j)
    api.client = SimpleNamespace(  # type: ignore[assignment]
        files=SimpleNamespace(create=upload), batches=SimpleNamespace(create=create)
    )
    messages = rendered(PNG)
    try:
        asyncio.run(api.submit_batch("tag", [BatchRequest("c1", messages, CONFIG)]))
        live = j.request_body(messages, CONFIG)
    finally:
        close(j)
    (line,) = [json.loads(x) for x in sent["data"].splitlines()]
    assert line == {"custom_id": "c1", "method": "POST", "url": ENDPOINT, "body": live}


# --- Anthropic -------------------------------------------------------------------------


def test_anthropic_sends_image_blocks_and_keeps_its_cache_breakpoints() -> None:
    from anthropic.types import Base64ImageSourceParam, ImageBlockParam, TextBlockParam

    j = judge("anthropic/claude-sonnet-4-5@http://127.0.0.1:9")
    try:
        body = j.request_body(rendered(PNG, GIF), CONFIG)
        plain = j.request_body(rendered(), CONFIG)
    finally:
        close(j)
    assert body["system"] == plain["system"]
    (user,) = body["messages"]
    (before,) = plain["messages"]
    blocks = user["content"]
    assert [b["type"] for b in blocks] == ["text", "image", "image", "text", "text"]
    # the shared prefix's block, cache_control and all, is the one sent without images
    assert blocks[0] == before["content"][0] and blocks[0]["cache_control"] == EPHEMERAL
    assert blocks[3:] == before["content"][1:]  # the instance's breakpoint, then the rest
    for block, original in zip(blocks[1:3], (PNG, GIF), strict=True):
        follows(block, ImageBlockParam)
        follows(block["source"], Base64ImageSourceParam)
        assert block["source"]["type"] == "base64"
        assert block["source"]["media_type"] == original.ref.media_type
        assert base64.b64decode(block["source"]["data"], validate=True) == original.data
    for block in blocks[::3]:
        follows(block, TextBlockParam)


def test_anthropic_media_types_are_the_sdk_s() -> None:
    from anthropic.types import Base64ImageSourceParam

    from flask_eval.workers.providers.anthropic_judge import AnthropicJudge

    hint = typing.get_type_hints(Base64ImageSourceParam)["media_type"]  # Required stripped
    assert typing.get_origin(hint) is typing.Literal
    assert set(AnthropicJudge.image_types) == set(typing.get_args(hint))


def test_the_anthropic_batch_params_are_the_live_body() -> None:
    from flask_eval.workers.providers.anthropic_batch import AnthropicBatch

    j = judge("anthropic/claude-sonnet-4-5@http://127.0.0.1:9")
    sent: dict[str, Any] = {}

    async def create(requests: list[dict[str, Any]]) -> Any:
        sent["requests"] = requests
        counts = SimpleNamespace(errored=0, expired=0, canceled=0, succeeded=0, processing=1)
        return SimpleNamespace(
            id="b1", request_counts=counts, processing_status="in_progress", expires_at=None
        )

    api = AnthropicBatch(j)
    api._client = SimpleNamespace(  # type: ignore[assignment]
        messages=SimpleNamespace(batches=SimpleNamespace(create=create))
    )
    messages = rendered(WEBP)
    try:
        asyncio.run(api.submit_batch("tag", [BatchRequest("c1", messages, CONFIG)]))
        live = j.request_body(messages, CONFIG)
    finally:
        close(j)
    (request,) = sent["requests"]
    assert request["params"] == live
    assert any(b["type"] == "image" for b in live["messages"][0]["content"])


# --- Gemini ----------------------------------------------------------------------------


@pytest.mark.usefixtures("no_gemini_env")
def test_gemini_sends_inline_data_parts() -> None:
    from flask_eval.workers.providers.gemini_judge import request_of

    contents, _ = request_of(rendered(PNG, WEBP), CONFIG)
    plain, _ = request_of(rendered(), CONFIG)
    (user,) = contents
    parts = user.parts or []
    assert [p.inline_data is not None for p in parts] == [False, True, True, False]
    texts = [p.text for p in parts if p.text is not None]
    assert "".join(texts) == (plain[0].parts or [])[0].text
    for part, original in zip(parts[1:3], (PNG, WEBP), strict=True):
        assert part.inline_data is not None
        assert part.inline_data.data == original.data
        assert part.inline_data.mime_type == original.ref.media_type


@pytest.mark.usefixtures("no_gemini_env")
def test_the_gemini_batch_line_holds_the_bytes_as_the_sdk_writes_them() -> None:
    from flask_eval.workers.providers.gemini_batch import input_line

    j = judge("gemini/gemini-2.5-flash@http://127.0.0.1:9")
    try:
        api_client = j._client._api_client  # type: ignore[attr-defined]
        line = json.loads(input_line(api_client, BatchRequest("c1", rendered(PNG), CONFIG)))
        plain = json.loads(input_line(api_client, BatchRequest("c2", rendered(), CONFIG)))
    finally:
        close(j)
    parts = line["request"]["contents"][0]["parts"]
    (inline,) = [p["inlineData"] for p in parts if "inlineData" in p]
    assert base64.urlsafe_b64decode(inline["data"]) == PNG.data  # URL-safe, as the SDK sends
    assert inline.get("mimeType", inline.get("mime_type")) == "image/png"
    assert (
        "".join(p.get("text", "") for p in parts)
        == plain["request"]["contents"][0]["parts"][0]["text"]
    )
    assert {k: v for k, v in line["request"].items() if k != "contents"} == {
        k: v for k, v in plain["request"].items() if k != "contents"
    }


# --- refusals --------------------------------------------------------------------------


def refused(run: Any) -> JudgeError:
    with pytest.raises(JudgeError) as caught:
        run()
    assert caught.value.reason == FailureReason.CONFIG
    return caught.value


def test_the_memory_judge_refuses_a_prompt_with_an_image() -> None:
    from flask_eval.workers.providers.memory_judge import MemoryJudge

    j = judge("memory/m")
    before = MemoryJudge.calls
    error = refused(lambda: asyncio.run(j.generate(rendered(PNG), CONFIG)))
    assert "takes no images" in error.detail and MemoryJudge.calls == before
    assert asyncio.run(j.generate(rendered(), CONFIG)).text  # text alone is answered


@pytest.mark.usefixtures("no_gemini_env")
def test_gemini_refuses_gif_before_anything_is_sent() -> None:
    from flask_eval.workers.providers.gemini_batch import GeminiBatch

    j = judge("gemini/gemini-2.5-flash@http://127.0.0.1:9")
    try:
        error = refused(lambda: asyncio.run(j.generate(rendered(GIF), CONFIG)))
        assert "image/gif" in error.detail
        api = GeminiBatch(j)

        async def upload(**kwargs: Any) -> Any:
            raise AssertionError("nothing is uploaded")

        api._client = SimpleNamespace(files=SimpleNamespace(upload=upload))  # type: ignore[assignment]
        refused(
            lambda: asyncio.run(api.submit_batch("t", [BatchRequest("c1", rendered(GIF), CONFIG)]))
        )
    finally:
        close(j)


@pytest.mark.parametrize(
    "spec",
    ["openai/gpt-4o@http://127.0.0.1:9/v1", "anthropic/claude-sonnet-4-5@http://127.0.0.1:9"],
)
def test_an_image_outside_a_user_message_is_refused(spec: str) -> None:
    from flask_eval.rubrics.messages import image_part

    messages: list[Message] = [
        {"role": "system", "content": (image_part(PNG),)},
        {"role": "user", "content": "Judge."},
    ]
    j = judge(spec)
    try:
        error = refused(lambda: j.request_body(messages, CONFIG))  # type: ignore[attr-defined]
    finally:
        close(j)
    assert "system message" in error.detail


# --- the cache key and request sizes ---------------------------------------------------


def test_the_cache_key_follows_the_image_bytes() -> None:
    same = image(PNG.data)
    other = image(PNG.data[:-1] + b"\x00")

    def key(messages: Sequence[Message]) -> str:
        return cache_key("j", messages, CONFIG)

    assert key(rendered(PNG)) == key(rendered(same))
    assert key(rendered(PNG)) != key(rendered(other))
    assert key(rendered(PNG)) != key(rendered())
    assert key(rendered(PNG, WEBP)) != key(rendered(WEBP, PNG))  # order is the prompt's


def test_a_request_s_images_count_in_its_usage_bound_and_batch_tokens() -> None:
    from flask_eval.workers.batch_parked import image_tokens

    big = image(b"x" * 100, size=(2000, 1000))
    plain = Request(rendered(), 300).prompt_limit()
    with_one = Request(rendered(big), 300).prompt_limit()
    assert with_one - plain == IMAGE_TOKENS_FLOOR + 2000 * 1000 // 400
    assert image_tokens(big.ref) == -(-1568 * 784 // 750)  # scaled to 1568 px, then /750
    assert image_tokens(image(b"y", size=(1, 1)).ref) == 1
