"""Prompt caching end to end: each provider's real SDK against the simulator sends the
protocol's shared prefix as that provider caches it, and the cached and cache-written
prompt tokens of its usage land in JudgeOutput."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from flask_eval.rubrics.grading import Subject, protocol
from flask_eval.rubrics.messages import Message, split_prefix, text_of
from flask_eval.rubrics.skills import load_default
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.prompt_cache import STEP, tokens
from flask_eval.simulator.testing import running_simulator
from flask_eval.workers.judge import GenerateConfig, JudgeOutput, create_judge
from flask_eval.workers.providers.anthropic_judge import EPHEMERAL, request_of

from .test_judges import no_gemini_env  # noqa: F401  (a fixture: Gemini's variables unset)

SKILLS = load_default()
#: enough skills for a shared prefix over every provider's 1,024-token minimum
CRITERIA = [SKILLS.get(n) for n in SKILLS.names[:6]]
FIRST = Subject("What is the capital of France?", "Paris.", "Paris, of course.")
SECOND = Subject("Name a prime number.", "7", "Seven is prime.", system_prompt="Be brief.")


def _messages(subject: Subject) -> list[Message]:
    return protocol("flask-eval").render(subject, CRITERIA)


def _base(sim: Any, provider: str) -> str:
    return str(
        {
            "openai": sim.openai_base_url,
            "anthropic": sim.anthropic_base_url,
            "gemini": sim.gemini_base_url,
        }[provider]
    )


def _ask(spec: str, *calls: list[Message]) -> list[JudgeOutput]:
    async def go() -> list[JudgeOutput]:
        judge = create_judge(spec)
        try:
            return [await judge.generate(m, GenerateConfig(max_tokens=800)) for m in calls]
        finally:
            await judge.aclose()

    return asyncio.run(go())


def _prefix_chars(messages: list[Message], parts: int = 1) -> int:
    """Where the shared prefix (``parts`` 2: the instance's prefix after it) ends in the
    prompt the simulator reads (system, newline, then the user message's text)."""
    system, user = messages
    shared = text_of({"role": "user", "content": user["content"][:parts]})  # type: ignore[index]
    return len(text_of(system)) + 1 + len(shared)


def test_the_anthropic_request_marks_the_end_of_the_shared_prefix_and_the_instances() -> None:
    messages = _messages(FIRST)
    body = request_of("claude-sonnet-4-5", messages, GenerateConfig())
    shared, _ = split_prefix(messages)
    instance, rest = (p.text for p in messages[1]["content"][1:])  # type: ignore[union-attr]
    assert body["system"] == text_of(messages[0])  # the system prompt alone: no mark
    (user,) = body["messages"]
    head, middle, tail = user["content"]
    assert head == {"type": "text", "text": shared.split("\n\n", 1)[1], "cache_control": EPHEMERAL}
    # the instruction and reference: the prefix of every model's call on this instance
    assert middle == {"type": "text", "text": instance, "cache_control": EPHEMERAL}
    assert "## Instruction" in instance and "RESPONSE" not in instance
    assert tail == {"type": "text", "text": rest} and "cache_control" not in tail
    assert head["text"] + middle["text"] + tail["text"] == text_of(messages[1])


@pytest.mark.usefixtures("no_gemini_env")
@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_a_second_call_with_the_same_criteria_reports_cached_prompt_tokens(provider: str) -> None:
    one, two = _messages(FIRST), _messages(SECOND)
    prefix = tokens(_prefix_chars(one))
    assert prefix >= 1024 + STEP  # the layout shares enough to be cached
    with running_simulator(SimConfig()) as sim:
        first, second = _ask(f"{provider}/judge@{_base(sim, provider)}", one, two)
        stats = sim.stats()
    assert first.cached_tokens == 0
    assert 0 < second.cached_tokens <= prefix < second.prompt_tokens
    assert stats["prompt_tokens"] == first.prompt_tokens + second.prompt_tokens
    assert stats["cached_tokens"] == second.cached_tokens
    if provider == "anthropic":
        # the simulator caches only at a cache_control breakpoint: each call wrote up to
        # its instance's prefix, and the second read exactly the shared prefix (another
        # instance), so the request carried both marks where they belong
        ends = [tokens(_prefix_chars(m, parts=2)) for m in (one, two)]
        assert (first.cache_write_tokens, second.cached_tokens) == (ends[0], prefix)
        assert second.cache_write_tokens == ends[1] - prefix
        assert stats["cache_write_tokens"] == ends[0] + ends[1] - prefix
    else:  # implicit caching: the longest 128-token step of the prefix
        assert second.cached_tokens == 1024 + (prefix - 1024) // STEP * STEP
        assert first.cache_write_tokens == second.cache_write_tokens == 0


def test_anthropic_prompt_tokens_count_the_cached_and_written_ones() -> None:
    """Anthropic's input_tokens leaves out the cache's tokens; ours adds them back, so a
    call's prompt_tokens is the same whether it wrote the cache, read it or neither."""
    messages = _messages(FIRST)
    with running_simulator(SimConfig()) as sim:
        written, read = _ask(f"anthropic/judge@{sim.anthropic_base_url}", messages, messages)
    with running_simulator(SimConfig(cache_prefixes=0)) as sim:
        (plain,) = _ask(f"anthropic/judge@{sim.anthropic_base_url}", messages)
    assert written.cache_write_tokens > 0 and read.cached_tokens > 0
    assert written.prompt_tokens == read.prompt_tokens == plain.prompt_tokens
    assert plain.cached_tokens == plain.cache_write_tokens == 0


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_another_models_call_on_the_same_instance_reads_the_instances_prefix(
    provider: str,
) -> None:
    """Two models' responses to one instance: the second call reads the static prefix and
    the instruction and reference from the cache, and pays in full only for its response."""
    reference = " ".join(f"Paris has been the capital since the year {n}." for n in range(60))
    one = _messages(Subject(FIRST.instruction, reference, "Paris, of course."))
    other = _messages(Subject(FIRST.instruction, reference, "Lyon, I believe."))
    instance_end = tokens(_prefix_chars(one, parts=2))
    with running_simulator(SimConfig()) as sim:
        _, second = _ask(f"{provider}/judge@{_base(sim, provider)}", one, other)
    if provider == "anthropic":
        assert second.cached_tokens == instance_end and second.cache_write_tokens == 0
    else:  # the longest 128-token step within the common prefix
        assert instance_end - STEP < second.cached_tokens <= instance_end + STEP
    assert second.cached_tokens > tokens(_prefix_chars(one))


def test_the_same_criteria_in_another_order_share_the_prefix() -> None:
    """FLASK lists an instance's skills by relevance: one set in another order is still
    one prefix (rubrics.grading.canonical)."""
    ours = protocol("flask-eval")
    forward = ours.render(FIRST, CRITERIA)
    backward = ours.render(SECOND, list(reversed(CRITERIA)))
    assert split_prefix(forward)[0] == split_prefix(backward)[0]
    assert ours.response_schema(CRITERIA) == ours.response_schema(list(reversed(CRITERIA)))
