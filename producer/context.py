"""What the planner and every worker know about a run: its criteria, protocol mode and
judges, rebuilt from the configuration stored with the run (never from a message). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.types import JudgeConfig
from rubrics import codec
from rubrics.grading import Criterion, Protocol, protocol
from rubrics.skills import SkillSet


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
