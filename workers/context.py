"""What a batch needs to know about its run, and the identity of a judge prompt. Pure."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rubrics import codec
from rubrics.skills import SkillSet
from workers.endpoints import JudgeConfig
from workers.judge import GenerateConfig, Message


@dataclass(frozen=True)
class RunContext:
    """A run's rubrics and judge configurations, as every worker rebuilds them."""

    skillset: SkillSet
    judges: Mapping[str, JudgeConfig]

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> RunContext:
        judges = [JudgeConfig.from_data(j) for j in config["judges"]]
        return cls(codec.from_data(config["skills"]), {j.name: j for j in judges})


def cache_key(judge: str, messages: Sequence[Message], config: GenerateConfig) -> str:
    """The identity of an answer: judge model, rendered prompt and sampling parameters."""
    payload = {
        "judge": judge,
        "messages": list(messages),
        "max_tokens": config.max_tokens,
        "temperature": config.temperature,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
