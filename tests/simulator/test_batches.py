"""The simulator's Anthropic and Gemini batch endpoints as the real SDKs page, refuse and
bill them (the adapters' round trips are in tests/workers/test_provider_batches.py)."""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.request
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types

from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import SimHandle, running_simulator


def params(text: str) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 200, "messages": [{"role": "user", "content": text}]}


def anthropic_client(sim: SimHandle) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="k", base_url=sim.anthropic_base_url, max_retries=0)


def gemini_client(sim: SimHandle) -> genai.Client:
    options = types.HttpOptions(
        base_url=sim.gemini_base_url,
        api_version="v1beta",
        retry_options=types.HttpRetryOptions(attempts=1),
    )
    return genai.Client(api_key="k", vertexai=False, http_options=options)


def test_anthropic_batches_list_newest_first_page_by_page() -> None:
    with running_simulator(SimConfig()) as sim:
        client = anthropic_client(sim)
        made = [
            client.messages.batches.create(
                requests=[{"custom_id": f"r{i}", "params": params(str(i))}]
            ).id
            for i in range(3)
        ]
        page = client.messages.batches.list(limit=1)
        assert [b.id for b in page.data] == [made[-1]] and page.has_more
        assert [b.id for b in client.messages.batches.list(limit=1)] == made[::-1]  # all pages


def test_gemini_batches_list_page_by_page() -> None:
    with running_simulator(SimConfig()) as sim:
        client = gemini_client(sim)
        src = [{"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}]
        for name in ("a", "b", "c"):
            client.batches.create(model="g", src=src, config={"display_name": name})  # type: ignore[arg-type]
        listed = [j.display_name for j in client.batches.list(config={"page_size": 1})]
        assert listed == ["c", "b", "a"]


def test_a_batch_with_a_bad_custom_id_or_params_is_refused_whole() -> None:
    with running_simulator(SimConfig()) as sim:
        client = anthropic_client(sim)
        for bad in (
            [{"custom_id": "has:colon", "params": params("x")}],
            [{"custom_id": "a", "params": params("x")}] * 2,
            [{"custom_id": "a", "params": {"model": "m"}}],
        ):
            with pytest.raises(anthropic.BadRequestError):
                client.messages.batches.create(requests=bad)  # type: ignore[arg-type]
        with urllib.request.urlopen(f"{sim.base_url}/batches/submitted", timeout=10) as resp:
            seen = json.loads(resp.read())["anthropic"]
        assert (seen["submitted"], seen["batches"]) == ({}, 0)  # nothing was accepted


def test_results_wait_for_the_end_and_answers_are_billed_when_it_comes() -> None:
    with running_simulator(SimConfig()) as sim:
        set_delay = urllib.request.Request(
            f"{sim.base_url}/batches/settings",
            method="POST",
            data=json.dumps({"delay_s": 3600}).encode(),
        )
        urllib.request.urlopen(set_delay, timeout=10).close()
        client = anthropic_client(sim)
        batch = client.messages.batches.create(requests=[{"custom_id": "r", "params": params("x")}])
        assert batch.request_counts.processing == 1 and batch.results_url is None
        with pytest.raises(anthropic.AnthropicError, match="results_url"):
            client.messages.batches.results(batch.id)
        assert sim.stats()["served"] == 0
        client.messages.batches.cancel(batch.id)
        after = client.messages.batches.retrieve(batch.id)
        assert after.processing_status == "ended" and after.request_counts.canceled == 1
        assert [r.result.type for r in client.messages.batches.results(batch.id)] == ["canceled"]
        assert sim.stats()["served"] == 0  # nothing answered, nothing billed
        set_delay.data = json.dumps({"delay_s": 0}).encode()
        urllib.request.urlopen(set_delay, timeout=10).close()
        done = client.messages.batches.create(requests=[{"custom_id": "r", "params": params("x")}])
        assert client.messages.batches.retrieve(done.id).request_counts.succeeded == 1
        assert sim.stats()["served"] == 1


def test_bad_batch_settings_are_refused() -> None:
    with running_simulator(SimConfig()) as sim:
        for bad in (
            {"delay": 1},
            {"error_rate": 2},
            {"delay_s": -1},
            {"delay_s": "1"},
            {"fail_batches": 1.5},
            {"delay_s": 5, "lose_responses": True},
        ):
            req = urllib.request.Request(
                f"{sim.base_url}/batches/settings", method="POST", data=json.dumps(bad).encode()
            )
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(req, timeout=10)
            assert refused.value.code == 400
        with urllib.request.urlopen(req.full_url.replace("settings", "submitted")) as resp:
            assert json.loads(resp.read())  # still answering
        check = urllib.request.Request(req.full_url, method="POST", data=b"{}")
        with urllib.request.urlopen(check, timeout=10) as resp:
            assert json.loads(resp.read())["delay_s"] == 0  # a refused update sets nothing


def openai_batch(client: openai.OpenAI, n: int) -> str:
    lines = [
        json.dumps(
            {
                "custom_id": f"r{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {
                    "model": "m",
                    "max_tokens": 200,
                    "messages": [{"role": "user", "content": f"q {i}"}],
                },
            }
        )
        for i in range(n)
    ]
    uploaded = client.files.create(file=("in.jsonl", "\n".join(lines).encode()), purpose="batch")
    return client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    ).id


