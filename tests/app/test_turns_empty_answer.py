"""A model that answers a turn with nothing is not asked the next turn of that
conversation (Anthropic refuses an empty assistant message, and no stand-in text would be
the model's own): the turn is said as not generated, after an empty answer; the other
conversations go on (app/turns.py, docs/design/conversations.md)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from flask_eval.app import steps
from flask_eval.app.turns import TurnsIncomplete, generate_turns, generation_plan
from flask_eval.core.settings import Settings
from flask_eval.core.types import Instance, JudgeConfig
from flask_eval.producer.conversations import expand
from flask_eval.rubrics.messages import text_of
from flask_eval.storage.store import Store
from flask_eval.workers.judge import Message
from flask_eval.workers.providers.memory_judge import MemoryJudge, default_answer


@pytest.fixture(autouse=True)
def _script() -> Iterator[None]:
    asked: list[list[str]] = []

    def script(messages: Sequence[Message]) -> str:
        texts = [text_of(m) for m in messages]
        asked.append(texts)
        if texts[-1] == "Say nothing.":
            return "   "  # blank: as empty as "" for a provider
        return f"answer {len(asked)}"

    MemoryJudge.script = staticmethod(script)  # type: ignore[assignment]
    MemoryJudge.asked = asked  # type: ignore[attr-defined]
    yield
    MemoryJudge.script = staticmethod(default_answer)  # type: ignore[assignment]


def conversation(cid: str, turns: list[str]) -> list[Instance]:
    """The instances of one conversation, one per turn, as the loaders make them."""
    return expand(Instance(cid, "", "", (), (), None), turns, [""] * len(turns))


def test_an_empty_answer_ends_its_conversation(sqlite_url: str) -> None:
    instances = [
        *conversation("81", ["Say nothing.", "Now say more.", "And more."]),
        *conversation("82", ["Say hi.", "Say bye."]),
    ]
    plan = generation_plan(instances, [JudgeConfig("m", "memory/m")], "hand-made", "empty")
    settings = Settings(sqlite_url, None)
    store = Store(sqlite_url)
    try:
        dispatcher = steps.dispatcher_for(settings, store, plan.models, 8)
        with pytest.raises(TurnsIncomplete) as raised:
            generate_turns(plan, store, dispatcher, settings)
    finally:
        store.close()
    done = raised.value.done
    said = str(raised.value)
    assert "turns not generated" in said and "(m: 2)" in said
    assert "right after an empty answer" in said and "(m: 1)" in said
    assert done.not_asked == {"m": 2} and done.blank == {"m": 1}
    asked = MemoryJudge.asked  # type: ignore[attr-defined]
    assert all("Now say more." not in texts for texts in asked)  # 81:t2 never asked
    assert any(texts[-1] == "Say bye." for texts in asked)  # 82 goes on
    got = {g.instance_id: g for g in done.responses["m"]}
    assert set(got) == {"81:t1", "82:t1", "82:t2"} and got["81:t1"].text == "   "
