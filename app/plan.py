"""A validated run before anything is written: its inputs, judges and mode, its size, its
calls, and its estimates (exact, or counted and sampled)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flask_eval.core.types import JudgeConfig
from flask_eval.producer.context import RunContext
from flask_eval.producer.estimate import AnswerCache, CallTexts, Estimator, planned_calls
from flask_eval.producer.inputs import Inputs
from flask_eval.producer.pairs import planned_pairwise_rows
from flask_eval.producer.sampling import CallSampler
from flask_eval.rubrics.kinds import JUDGMENT
from flask_eval.rubrics.skills import SkillSet
from flask_eval.storage.records import PlannedCall

__all__ = ["Plan"]


@dataclass(frozen=True)
class Plan:
    inputs: Inputs
    skillset: SkillSet
    judges: tuple[JudgeConfig, ...]
    mode: str
    name: str
    fingerprint: str
    instances_path: str
    reference: bool = True
    #: a pairwise run: its plan (the run config's "pairwise") and ordered model pairs
    pairwise: dict[str, Any] | None = None
    pairs: tuple[tuple[str, str], ...] | None = None
    #: the kind of work (rubrics/kinds.py) and its options (an annotation's label space)
    kind: str = JUDGMENT
    kind_options: dict[str, Any] = field(default_factory=dict)
    #: judgments per judge and item (``--samples``): the judges are its clones (``sampled``)
    samples: int = 1

    def context(self) -> RunContext:
        judges = {j.name: j for j in self.judges}
        return RunContext(self.skillset, judges, self.mode, self.reference, bool(self.pairwise),
                          self.kind, self.kind_options)  # fmt: skip

    def planned_calls(self) -> list[PlannedCall]:
        return planned_calls(self.inputs, self.context(), self.pairs)

    def size(self) -> int:
        """The judgments of the plan (rows of the ledger)."""
        if self.pairs is not None:
            return len(
                planned_pairwise_rows(self.inputs, self.pairs, [j.name for j in self.judges])
            )
        skills = {i.id: len(i.skills) for i in self.inputs.instances}
        per_judge = sum(skills.get(i, 0) for rs in self.inputs.response_sets
                        for i in rs.instance_ids())  # fmt: skip
        return per_judge * len(self.judges)

    def estimator(self, cache: AnswerCache | None = None) -> Estimator:
        return Estimator.of_inputs(self.inputs, self.context(), cache)

    def sampled(self) -> CallSampler:
        """Every planned call counted, a sample of them rendered (``producer.sampling``):
        an absolute run's responses are read once, in a stream, and none is held."""
        context = self.context()
        if self.pairs is not None or self.kind != JUDGMENT:  # two responses, or another
            # kind's texts: held in memory
            return CallSampler.of_estimator(self.estimator(), self.planned_calls())
        sampler = CallSampler(context)
        instances = {i.id: i for i in self.inputs.instances}
        splits: dict[tuple[str, tuple[str, ...]], list[list[str]]] = {}
        for rs in self.inputs.response_sets:  # each file read once, whatever the judges
            for r in rs.responses:
                i = instances[r.instance_id]
                texts = CallTexts(i.instruction, i.answer, r.text, None, i.system_prompt,
                                  i.rubrics)  # fmt: skip
                for judge in context.judges:
                    split = splits.get((judge, i.skills))
                    if split is None:
                        split = context.protocol_for(judge).calls(list(i.skills))
                        splits[(judge, i.skills)] = split
                    for part in split:
                        sampler.add(PlannedCall([], r.model, i.id, judge, list(part)), texts)
        return sampler