def test_openai_batches_expire_half_answered_and_cancel_on_the_shared_settings() -> None:
    """OpenAI's batches obey the store's knobs: an expiring batch answers its first half
    (the rest ``batch_expired`` in the error file), a cancelled one answers nothing."""
    with running_simulator(SimConfig()) as sim:
        first = json.dumps({"expire_batches": 1}).encode()
        settings = urllib.request.Request(f"{sim.base_url}/batches/settings", data=first)
        urllib.request.urlopen(settings, timeout=10).close()
        client = openai.OpenAI(api_key="k", base_url=sim.openai_base_url, max_retries=0)
        expired = client.batches.retrieve(openai_batch(client, 4))
        assert expired.status == "expired" and expired.request_counts is not None
        assert (expired.request_counts.completed, expired.request_counts.failed) == (2, 2)
        assert expired.output_file_id and expired.error_file_id
        errors = client.files.content(expired.error_file_id).text.splitlines()
        assert [json.loads(x)["error"]["code"] for x in errors] == ["batch_expired"] * 2
        settings.data = json.dumps({"delay_s": 3600}).encode()
        urllib.request.urlopen(settings, timeout=10).close()
        open_id = openai_batch(client, 2)
        assert client.batches.cancel(open_id).status == "cancelling"
        cancelled = client.batches.retrieve(open_id)
        assert cancelled.status == "cancelled" and cancelled.output_file_id is None
        with urllib.request.urlopen(f"{sim.base_url}/batches/submitted", timeout=10) as resp:
            seen = json.loads(resp.read())["openai"]
        assert seen["states"] == {"expired": 1, "canceled": 1}
        assert sim.stats()["served"] == 2  # only the answered half is billed


def gemini_request(i: int) -> dict[str, Any]:
    """A request whose prompt is ``i`` words longer than the first's (its prompt token
    count tells which request an answer is to)."""
    text = "Judge this answer. " + "word " * 8 * i
    return {
        "contents": [{"role": "user", "parts": [{"text": text}]}],
        "config": {"max_output_tokens": 200},
    }


def prompt_tokens(response: Any) -> int:
    usage = response.usage_metadata if hasattr(response, "usage_metadata") else None
    if usage is None:
        usage = types.GenerateContentResponseUsageMetadata(**response["usageMetadata"])
    return int(usage.prompt_token_count or 0)


def test_gemini_inlined_responses_carry_no_metadata_and_come_shuffled() -> None:
    """As the real API may: an inlined batch's responses without the requests' metadata,
    in no particular order (so nothing tells which answer is whose)."""
    with running_simulator(SimConfig()) as sim:
        client = gemini_client(sim)
        src: Any = [{**gemini_request(i), "metadata": {"custom_id": f"c{i}"}} for i in range(20)]
        job = client.batches.create(model="m", src=src, config={"display_name": "inlined"})
        got = client.batches.get(name=str(job.name))
    assert got.dest is not None and got.dest.inlined_responses is not None
    answers = got.dest.inlined_responses
    assert len(answers) == 20 and all(r.metadata is None for r in answers)
    sizes = [prompt_tokens(r.response) for r in answers]
    assert sorted(sizes) == sorted(set(sizes)) and sizes != sorted(sizes)  # not request order


def test_a_gemini_input_file_batch_answers_every_key_in_a_results_file() -> None:
    """The file-based flow through the SDK: upload a JSONL of ``{key, request}`` lines
    (Files API), create the batch from it, download its results file: one line per key,
    each with its response, shuffled; each request submitted once."""
    with running_simulator(SimConfig()) as sim:
        client = gemini_client(sim)
        lines: list[dict[str, Any]] = [
            {"key": f"k{i}", "request": {"contents": gemini_request(i)["contents"]}}
            for i in range(12)
        ]
        data = "".join(json.dumps(x) + "\n" for x in lines).encode()
        named: Any = {"mime_type": "jsonl", "display_name": "in"}
        uploaded = client.files.upload(file=io.BytesIO(data), config=named)
        job = client.batches.create(
            model="m", src=str(uploaded.name), config={"display_name": "filed"}
        )
        got = client.batches.get(name=str(job.name))
        assert got.dest is not None and got.dest.file_name
        results = client.files.download(file=got.dest.file_name)
        with urllib.request.urlopen(f"{sim.base_url}/batches/submitted", timeout=10) as resp:
            submitted = json.loads(resp.read())["gemini"]["submitted"]
    out = [json.loads(line) for line in results.splitlines()]
    keys = [line["key"] for line in out]
    assert sorted(keys) == sorted(x["key"] for x in lines) and keys != [x["key"] for x in lines]
    sizes = {line["key"]: prompt_tokens(line["response"]) for line in out}
    assert all(sizes[f"k{i}"] < sizes[f"k{i + 1}"] for i in range(11))  # each key its answer
    assert submitted == {x["key"]: 1 for x in lines}
