"""A validated run before anything is written: its inputs, judges and mode, its size, its
calls, and its estimates (exact, or counted and sampled)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any

import numpy as np
import numpy.typing as npt

from flask_eval.core.gcpause import paused_gc
from flask_eval.core.people import People
from flask_eval.core.types import JudgeConfig
from flask_eval.producer.context import RunContext
from flask_eval.producer.estimate import (
    AnswerCache,
    CallTexts,
    Estimator,
    instance_texts,
)
from flask_eval.producer.inputs import Inputs
from flask_eval.producer.pairs import planned_pairwise_rows
from flask_eval.producer.plan import Judging, new_calls, planned_calls
from flask_eval.producer.sampling import CallSampler
from flask_eval.rubrics import codec
from flask_eval.rubrics.kinds import JUDGMENT
from flask_eval.rubrics.skills import SkillSet
from flask_eval.storage.planning import ledger_subjects
from flask_eval.storage.records import PlannedCall

__all__ = ["Plan"]


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
    #: the people who rate beside the judges (``human/...`` entries; None: none)
    people: People | None = None
    #: a probe run's probes (the stored configuration's ``probes``; None: not one)
    probes: dict[str, Any] | None = None

    @cached_property
    def fingerprint(self) -> str:
        """A digest of everything that decides what is judged (``producer.plan``)."""
        return self.digest if isinstance(self.digest, str) else self.digest()

    def fingerprint_soon(self) -> str | Callable[[], str]:
        """The fingerprint, or a function that returns it from a thread computing it from
        now on (a named run's, not asked yet): it reads every response again while the
        ledger loads, which is PostgreSQL's work more than this process's (3 s of a
        million-judgment run's 20 s; docs/design/producer-scale.md)."""
        if isinstance(self.digest, str) or "fingerprint" in self.__dict__:
            return self.fingerprint
        done: Future[str] = Future()

        def compute() -> None:
            try:
                done.set_result(self.fingerprint)
            except BaseException as exc:  # raised where the result is asked for
                done.set_exception(exc)

        # a daemon: a write that fails (or Ctrl-C) does not wait for it to finish
        threading.Thread(target=compute, name="fingerprint", daemon=True).start()
        return done.result

    def judging(self) -> Judging:
        """How the plan's items are judged (what its fingerprint and stored
        configuration say of it)."""
        return Judging(
            self.mode,
            codec.to_data(self.skillset),
            self.reference,
            self.pairwise,
            self.pairs or (),
            self.kind,
            self.kind_options,
            self.samples,
            self.probes,
        )

    def context(self) -> RunContext:
        judges = {j.name: j for j in self.judges}
        return RunContext(
            self.skillset,
            judges,
            self.mode,
            self.reference,
            bool(self.pairwise),
            self.kind,
            self.kind_options,
        )

    def planned_calls(self) -> list[PlannedCall]:
        return planned_calls(self.inputs, self.context(), self.pairs)

    def new_calls(self, ledger: range) -> Iterator[PlannedCall]:
        """The calls of the ledger just written for this plan, whose rows took the ids
        ``ledger`` (``RunInfo.ledger``)."""
        judges = [j.name for j in self.judges]
        subjects = ledger_subjects(
            self.inputs.instances,
            self.inputs.response_sets,
            judges,
            self.pairs,
            about_instances=self.inputs.about_instances,
        )
        return new_calls(subjects, ledger, self.context())

    def size(self) -> int:
        """The judgments of the plan (rows of the ledger)."""
        if self.pairs is not None:
            return len(
                planned_pairwise_rows(self.inputs, self.pairs, [j.name for j in self.judges])
            )
        skills = {i.id: len(i.skills) for i in self.inputs.instances}
        per_judge = sum(skills.get(i, 0) for _, ids in self.inputs.subjects() for i in ids)
        return per_judge * len(self.judges)

    def estimator(self, cache: AnswerCache | None = None) -> Estimator:
        return Estimator.of_inputs(self.inputs, self.context(), cache)

    def sampled(self, **options: int) -> CallSampler:
        """Every planned call counted, a sample of them rendered (``producer.sampling``):
        an absolute run's calls are counted from its responses' lengths (kept by their
        validation), and only the sampled responses are read again. ``options``: the
        sampler's (size, seed, budget)."""
        context = self.context()
        if (
            self.pairs is not None
            or self.kind != JUDGMENT
            or any(i.history for i in self.inputs.instances)
        ):  # two responses, another kind's texts, or conversations (each response's
            # earlier answers, which the counts by length do not know): held in memory
            return CallSampler.of_estimator(self.estimator(), self.planned_calls(), **options)
        sampler = CallSampler(context, **options)
        with paused_gc():  # millions of calls counted, no cycles (core.gcpause)
            _count_calls(sampler, self.inputs, context)
            _fill_texts(sampler, self.inputs)
        return sampler


def _count_calls(sampler: CallSampler, inputs: Inputs, context: RunContext) -> None:
    """Count every call of an absolute run (instances x responses x judges) from the
    lengths of the responses (their validation's): no file is read. A file's calls are
    counted as one block (:meth:`CallSampler.count_block`), from a table of every
    instance's calls: its judges' parts, each with the characters of its texts but the
    response."""
    instances = inputs.instances
    index = {i.id: n for n, i in enumerate(instances)}
    keys: list[tuple[str, ...]] = []
    slot: dict[tuple[str, ...], int] = {}
    table: list[_Row] = []  # every instance's calls, one after another
    first, many = np.zeros(len(instances), np.intp), np.zeros(len(instances), np.intp)
    splits: dict[tuple[str, tuple[str, ...]], list[list[str]]] = {}
    for n, i in enumerate(instances):
        first[n] = len(table)
        texts = instance_texts(i)
        for judge in context.judges:
            split = splits.get((judge, i.skills))
            if split is None:
                split = splits[(judge, i.skills)] = context.protocol_for(judge).calls(
                    list(i.skills)
                )
            for part in split:
                criteria = tuple(part)
                key = (judge, *criteria)
                k = slot.setdefault(key, len(keys))
                if k == len(keys):
                    keys.append(key)
                table.append((k, sampler.chars(texts, criteria), judge, criteria, texts))
        many[n] = len(table) - first[n]
    key_of_call = np.array([t[0] for t in table], dtype=np.intp)
    base = np.array([t[1] for t in table], dtype=np.int64)
    for rs in inputs.response_sets:
        answered = list(rs.sizes())
        where = np.fromiter((index[q] for q, _ in answered), np.intp, len(answered))
        lengths = np.fromiter((n for _, n in answered), np.int64, len(answered))
        counts = many[where]  # calls per response
        response = np.repeat(np.arange(len(answered)), counts)
        # each call's row of the table: its response's instance's first, then the next
        flat = np.repeat(first[where] - np.cumsum(counts) + counts, counts) + np.arange(
            len(response)
        )

        make = partial(_call, table, rs.model, answered, response, flat)
        sampler.count_block(keys, key_of_call[flat], base[flat] + lengths[response], make)


#: a row of the table of calls: (key's slot, characters but the response's, judge,
#: criteria, the instance's texts with an empty response)
_Row = tuple[int, int, str, tuple[str, ...], CallTexts]


def _call(
    table: list[_Row],
    model: str,
    answered: list[tuple[str, int]],
    response: npt.NDArray[np.intp],
    flat: npt.NDArray[np.intp],
    j: int,
) -> tuple[PlannedCall, CallTexts]:
    """The ``j``-th call of a block (the sample took it), with its instance's texts."""
    _, _, judge, criteria, texts = table[int(flat[j])]
    return PlannedCall([], model, answered[int(response[j])][0], judge, list(criteria)), texts


def _fill_texts(sampler: CallSampler, inputs: Inputs) -> None:
    """The sampled calls' responses, read again for them alone."""
    wanted: dict[str, set[str]] = {}
    for call in sampler.sampled_calls():
        wanted.setdefault(call.model, set()).add(call.instance_id)
    read = {
        rs.model: rs.texts(wanted[rs.model]) for rs in inputs.response_sets if rs.model in wanted
    }
    sampler.fill(lambda call, texts: texts._replace(response=read[call.model][call.instance_id]))
