"""The vocabulary of a report: its dimensions, their keys, and a row (pure).

A *judgment* is one (model, judge, instance, skill) that is done (a score 1..5, or N/A)
or failed; pending and running ones are ignored. Means are **micro-averages** over
(instance, skill) score pairs, not means of per-instance means; N/A and failed judgments
never enter a mean and are counted in ``n_na`` and ``n_failed``. Which judgments count
toward which (dimension, key) is decided in one place, ``report.breakdown``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The report dimensions, in row order.
OVERALL = "overall"
SKILL = "skill"
ABILITY = "ability"
DOMAIN = "domain"
DIFFICULTY = "difficulty"
SKILL_DIFFICULTY = "skill_difficulty"
DIMENSIONS: tuple[str, ...] = (OVERALL, SKILL, ABILITY, DOMAIN, DIFFICULTY, SKILL_DIFFICULTY)
#: BiGGen Bench's groups of instances: dimensions of a report whose instances carry them.
CAPABILITY = "capability"
TASK = "task"
#: A conversation's turn (key ``"1"``, ``"2"``, ...): a dimension of a report whose
#: instances are turns of conversations (MT-Bench's category is their capability).
TURN = "turn"

#: The key of the ``overall`` row that pools every judgment (FLASK's overall).
OVERALL_KEY = "all"
#: The key of the ``overall`` row that is the mean of the capability means (BiGGen's
#: overall), present only when instances carry capabilities.
BIGGEN_KEY = "biggen"
#: How people read that row, and what it is.
BIGGEN_LABEL = "overall (BiGGen)"
BIGGEN_RULE = "overall = mean of capability means, as BiGGen Bench's report computes it"

#: BiGGen Bench's capabilities in the order its report lists them (``make_report.py``).
BIGGEN_CAPABILITIES: tuple[str, ...] = (
    "grounding",
    "instruction_following",
    "planning",
    "reasoning",
    "refinement",
    "safety",
    "theory_of_mind",
    "tool_usage",
    "multilingual",
)

#: Separator of ``skill_difficulty`` keys: ``f"{skill}|{level}"``.
KEY_SEP = "|"


@dataclass(frozen=True)
class Row:
    """One line of a report: a (model, judge, dimension, key) and its statistics."""

    model: str
    judge: str
    dimension: str
    key: str
    mean: float | None
    n: int
    n_na: int
    n_failed: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "judge": self.judge,
            "dimension": self.dimension,
            "key": self.key,
            "mean": self.mean,
            "n": self.n,
            "n_na": self.n_na,
            "n_failed": self.n_failed,
        }
