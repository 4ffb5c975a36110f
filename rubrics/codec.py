"""A SkillSet as plain JSON data, so a run carries its rubrics to every worker."""

from __future__ import annotations

from typing import Any

from flask_eval.rubrics.skills import Skill, SkillSet


def to_data(skillset: SkillSet) -> list[dict[str, Any]]:
    return [
        {
            "name": s.name,
            "ability": s.ability,
            "criterion": s.criterion,
            "rubric": {str(k): v for k, v in s.rubric.items()},
            "allow_na": s.allow_na,
        }
        for s in skillset
    ]


def from_data(data: list[dict[str, Any]]) -> SkillSet:
    return SkillSet(
        tuple(
            Skill(
                name=d["name"],
                ability=d["ability"],
                criterion=d["criterion"],
                rubric={int(k): v for k, v in d["rubric"].items()},
                allow_na=bool(d["allow_na"]),
            )
            for d in data
        )
    )
