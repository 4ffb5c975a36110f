"""An in-memory judge for unit tests: no network, deterministic answers.

``MemoryJudge.script`` may be replaced by a test with any function of the messages that
returns an answer text or raises a JudgeError.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from rubrics.protocol import requested_skills, scores_line
from workers.judge import GenerateConfig, Judge, JudgeOutput, Message


def default_answer(messages: Sequence[Message]) -> str:
    prompt = "\n".join(m["content"] for m in messages)
    skills = requested_skills(prompt) or []
    digest = hashlib.sha256(prompt.encode()).digest()
    scores: dict[str, int | None] = {
        s: 1 + digest[i % len(digest)] % 5 for i, s in enumerate(skills)
    }
    return "The response was read against each rubric.\n" + scores_line(scores)


class MemoryJudge(Judge):
    script: Callable[[Sequence[Message]], str] = staticmethod(default_answer)  # type: ignore[assignment]
    calls: int = 0

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> JudgeOutput:
        type(self).calls += 1
        text = type(self).script(messages)
        prompt_chars = sum(len(m["content"]) for m in messages)
        return JudgeOutput(text, prompt_chars // 4, len(text) // 4)
