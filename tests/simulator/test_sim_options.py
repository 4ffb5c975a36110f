"""The simulator's wire behaviours for the providers' tests: a proxy that echoes the
request's headers, any stop reason, HTTP 200 bodies that are not a message, and a local
server with few slots (requests wait in line)."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from typing import Any

import pytest

from flask_eval.rubrics.protocol import skills_line
from flask_eval.simulator.__main__ import build_parser, config_from_args
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import SimHandle, config_to_argv, running_simulator
from tests.helpers import wait_until

PROMPT = f"Score the response on each skill.\n{skills_line(['Readability'])}"
REQUESTS = {
    "openai": (
        "/v1/chat/completions",
        {"model": "m", "max_tokens": 500, "messages": [{"role": "user", "content": PROMPT}]},
    ),
    "anthropic": (
        "/v1/messages",
        {"model": "m", "max_tokens": 500, "messages": [{"role": "user", "content": PROMPT}]},
    ),
    "gemini": (
        "/v1beta/models/m:generateContent",
        {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}]},
    ),
}


def post(
    sim: SimHandle, dialect: str, headers: dict[str, str] | None = None, timeout: float = 10
) -> Any:
    path, body = REQUESTS[dialect]
    headers = {"Content-Type": "application/json", **(headers or {})}
    req = urllib.request.Request(f"{sim.base_url}{path}", json.dumps(body).encode(), headers)
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def text_of(dialect: str, body: dict[str, Any]) -> str:
    if dialect == "openai":
        return str(body["choices"][0]["message"]["content"])
    if dialect == "anthropic":
        return str(body["content"][0]["text"])
    return str(body["candidates"][0]["content"]["parts"][0]["text"])


def reason_of(dialect: str, body: dict[str, Any]) -> object:
    if dialect == "openai":
        return body["choices"][0]["finish_reason"]
    if dialect == "anthropic":
        return body["stop_reason"]
    return body["candidates"][0].get("finishReason")


@pytest.mark.parametrize("dialect", ["openai", "anthropic", "gemini"])
def test_an_echoing_proxy_puts_the_request_headers_in_the_answer(dialect: str) -> None:
    with running_simulator(SimConfig(echo_headers=True)) as sim:
        body = post(sim, dialect, {"x-api-key": "sk-echo-me-123456"})
    text = text_of(dialect, body)
    assert text.startswith("request headers:") and "sk-echo-me-123456" in text
    assert "[SCORES]" in text  # the judgment follows the echo


@pytest.mark.parametrize(
    ("dialect", "reason"),
    [
        ("openai", "tool_calls"),
        ("anthropic", "pause_turn"),
        ("gemini", "OTHER"),
        ("openai", "null"),
        ("gemini", "null"),
    ],
)
def test_any_stop_reason_on_the_wire(dialect: str, reason: str) -> None:
    with running_simulator(SimConfig(stop_reason=reason)) as sim:
        body = post(sim, dialect)
    assert reason_of(dialect, body) == (None if reason == "null" else reason)
    assert "[SCORES]" in text_of(dialect, body)


@pytest.mark.parametrize("dialect", ["openai", "anthropic", "gemini"])
def test_bodies_that_are_not_a_message(dialect: str) -> None:
    with running_simulator(SimConfig(malformed="list")) as sim:
        listed = post(sim, dialect)
    with running_simulator(SimConfig(malformed="null_content")) as sim:
        nulled = post(sim, dialect)
    assert isinstance(listed, list) and len(listed) == 1
    content = {
        "openai": lambda b: b["choices"][0]["message"]["content"],
        "anthropic": lambda b: b["content"],
        "gemini": lambda b: b["candidates"][0]["content"],
    }[dialect]
    assert content(nulled) is None and content(listed[0]) is not None


def test_a_one_slot_server_serves_in_line_and_drops_who_gave_up() -> None:
    """One request at a time, the others wait (their latency starts at their turn); a
    client that gave up while waiting is never served."""
    latency = 1.0
    with running_simulator(SimConfig(slots=1, latency_ms=latency * 1000)) as sim:

        def holding() -> None:
            wait_until(
                lambda: sim.stats()["serving"],
                timeout=60,
                interval=0.01,
                what="the first request to hold the slot",
            )

        async def go() -> None:
            loop = asyncio.get_running_loop()
            first = loop.run_in_executor(None, post, sim, "openai")
            await loop.run_in_executor(None, holding)
            # it gives up in line: after half the first's latency, time enough for the
            # in-thread server to take its request in on a loaded machine
            gave_up = loop.run_in_executor(None, lambda: post(sim, "openai", timeout=latency / 2))
            with pytest.raises(OSError):  # timed out, in line
                await gave_up
            await asyncio.gather(
                first, *(loop.run_in_executor(None, post, sim, "openai") for _ in range(2))
            )

        started = time.monotonic()
        asyncio.run(go())
        elapsed = time.monotonic() - started
        stats = sim.stats()
    assert stats["max_serving"] == 1 and stats["max_in_flight"] >= 2
    assert stats["requests"] == 4 and stats["served"] == 3  # the one that gave up: never
    assert elapsed >= 3 * latency  # served one after another


def test_the_options_are_validated_and_on_the_command_line() -> None:
    with pytest.raises(ValueError, match="malformed"):
        SimConfig(malformed="html")
    with pytest.raises(ValueError, match="slots"):
        SimConfig(slots=0)
    config = SimConfig(echo_headers=True, stop_reason="pause_turn", malformed="list", slots=2)
    argv = config_to_argv(config)
    parsed = config_from_args(build_parser().parse_args(argv))
    assert (parsed.echo_headers, parsed.stop_reason, parsed.malformed, parsed.slots) == (
        True,
        "pause_turn",
        "list",
        2,
    )
