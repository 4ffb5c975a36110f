"""What a batch needs to know about its run, and the identity of a judge prompt. Pure."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rubrics import codec
from rubrics.grading import Criterion, Protocol, protocol
from rubrics.skills import SkillSet
from workers.endpoints import JudgeConfig
from workers.judge import DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE, GenerateConfig, Message


@dataclass(frozen=True)
class RunContext:
    """A run's criteria, protocol mode and judge configurations, as stored with the run
    (every worker rebuilds it from the ledger, never from a message)."""

    skillset: SkillSet
    judges: Mapping[str, JudgeConfig]
    mode: str = "instance"

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> RunContext:
        judges = [JudgeConfig.from_data(j) for j in config["judges"]]
        return cls(
            codec.from_data(config["skills"]),
            {j.name: j for j in judges},
            str(config.get("mode") or "instance"),
        )

    def protocol_for(self, judge: str) -> Protocol:
        """The grading protocol this run asks ``judge`` for."""
        return protocol(mode=self.mode)

    def criterion(self, name: str) -> Criterion:
        return self.skillset.get(name)


def generate_config(judge: JudgeConfig, timeout: float) -> GenerateConfig:
    """A judge's sampling settings (its own, or the defaults) with the call timeout."""
    return GenerateConfig(
        max_tokens=judge.max_tokens or DEFAULT_MAX_TOKENS,
        temperature=judge.temperature if judge.temperature is not None else DEFAULT_TEMPERATURE,
        timeout=timeout,
    )


def cache_key(judge: str, messages: Sequence[Message], config: GenerateConfig) -> str:
    """The identity of an answer: judge model, rendered prompt and sampling parameters."""
    payload = {
        "judge": judge,
        "messages": list(messages),
        "max_tokens": config.max_tokens,
        "temperature": config.temperature,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
