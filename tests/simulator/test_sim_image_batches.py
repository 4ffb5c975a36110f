"""Images in each provider's batch API on the judge simulator, through the real SDKs:
batched requests are decoded, checked, recorded and billed as live ones are."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import anthropic
import openai
import pytest
from google.genai import types

from flask_eval.core.image_tokens import image_tokens
from flask_eval.simulator.answer import estimate_tokens
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import SimHandle, running_simulator
from tests.simulator.test_sim_images import PROMPT, b64, bad_images, gem, picture

pytestmark = pytest.mark.filterwarnings(
    "ignore:Inheritance class AiohttpClientSession:DeprecationWarning"
)

SIZES = [(320, 200), (800, 600), (1600, 900)]


def pictures() -> list[bytes]:
    return [picture(w, h, colour=60 * k) for k, (w, h) in enumerate(SIZES)]


def batched(sim: SimHandle) -> dict[str, str]:
    """sha256 -> media type of every image the simulator saw in a batch."""
    records = sim.stats()["seen_images"]
    return {i["sha256"]: i["media_type"] for r in records if r["batch"] for i in r["images"]}


def test_an_openai_batch_of_image_requests() -> None:
    images = pictures()
    lines = [
        json.dumps(
            {
                "custom_id": f"r{k}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {
                    "model": "gpt-4o",
                    "max_tokens": 1024,
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {"type": "text", "text": PROMPT},
                                {
                                    "type": "image_url",
                                    "image_url": {"url": f"data:image/png;base64,{b64(data)}"},
                                },
                            ],
                        }
                    ],
                },
            }
        )
        for k, data in enumerate(images)
    ]
    with running_simulator(SimConfig(seed=3)) as sim:
        client = openai.OpenAI(api_key="k", base_url=sim.openai_base_url, max_retries=0)
        uploaded = client.files.create(
            file=("in.jsonl", "\n".join(lines).encode()), purpose="batch"
        )
        batch = client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        done = client.batches.retrieve(batch.id)
        assert done.status == "completed" and done.output_file_id
        out = [json.loads(x) for x in client.files.content(done.output_file_id).text.splitlines()]
        seen = batched(sim)
    by_id = {line["custom_id"]: line["response"]["body"] for line in out}
    for k, (data, (w, h)) in enumerate(zip(images, SIZES, strict=True)):
        digest = hashlib.sha256(data).hexdigest()
        assert seen[digest] == "image/png"
        body = by_id[f"r{k}"]
        assert body["choices"][0]["message"]["content"].startswith(
            f"Image 1: image/png {w}x{h} sha256 {digest[:8]}"
        )
        tokens = image_tokens("openai", "gpt-4o", w, h)
        assert body["usage"]["prompt_tokens"] == estimate_tokens(PROMPT) + tokens


def anthropic_params(data: bytes, media_type: str = "image/png") -> dict[str, Any]:
    source = {"type": "base64", "media_type": media_type, "data": b64(data)}
    return {
        "model": "claude-haiku-4-5",
        "max_tokens": 1024,
        "messages": [
            {
                "role": "user",
                "content": [{"type": "image", "source": source}, {"type": "text", "text": PROMPT}],
            }
        ],
    }


def test_an_anthropic_message_batch_of_image_requests() -> None:
    images = pictures()
    requests: Any = [
        {"custom_id": f"r{k}", "params": anthropic_params(data)} for k, data in enumerate(images)
    ]
    with running_simulator(SimConfig(seed=3)) as sim:
        client = anthropic.Anthropic(api_key="k", base_url=sim.anthropic_base_url, max_retries=0)
        batch = client.messages.batches.create(requests=requests)
        results = {r.custom_id: r.result for r in client.messages.batches.results(batch.id)}
        seen = batched(sim)
        data, declared = bad_images()[0]
        bad: Any = [{"custom_id": "x", "params": anthropic_params(data, declared)}]
        with pytest.raises(anthropic.BadRequestError, match="image"):
            client.messages.batches.create(requests=bad)
    for k, (data, (w, h)) in enumerate(zip(images, SIZES, strict=True)):
        digest = hashlib.sha256(data).hexdigest()
        assert seen[digest] == "image/png"
        result = results[f"r{k}"]
        assert result.type == "succeeded"
        block = result.message.content[0]
        assert block.type == "text"
        assert block.text.startswith(f"Image 1: image/png {w}x{h} sha256 {digest[:8]}")
        tokens = image_tokens("anthropic", "claude-haiku-4-5", w, h)
        assert result.message.usage.input_tokens == estimate_tokens(PROMPT) + tokens


def test_a_gemini_batch_of_image_requests() -> None:
    images = pictures()
    src: Any = [
        {
            "contents": [
                types.Content(
                    role="user",
                    parts=[
                        types.Part.from_bytes(data=data, mime_type="image/png"),
                        types.Part(text=PROMPT + " " + "word " * 8 * k),
                    ],
                )
            ]
        }
        for k, data in enumerate(images)
    ]
    with running_simulator(SimConfig(seed=3)) as sim:
        client = gem(sim)
        job = client.batches.create(model="gemini-2.5-flash", src=src, config={"display_name": "i"})
        got = client.batches.get(name=str(job.name))
        seen = batched(sim)
    assert got.dest is not None and got.dest.inlined_responses is not None
    texts = [r.response.text or "" for r in got.dest.inlined_responses if r.response]
    usage = sorted(
        r.response.usage_metadata.prompt_token_count or 0
        for r in got.dest.inlined_responses
        if r.response and r.response.usage_metadata
    )
    expected = sorted(
        estimate_tokens(PROMPT + " " + "word " * 8 * k) + image_tokens("gemini", "m", w, h)
        for k, (w, h) in enumerate(SIZES)
    )
    assert usage == expected
    for data, (w, h) in zip(images, SIZES, strict=True):
        digest = hashlib.sha256(data).hexdigest()
        assert seen[digest] == "image/png"
        label = f"Image 1: image/png {w}x{h} sha256 {digest[:8]}"
        assert sum(t.startswith(label) for t in texts) == 1
