"""MT-Bench's own judging of conversations, when every judge of a run asks in the
`mt-bench` protocol (docs/design/protocols.md), as FastChat's ``gen_judgment.py`` judges
MT-Bench (Apache-2.0):

- **one overall rating per turn**: an absolute run without ``--criteria`` or
  ``--rubrics`` judges the conversations that name no criteria on the protocol's built-in
  criterion ``overall`` (:func:`rubrics.mtbench.overall_criterion`), one call per turn,
  instead of on each of FLASK's skills;
- **references for math, reasoning and coding only**: a conversation whose ``category``
  is another one is judged without a reference, as FastChat's single and pairwise judging
  show one only for these categories (``NEED_REF_CATS``), whatever the question file
  carries inline (MT-Bench's ``question.jsonl`` has inline references for some
  roleplay, extraction and STEM questions, which FastChat never shows). A conversation
  without a category keeps its references.

A run whose judges mix protocols, or whose instances are not conversations, is planned as
before. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from flask_eval.core.conversations import Turn
from flask_eval.core.types import Instance, JudgeConfig
from flask_eval.producer.inputs import Inputs
from flask_eval.rubrics.mtbench import MTBenchProtocol, overall_criterion
from flask_eval.rubrics.skills import SkillSet

#: the categories MT-Bench judges with a reference answer (FastChat's NEED_REF_CATS)
REFERENCE_CATEGORIES = frozenset({"math", "reasoning", "coding"})


def mtbench_judging(
    inputs: Inputs,
    skillset: SkillSet,
    judges: Sequence[JudgeConfig],
    *,
    pairwise: bool,
    own_criteria: bool,
) -> tuple[Inputs, SkillSet]:
    """``inputs`` and ``skillset`` as MT-Bench judges them (module docstring) when every
    judge in ``judges`` asks in the `mt-bench` protocol and the instances are turns of
    conversations; else unchanged. ``own_criteria``: the run has ``--criteria`` or
    ``--rubrics`` (then its criteria stay)."""
    instances = inputs.instances
    if (
        not judges
        or any(j.protocol != MTBenchProtocol.name for j in judges)
        or not instances
        or any(i.conversation is None for i in instances)
    ):
        return inputs, skillset
    judged = tuple(_without_reference(i) for i in instances)
    named = set(skillset.names)
    if not pairwise and not own_criteria and all(set(i.skills) == named for i in judged):
        overall = overall_criterion()
        skillset = SkillSet((overall,))
        judged = tuple(replace(i, skills=(overall.name,), rubrics={}) for i in judged)
    return replace(inputs, instances=judged), skillset


def _without_reference(instance: Instance) -> Instance:
    """``instance`` without references when MT-Bench judges its category without one."""
    if instance.capability is None or instance.capability in REFERENCE_CATEGORIES:
        return instance
    history = tuple(Turn(t.user, "") for t in instance.history)
    return replace(instance, answer="", history=history)
