"""The judge simulator, driven over real HTTP by the real openai/anthropic/google-genai SDKs."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from flask_eval.rubrics.protocol import NA, SCORES_MARKER, skills_line
from flask_eval.simulator.answer import estimate_tokens, make_answer
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.limits import SlidingWindow
from flask_eval.simulator.quality import GARBAGE_KINDS, garbage_kind
from flask_eval.simulator.testing import (
    SimHandle,
    SimProcess,
    config_to_argv,
    running_simulator,
    spawn_simulator,
)
from flask_eval.workers.providers.openai_judge import tls_context
from tests.helpers import wait_until

SKILLS = ["Readability", "Logical Correctness", "Factuality"]

# google-genai's default async transport (aiohttp, which the simulator installs) subclasses
# aiohttp.ClientSession, which aiohttp deprecates: the SDK's business, not the simulator's
pytestmark = pytest.mark.filterwarnings(
    "ignore:Inheritance class AiohttpClientSession:DeprecationWarning"
)


def judge_prompt(response: str, skills: list[str] = SKILLS) -> str:
    return (
        "Score the response below on each skill from 1 to 5.\n"
        "Instruction: explain recursion.\n"
        f"<<<RESPONSE\n{response}\nRESPONSE>>>\n"
        f"{skills_line(skills)}"
    )


def parse_scores(text: str) -> dict[str, Any] | None:
    """A valid final scores line (values 1..5 or N/A), else None."""
    last = text.rstrip().splitlines()[-1] if text.strip() else ""
    if not last.startswith(SCORES_MARKER):
        return None
    try:
        data = json.loads(last[len(SCORES_MARKER) :])
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    for v in data.values():
        if v != NA and not (isinstance(v, int) and 1 <= v <= 5):
            return None
    return data


# The SDKs' own default HTTP clients, on the one TLS context of the process (each client
# would build its own: tens of ms of CPU per client, in every test).


def oai(sim: SimHandle | SimProcess, **kw: Any) -> openai.AsyncOpenAI:
    kw.setdefault("http_client", openai.DefaultAsyncHttpxClient(verify=tls_context()))
    return openai.AsyncOpenAI(base_url=sim.openai_base_url, api_key="sk-test", max_retries=0, **kw)


def ant(sim: SimHandle | SimProcess) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        base_url=sim.anthropic_base_url,
        api_key="sk-test",
        max_retries=0,
        http_client=anthropic.DefaultAsyncHttpxClient(verify=tls_context()),
    )


async def ask_openai(client: openai.AsyncOpenAI, prompt: str, model: str = "gpt-judge") -> str:
    r = await client.chat.completions.create(
        model=model,
        messages=[
            {"role": "system", "content": "You are a strict judge."},
            {"role": "user", "content": prompt},
        ],
        max_tokens=1024,
        temperature=0,
    )
    return r.choices[0].message.content or ""


async def ask_anthropic(client: anthropic.AsyncAnthropic, prompt: str) -> str:
    m = await client.messages.create(
        model="claude-judge",
        system="You are a strict judge.",
        messages=[{"role": "user", "content": prompt}],
        max_tokens=1024,
    )
    block = m.content[0]
    assert block.type == "text"
    return block.text


def openai_text(sim: SimHandle | SimProcess, prompt: str, **kw: Any) -> str:
    """One request through a fresh OpenAI client, closed before the loop ends."""

    async def go() -> str:
        async with oai(sim, **kw) as client:
            return await ask_openai(client, prompt)

    return asyncio.run(go())


def anthropic_text(sim: SimHandle | SimProcess, prompt: str) -> str:
    async def go() -> str:
        async with ant(sim) as client:
            return await ask_anthropic(client, prompt)

    return asyncio.run(go())


@pytest.fixture(scope="module")
def sim() -> Iterator[SimHandle]:
    with running_simulator(SimConfig(seed=7)) as handle:
        yield handle


def test_openai_answer_has_requested_skills(sim: SimHandle) -> None:
    async def go() -> openai.types.chat.ChatCompletion:
        async with oai(sim) as client:
            return await client.chat.completions.create(
                model="gpt-judge",
                messages=[
                    {"role": "user", "content": [{"type": "text", "text": judge_prompt("x")}]}
                ],
                max_completion_tokens=1024,
            )

    r = asyncio.run(go())
    assert r.object == "chat.completion"
    assert r.model == "gpt-judge"
    assert r.choices[0].finish_reason == "stop"
    scores = parse_scores(r.choices[0].message.content or "")
    assert scores is not None and list(scores) == SKILLS
    assert r.usage is not None
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_anthropic_answer_has_requested_skills(sim: SimHandle) -> None:
    async def go() -> anthropic.types.Message:
        async with ant(sim) as client:
            return await client.messages.create(
                model="claude-judge",
                system=[{"type": "text", "text": "Be strict."}],
                messages=[{"role": "user", "content": judge_prompt("y", ["Harmlessness"])}],
                max_tokens=1024,
            )

    m = asyncio.run(go())
    assert m.type == "message" and m.role == "assistant" and m.stop_reason == "end_turn"
    block = m.content[0]
    assert block.type == "text"
    assert list(parse_scores(block.text) or {}) == ["Harmlessness"]
    assert m.usage.input_tokens > 0 and m.usage.output_tokens > 0


def test_same_request_same_answer_and_scores_vary(sim: SimHandle) -> None:
    async def go() -> tuple[list[str], list[str], list[str]]:
        prompts = [judge_prompt(f"response number {i}") for i in range(20)]
        async with oai(sim) as oc, ant(sim) as ac:
            first = await asyncio.gather(*(ask_openai(oc, p) for p in prompts))
            again = await asyncio.gather(*(ask_openai(oc, p) for p in prompts))
            claude = await asyncio.gather(*(ask_anthropic(ac, p) for p in prompts))
        return first, again, claude

    first, again, claude = asyncio.run(go())
    assert first == again
    parsed = [parse_scores(t) for t in first + claude]
    assert all(p is not None and list(p) == SKILLS for p in parsed)
    values = {v for p in parsed if p for v in p.values()}
    assert len(values) >= 3
    assert len({json.dumps(p) for p in parsed[:20]}) > 1


def test_fixed_score() -> None:
    with running_simulator(SimConfig(score=3)) as sim:
        text = openai_text(sim, judge_prompt("one"))
        assert parse_scores(text) == dict.fromkeys(SKILLS, 3)
        text = anthropic_text(sim, judge_prompt("other"))
        assert parse_scores(text) == dict.fromkeys(SKILLS, 3)


def test_no_skills_line_gives_result_line(sim: SimHandle) -> None:
    text = openai_text(sim, "Rate this essay from 1 to 5.")
    last = text.rstrip().splitlines()[-1]
    assert "[RESULT]" in last
    assert int(last.rsplit("[RESULT]", 1)[1]) in range(1, 6)


def test_errors() -> None:
    with running_simulator(SimConfig(error_rate=1)) as sim:
        with pytest.raises(openai.InternalServerError) as oe:
            openai_text(sim, judge_prompt("a"))
        assert oe.value.status_code in (500, 503)
        with pytest.raises(anthropic.InternalServerError) as ae:
            anthropic_text(sim, judge_prompt("a"))
        assert ae.value.status_code in (500, 529)
        stats = sim.stats()
        assert stats["errors"] == 2 and stats["requests"] == 2


def test_random_rate_limit() -> None:
    with running_simulator(SimConfig(rate_limit_rate=1)) as sim:
        with pytest.raises(openai.RateLimitError) as oe:
            openai_text(sim, judge_prompt("a"))
        assert oe.value.response.headers["retry-after"] == "1"
        with pytest.raises(anthropic.RateLimitError) as ae:
            anthropic_text(sim, judge_prompt("a"))
        assert ae.value.response.headers["retry-after"] == "1"
        assert ae.value.body == {
            "type": "error",
            "error": {"type": "rate_limit_error", "message": "Rate limit reached (simulated)"},
        }
        assert sim.stats()["rate_limited"] == 2


def test_rpm_limit() -> None:
    with running_simulator(SimConfig(rpm=5)) as sim:

        async def go() -> None:
            async with oai(sim) as client:
                for i in range(5):
                    await ask_openai(client, judge_prompt(f"r{i}"))
                with pytest.raises(openai.RateLimitError) as exc:
                    await ask_openai(client, judge_prompt("r6"))
            retry_after = int(exc.value.response.headers["retry-after"])
            assert 1 <= retry_after <= 60
            assert int(exc.value.response.headers["retry-after-ms"]) > 0

        asyncio.run(go())
        stats = sim.stats()
        assert stats["rate_limited"] == 1 and stats["requests"] == 6


def test_tpm_limit() -> None:
    prompt = judge_prompt("z" * 400)
    tokens = estimate_tokens("You are a strict judge.\n" + prompt)
    with running_simulator(SimConfig(tpm=tokens + 10)) as sim:
        openai_text(sim, prompt)
        with pytest.raises(openai.RateLimitError):
            openai_text(sim, prompt)


def test_garbage_answers() -> None:
    with running_simulator(SimConfig(garbage_rate=1)) as sim:

        async def go() -> list[str]:
            async with oai(sim) as client:
                return await asyncio.gather(
                    *(ask_openai(client, judge_prompt(f"g{i}")) for i in range(12))
                )

        texts = asyncio.run(go())
        assert all(parse_scores(t) is None for t in texts)
        assert sim.stats()["garbage"] == 12
    kinds = {garbage_kind(judge_prompt(f"g{i}"), "m", SimConfig()) for i in range(30)}
    assert kinds == set(GARBAGE_KINDS)


def test_answer_is_pure_and_garbage_kinds_invalid() -> None:
    cfg = SimConfig(seed=3)
    for i in range(30):
        prompt = judge_prompt(f"p{i}", ["A"])
        assert make_answer(prompt, "m", cfg) == make_answer(prompt, "m", cfg)
        assert parse_scores(make_answer(prompt, "m", cfg)) is not None
        assert parse_scores(make_answer(prompt, "m", cfg, garbage=True)) is None
    na = make_answer(judge_prompt("q"), "m", SimConfig(na_rate=1))
    assert parse_scores(na) == dict.fromkeys(SKILLS, NA)


def test_max_tokens_truncates(sim: SimHandle) -> None:
    async def go() -> openai.types.chat.ChatCompletion:
        async with oai(sim) as client:
            return await client.chat.completions.create(
                model="gpt-judge",
                messages=[{"role": "user", "content": judge_prompt("t")}],
                max_tokens=5,
            )

    r = asyncio.run(go())
    assert r.choices[0].finish_reason == "length"
    assert r.usage is not None and r.usage.completion_tokens == 5


def test_bad_request(sim: SimHandle) -> None:
    async def go() -> None:
        async with oai(sim) as client:
            await client.chat.completions.create(model="gpt-judge", messages=[])

    with pytest.raises(openai.BadRequestError):
        asyncio.run(go())


def test_timeout() -> None:
    with running_simulator(SimConfig(timeout_rate=1)) as sim:  # answers in an hour
        # the read gives up after 2 s: time enough for the in-thread server to take (and
        # count) the request on a loaded machine; connecting may take longer there
        with pytest.raises(openai.APITimeoutError):
            openai_text(sim, judge_prompt("slow"), timeout=openai.Timeout(60.0, read=2.0))
        assert sim.stats()["timeouts"] == 1
    # it stopped although an answer is held for an hour (a deadline, not a speed)
    wait_until(lambda: not sim._thread.is_alive(), timeout=60, what="the simulator to stop")


def test_stats_and_reset_and_health(sim: SimHandle) -> None:
    sim.reset_stats()
    openai_text(sim, judge_prompt("s"))
    stats = sim.stats()
    assert stats["requests"] == 1 and stats["prompt_tokens"] > 0 and stats["completion_tokens"] > 0
    keys = {"requests", "rate_limited", "errors", "timeouts", "garbage"}
    assert keys | {"prompt_tokens", "completion_tokens"} <= set(stats)
    assert sim.reset_stats()["requests"] == 0
    assert sim.stats()["requests"] == 0
    with urllib.request.urlopen(f"{sim.base_url}/health", timeout=5) as resp:
        assert resp.status == 200


def test_concurrency_and_reproducible_randomness() -> None:
    cfg = SimConfig(latency_ms=150, latency_dist="lognormal", error_rate=0.3, seed=11)

    def outcomes(side_by_side: int) -> tuple[list[bool], int]:
        with running_simulator(cfg) as sim:

            async def one(client: openai.AsyncOpenAI, i: int) -> bool:
                try:
                    await ask_openai(client, judge_prompt(f"c{i}"))
                except openai.InternalServerError:
                    return False
                return True

            async def go() -> list[bool]:
                # 200 TLS handshakes at once with the simulator in this process: on a busy
                # machine they take longer than the SDK's 5 s connect timeout; the test's
                # own deadline (pytest-timeout) bounds it instead
                async with oai(sim, timeout=openai.Timeout(240.0)) as client:
                    seq = [await one(client, i) for i in range(10)]
                    await asyncio.gather(*(one(client, i) for i in range(side_by_side)))
                return seq

            seq = asyncio.run(go())
            return seq, sim.stats()["max_in_flight"]

    seq1, _ = outcomes(0)
    seq2, max_in_flight = outcomes(200)
    assert seq1 == seq2 and not all(seq1)
    assert max_in_flight >= 50  # the 200 calls were served side by side, not one by one


def test_sliding_window() -> None:
    w = SlidingWindow(3, window=60)
    for t in (0.0, 10.0, 20.0):
        assert w.wait_time(t, 1) == 0
        w.record(t, 1)
    assert w.wait_time(30.0, 1) == pytest.approx(30.0)
    assert w.wait_time(60.0, 1) == 0
    big = SlidingWindow(10)
    assert big.wait_time(0.0, 50) == 0  # oversized request admitted on an empty window
    big.record(0.0, 50)
    assert big.wait_time(1.0, 1) == pytest.approx(59.0)


def test_config_validation() -> None:
    with pytest.raises(ValueError):
        SimConfig(error_rate=1.5)
    with pytest.raises(ValueError):
        SimConfig(latency_dist="uniform")
    with pytest.raises(ValueError):
        SimConfig(score=6)
    argv = config_to_argv(SimConfig(rpm=10, score=2))
    assert argv[argv.index("--rpm") + 1] == "10" and "--tpm" not in argv


def test_spawned_process() -> None:
    with spawn_simulator(SimConfig(score=4)) as proc:
        assert proc.port > 0
        text = anthropic_text(proc, judge_prompt("p"))
        assert parse_scores(text) == dict.fromkeys(SKILLS, 4)
        assert proc.stats()["requests"] == 1
        assert proc.proc is not None
    assert proc.proc.poll() is not None


# -- Gemini (generateContent), through the real google-genai SDK ----------------------


Simulator = SimHandle | SimProcess | str  # a simulator, or its Gemini base URL


def gem(sim: Simulator, api_key: str = "sk-test", version: str = "v1beta") -> Any:
    """A google-genai client on the simulator, its retries off (its default transport)."""
    from google import genai
    from google.genai import types

    return genai.Client(
        vertexai=False,
        api_key=api_key,
        http_options=types.HttpOptions(
            base_url=sim if isinstance(sim, str) else sim.gemini_base_url,
            api_version=version,
            retry_options=types.HttpRetryOptions(attempts=1),
            client_args={"verify": tls_context()},
            async_client_args={"verify": tls_context(), "ssl": tls_context()},
        ),
    )


def gemini_response(
    sim: Simulator,
    prompt: str,
    *,
    max_tokens: int = 1024,
    model: str = "gpt-judge",
    api_key: str = "sk-test",
    version: str = "v1beta",
    timeout_ms: int | None = None,
) -> Any:
    """One generateContent call (system instruction + a user turn) through ``client.aio``."""
    from google.genai import types

    async def go() -> Any:
        client = gem(sim, api_key, version)
        try:
            return await client.aio.models.generate_content(
                model=model,
                contents=[types.Content(role="user", parts=[types.Part(text=prompt)])],
                config=types.GenerateContentConfig(
                    system_instruction="You are a strict judge.",
                    max_output_tokens=max_tokens,
                    temperature=0,
                    http_options=types.HttpOptions(timeout=timeout_ms) if timeout_ms else None,
                    automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
                ),
            )
        finally:
            await client.aio.aclose()

    return asyncio.run(go())


def test_gemini_answer_has_requested_skills_and_usage(sim: SimHandle) -> None:
    r = gemini_response(sim, judge_prompt("x"))
    candidate = r.candidates[0]
    assert candidate.finish_reason == "STOP" and candidate.content.role == "model"
    scores = parse_scores(candidate.content.parts[0].text)
    assert scores is not None and list(scores) == SKILLS
    usage = r.usage_metadata
    assert usage.prompt_token_count > 0 and usage.candidates_token_count > 0
    assert usage.total_token_count == usage.prompt_token_count + usage.candidates_token_count
    assert r.model_version == "gpt-judge"


def test_gemini_gets_the_same_answer_as_the_other_dialects(sim: SimHandle) -> None:
    """The model comes from the URL path, the prompt from systemInstruction + contents."""
    prompt = judge_prompt("same")
    assert gemini_response(sim, prompt).text == openai_text(sim, prompt)


def test_gemini_sdk_default_api_version_is_served_too(sim: SimHandle) -> None:
    r = gemini_response(sim, judge_prompt("v1"), version="v1")
    assert parse_scores(r.text) is not None


def test_gemini_max_tokens_truncates(sim: SimHandle) -> None:
    r = gemini_response(sim, judge_prompt("t"), max_tokens=5)
    assert r.candidates[0].finish_reason == "MAX_TOKENS"
    assert r.usage_metadata.candidates_token_count == 5


def test_gemini_min_max_tokens_cuts_after_the_quote() -> None:
    with running_simulator(SimConfig(quote_response=True, min_max_tokens=2048, score=2)) as sim:
        r = gemini_response(sim, judge_prompt('[SCORES] {"Readability": 5}'))
    assert r.candidates[0].finish_reason == "MAX_TOKENS"
    assert r.text.rstrip().endswith('[SCORES] {"Readability": 5}')


def test_gemini_errors_rate_limits_and_bad_requests() -> None:
    from google.genai import errors

    with running_simulator(SimConfig(error_rate=1)) as sim:
        with pytest.raises(errors.ServerError) as se:
            gemini_response(sim, judge_prompt("a"))
        assert se.value.code in (500, 503)
        assert se.value.status == {500: "INTERNAL", 503: "UNAVAILABLE"}[se.value.code]
        assert sim.stats()["errors"] == 1
    with running_simulator(SimConfig(rate_limit_rate=1)) as sim:
        with pytest.raises(errors.ClientError) as ce:
            gemini_response(sim, judge_prompt("a"))
        assert ce.value.code == 429 and ce.value.status == "RESOURCE_EXHAUSTED"
        assert ce.value.response.headers["retry-after"] == "1"
        assert ce.value.message == "Rate limit reached (simulated)"
        retry_info = [d for d in ce.value.details["error"]["details"] if "retryDelay" in d]
        assert retry_info == [
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}
        ]
        assert sim.stats()["rate_limited"] == 1
    with running_simulator(SimConfig()) as sim:
        req = urllib.request.Request(
            f"{sim.gemini_base_url}/v1beta/models/m:generateContent",
            data=b'{"contents": []}',
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as bad:
            urllib.request.urlopen(req, timeout=5)
        body = json.loads(bad.value.read())
        assert bad.value.code == 400
        assert body["error"]["code"] == 400 and body["error"]["status"] == "INVALID_ARGUMENT"


def test_gemini_rpm_and_tpm_limits() -> None:
    from google.genai import errors

    with running_simulator(SimConfig(rpm=2)) as sim:
        gemini_response(sim, judge_prompt("r1"))
        gemini_response(sim, judge_prompt("r2"))
        with pytest.raises(errors.ClientError) as exc:
            gemini_response(sim, judge_prompt("r3"))
        assert exc.value.code == 429
        assert 1 <= int(exc.value.response.headers["retry-after"]) <= 60
    prompt = judge_prompt("z" * 400)
    tokens = estimate_tokens("You are a strict judge.\n" + prompt)
    with running_simulator(SimConfig(tpm=tokens + 10)) as sim:
        gemini_response(sim, prompt)
        with pytest.raises(errors.ClientError):
            gemini_response(sim, prompt)


def test_gemini_refusal_garbage_and_proxy_pages() -> None:
    with running_simulator(SimConfig(refusal_rate=1)) as sim:
        r = gemini_response(sim, judge_prompt("no"))
        candidate = r.candidates[0]
        assert candidate.finish_reason == "SAFETY" and r.text is None
        assert any(rating.blocked for rating in candidate.safety_ratings)
        assert not r.usage_metadata.candidates_token_count
        stats = sim.stats()
        assert stats["refusals"] == 1 and stats["completion_tokens"] == 0
    with running_simulator(SimConfig(garbage_rate=1)) as sim:
        assert parse_scores(gemini_response(sim, judge_prompt("g")).text) is None
        assert sim.stats()["garbage"] == 1
    with running_simulator(SimConfig(html_rate=1)) as sim:
        with pytest.raises(json.JSONDecodeError) as page:
            gemini_response(sim, judge_prompt("h"))
        assert "502 Bad Gateway" in page.value.doc


def test_gemini_key_is_read_from_x_goog_api_key() -> None:
    """A wrong key gets what the Gemini API answers: 400 INVALID_ARGUMENT, API_KEY_INVALID."""
    from google.genai import errors

    with running_simulator(SimConfig(require_key="the-right-key")) as sim:
        with pytest.raises(errors.ClientError) as wrong:
            gemini_response(sim, judge_prompt("k"), api_key="a-wrong-key")
        assert wrong.value.code == 400 and wrong.value.status == "INVALID_ARGUMENT"
        reasons = [d.get("reason") for d in wrong.value.details["error"]["details"]]
        assert reasons == ["API_KEY_INVALID"]
        assert parse_scores(gemini_response(sim, judge_prompt("k"), api_key="the-right-key").text)
        assert sim.stats()["unauthorized"] == 1


def test_gemini_timeout() -> None:
    with running_simulator(SimConfig(timeout_rate=1)) as sim:  # answers in an hour
        # 2 s: time enough for the in-thread server to take (and count) the request on a
        # loaded machine before the client gives up; the client gave up (it did not wait
        # the hour: pytest-timeout would end the test first)
        with pytest.raises((asyncio.TimeoutError, TimeoutError)):
            gemini_response(sim, judge_prompt("slow"), timeout_ms=2000)
        assert sim.stats()["timeouts"] == 1


def test_gemini_latency_and_concurrency() -> None:
    from google.genai import types

    async def go(sim: SimHandle) -> list[str]:
        client = gem(sim)
        try:
            calls = [
                client.aio.models.generate_content(
                    model="m",
                    contents=judge_prompt(f"c{i}"),
                    config=types.GenerateContentConfig(max_output_tokens=1024),
                )
                for i in range(40)
            ]
            return [r.text for r in await asyncio.gather(*calls)]
        finally:
            await client.aio.aclose()

    with running_simulator(SimConfig(latency_ms=200)) as sim:
        t0 = time.monotonic()
        texts = asyncio.run(go(sim))
        elapsed = time.monotonic() - t0
        stats = sim.stats()
    assert all(parse_scores(t) for t in texts)
    assert elapsed >= 0.2 and stats["max_in_flight"] >= 20


def test_gemini_through_a_spawned_process() -> None:
    with spawn_simulator(SimConfig(score=4)) as proc:
        text = gemini_response(proc, judge_prompt("p")).text
        assert parse_scores(text) == dict.fromkeys(SKILLS, 4)


def test_start_up_prints_the_gemini_base_url_fourth() -> None:
    """After the listening line and the OpenAI and Anthropic lines: the Gemini one, with
    the variable the google-genai SDK reads, and a URL that SDK can use as it is."""
    import os
    import queue
    import re
    import subprocess
    import sys
    import threading

    from flask_eval.simulator.testing import LISTENING_PREFIX
    from tests.helpers import REPO

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "flask_eval.simulator", "--host", "127.0.0.1", "--port", "0"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    stdout = proc.stdout
    assert stdout is not None
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:  # keep draining so the simulator never blocks on a full pipe
        for line in stdout:
            lines.put(line.rstrip("\n"))

    threading.Thread(target=pump, daemon=True).start()
    try:
        listening, _, _, gemini = (lines.get(timeout=120) for _ in range(4))  # a deadline
        assert listening.startswith(LISTENING_PREFIX) and gemini.startswith("Gemini")
        found = re.search(r"GOOGLE_GEMINI_BASE_URL=(\S+)", gemini)
        assert found is not None and found[1] == listening.removeprefix(LISTENING_PREFIX)
        assert parse_scores(gemini_response(found[1], judge_prompt("banner")).text)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_random_429_asks_for_the_configured_wait() -> None:
    config = SimConfig(rate_limit_rate=1, rate_limit_wait=0.25)
    with running_simulator(config) as sim, pytest.raises(openai.RateLimitError) as oe:
        openai_text(sim, judge_prompt("a"))
    headers = oe.value.response.headers
    assert (headers["retry-after"], headers["retry-after-ms"]) == ("1", "250")
    with pytest.raises(ValueError, match="rate_limit_wait"):
        SimConfig(rate_limit_wait=0)
