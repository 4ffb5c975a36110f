"""A simulated model under test answers a turn of a conversation saying which turn it
answered and after which assistant turns (simulator/generate.py), in each wire format
(simulator/wire.py reads every message's role)."""

from __future__ import annotations

from typing import Any

from flask_eval.simulator import generate
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.wire import parse_request

CONFIG = SimConfig(generators={"m": 4.0}, generation_tokens=40)
TURNS = (("system", "Be brief."), ("user", "Plan a trip"), ("assistant", "Go to Maui."))


def _bodies() -> dict[str, tuple[Any, str | None]]:
    return {
        "openai": (
            {
                "model": "m",
                "messages": [
                    {"role": "developer", "content": "Be brief."},
                    {"role": "user", "content": "Plan a trip"},
                    {"role": "assistant", "content": [{"type": "text", "text": "Go to Maui."}]},
                    {"role": "user", "content": "Shorter"},
                ],
            },
            None,
        ),
        "anthropic": (
            {
                "model": "m",
                "max_tokens": 100,
                "system": [{"type": "text", "text": "Be brief."}],
                "messages": [
                    {"role": "user", "content": "Plan a trip"},
                    {"role": "assistant", "content": "Go to Maui."},
                    {"role": "user", "content": [{"type": "text", "text": "Shorter"}]},
                ],
            },
            None,
        ),
        "gemini": (
            {
                "systemInstruction": {"parts": [{"text": "Be brief."}]},
                "contents": [
                    {"role": "user", "parts": [{"text": "Plan a trip"}]},
                    {"role": "model", "parts": [{"text": "Go to Maui."}]},
                    {"role": "user", "parts": [{"text": "Shorter"}]},
                ],
            },
            "m",
        ),
    }


def test_each_wire_gives_the_messages_roles() -> None:
    for dialect, (body, model) in _bodies().items():
        parsed = parse_request(dialect, body, model)  # type: ignore[arg-type]
        assert parsed.turns == (*TURNS, ("user", "Shorter")), dialect
        assert parsed.prompt == "Be brief.\nPlan a trip\nGo to Maui.\nShorter", dialect


def test_a_turn_says_its_number_and_the_digest_of_the_answers_it_was_sent() -> None:
    turns = (*TURNS, ("user", "Shorter"))
    prompt = "\n".join(text for _, text in turns)
    text = generate.answer(prompt, "m", CONFIG, turns)
    assert text is not None and generate.level_of(text) is not None  # the judges read it
    assert generate.conversation_of(text) == (2, generate.answers_digest(["Go to Maui."]))
    assert generate.answer(prompt, "m", CONFIG, turns) == text  # deterministic
    other = (*TURNS[:2], ("assistant", "Go to Oahu."), ("user", "Shorter"))
    again = generate.answer("\n".join(t for _, t in other), "m", CONFIG, other)
    assert again is not None and again != text
    assert generate.conversation_of(again) == (2, generate.answers_digest(["Go to Oahu."]))


def test_a_one_shot_request_says_nothing_of_turns() -> None:
    text = generate.answer("Plan a trip", "m", CONFIG, (("user", "Plan a trip"),))
    assert text is not None and generate.conversation_of(text) is None
    assert text == generate.answer("Plan a trip", "m", CONFIG)
