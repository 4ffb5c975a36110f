"""Each provider sends a conversation's earlier turns as real chat messages (the model's
answers as assistant turns: OpenAI ``assistant``, Anthropic ``assistant``, Gemini
``model``), through its real SDK, to the simulator, which says which turn it answered and
after which answers."""

from __future__ import annotations

import asyncio

import pytest

from flask_eval.rubrics.messages import Message
from flask_eval.simulator import generate
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.workers.judge import GenerateConfig, create_judge


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_the_models_earlier_answers_reach_it_as_assistant_turns(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(key, "sk-test")
    messages: list[Message] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Plan a trip to Hawaii."},
        {"role": "assistant", "content": "Maui first, then Kauai."},
        {"role": "user", "content": "Now in one sentence."},
        {"role": "assistant", "content": "Maui, then Kauai."},
        {"role": "user", "content": "And the budget?"},
    ]

    async def ask(base: str) -> str:
        judge = create_judge(f"{provider}/m@{base}")
        try:
            out = await judge.generate(messages, GenerateConfig(timeout=30, max_tokens=400))
            return out.text
        finally:
            await judge.aclose()

    with running_simulator(SimConfig(generators={"m": 3.0}, generation_tokens=40)) as sim:
        base = {
            "openai": sim.openai_base_url,
            "anthropic": sim.anthropic_base_url,
            "gemini": sim.gemini_base_url,
        }[provider]
        text = asyncio.run(ask(base))
    digest = generate.answers_digest(["Maui first, then Kauai.", "Maui, then Kauai."])
    assert generate.conversation_of(text) == (3, digest)
