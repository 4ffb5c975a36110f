"""An in-memory judge for unit tests: no network, deterministic answers.

Not offered to users: tests register it (``workers.judge.register_provider``, in
tests/conftest.py). ``MemoryJudge.script`` may be replaced by a test with any function of
the messages that returns an answer text (or a JudgeOutput) or raises a JudgeError. It
reads no images: a prompt with one fails as ``config`` before the script is asked.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Sequence

from flask_eval.rubrics.messages import text_of
from flask_eval.rubrics.protocol import requested_skills, scores_line
from flask_eval.workers.judge_base import GenerateConfig, Judge, JudgeOutput, Message
from flask_eval.workers.providers.images import check_images


def default_answer(messages: Sequence[Message]) -> str:
    prompt = "\n".join(text_of(m) for m in messages)
    skills = requested_skills(prompt) or []
    digest = hashlib.sha256(prompt.encode()).digest()
    scores: dict[str, int | None] = {
        s: 1 + digest[i % len(digest)] % 5 for i, s in enumerate(skills)
    }
    lines = [f"{s}: read against its rubric." for s in skills]
    return "\n".join([*lines, scores_line(scores)])


class MemoryJudge(Judge):
    script: Callable[[Sequence[Message]], str | JudgeOutput] = staticmethod(default_answer)  # type: ignore[assignment]
    calls: int = 0
    max_tokens_seen: list[int] = []  # noqa: RUF012  (a test probe, shared on purpose)

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> JudgeOutput:
        check_images(self.name, messages, self.image_types)  # it reads no image: refused
        type(self).calls += 1
        type(self).max_tokens_seen.append(config.max_tokens)
        await asyncio.sleep(0)  # a real judge's I/O lets other calls run meanwhile
        answer = type(self).script(messages)
        if isinstance(answer, JudgeOutput):
            return answer
        prompt_chars = sum(len(text_of(m)) for m in messages)
        return JudgeOutput(answer, prompt_chars // 4, len(answer) // 4)
