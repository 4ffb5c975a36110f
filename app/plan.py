"""A validated run before anything is written: its inputs, judges and mode, its size, its
calls, and its estimates (exact, or counted and sampled)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from flask_eval.core.gcpause import paused_gc
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

#: an instance's call as :meth:`Plan.sampled` counts it
_Call = tuple[tuple[str, ...], Callable[[int], bool], str, tuple[str, ...], int, CallTexts]


@dataclass(frozen=True)
class Plan:
    inputs: Inputs
    skillset: SkillSet
    judges: tuple[JudgeConfig, ...]
    mode: str
    name: str
    #: the run's fingerprint, or how to compute it (when first asked: :attr:`fingerprint`)
    digest: str | Callable[[], str]
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

    @cached_property
    def fingerprint(self) -> str:
        """A digest of everything that decides what is judged (``producer.plan``)."""
        return self.digest if isinstance(self.digest, str) else self.digest()

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

    def sampled(self, **options: int) -> CallSampler:
        """Every planned call counted, a sample of them rendered (``producer.sampling``):
        an absolute run's calls are counted from its responses' lengths (kept by their
        validation), and only the sampled responses are read again. ``options``: the
        sampler's (size, seed, budget)."""
        context = self.context()
        if self.pairs is not None or self.kind != JUDGMENT:  # two responses, or another
            # kind's texts: held in memory
            return CallSampler.of_estimator(self.estimator(), self.planned_calls(), **options)
        sampler = CallSampler(context, **options)
        with paused_gc():  # millions of calls counted, no cycles (core.gcpause)
            _count_calls(sampler, self.inputs, context)
            _fill_texts(sampler, self.inputs)
        return sampler


def _count_calls(sampler: CallSampler, inputs: Inputs, context: RunContext) -> None:
    """Count every call of an absolute run (instances x responses x judges) from the
    lengths of the responses (their validation's): no file is read."""
    instances = {i.id: i for i in inputs.instances}
    # per instance, its calls for every judge: (key, its counter, judge, criteria, the
    # characters of its texts but the response, its texts with an empty response)
    calls_of: dict[str, list[_Call]] = {}
    splits: dict[tuple[str, tuple[str, ...]], list[list[str]]] = {}
    for rs in inputs.response_sets:
        model = rs.model
        for iid, length in rs.sizes():
            calls = calls_of.get(iid)
            if calls is None:
                calls = calls_of[iid] = []
                i = instances[iid]
                texts = CallTexts(i.instruction, i.answer, "", None, i.system_prompt, i.rubrics)
                for judge in context.judges:
                    split = splits.get((judge, i.skills))
                    if split is None:
                        split = context.protocol_for(judge).calls(list(i.skills))
                        splits[(judge, i.skills)] = split
                    for part in split:
                        criteria = tuple(part)
                        key = (judge, *criteria)
                        calls.append((key, sampler.counter(key), judge, criteria,
                                      sampler.chars(texts, criteria), texts))  # fmt: skip
            for key, count, judge, criteria, chars, texts in calls:
                if count(chars + length):
                    sampler.take(key, PlannedCall([], model, iid, judge, list(criteria)), texts,
                                 chars + length)  # fmt: skip


def _fill_texts(sampler: CallSampler, inputs: Inputs) -> None:
    """The sampled calls' responses, read again for them alone."""
    wanted: dict[str, set[str]] = {}
    for call in sampler.sampled_calls():
        wanted.setdefault(call.model, set()).add(call.instance_id)
    read = {rs.model: rs.texts(wanted[rs.model]) for rs in inputs.response_sets
            if rs.model in wanted}  # fmt: skip
    sampler.fill(lambda call, texts: texts._replace(response=read[call.model][call.instance_id]))
