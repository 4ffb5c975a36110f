"""What the planner and every worker know about a run: its criteria, protocol mode, judges
(each with its grading protocol) and whether judges see the reference answer, rebuilt
from the configuration stored with the run (never from a message). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from flask_eval.core.conversations import Turn
from flask_eval.core.images import Image
from flask_eval.core.probes import reversed_criteria
from flask_eval.core.stored import StoredConfig
from flask_eval.core.types import InstanceRubric, JudgeConfig
from flask_eval.rubrics import codec, kinds
from flask_eval.rubrics.grading import DEFAULT_PROTOCOL, Criterion, Protocol, Subject, protocol
from flask_eval.rubrics.images import with_images
from flask_eval.rubrics.kinds import JUDGMENT
from flask_eval.rubrics.pairwise import pairwise_protocol
from flask_eval.rubrics.prompt import Message
from flask_eval.rubrics.skills import Skill, SkillSet


@dataclass(frozen=True)
class Conversation:
    """What a judge is shown besides one turn's texts: the turns before it (the user's,
    the answers of the judged model and, pairwise, of the second) and the instruction's
    images, bytes included."""

    history: tuple[Turn, ...] = ()
    answers: tuple[str, ...] = ()
    answers_b: tuple[str, ...] = ()
    images: tuple[Image, ...] = ()


NO_CONVERSATION = Conversation()

#: the ability an instance's own rubric is filed under when no global criterion has its name
INSTANCE_ABILITY = "Instance rubric"

_NO_RUBRICS: Mapping[str, InstanceRubric] = MappingProxyType({})


@dataclass(frozen=True)
class RunContext:
    """A run's criteria, protocol mode, judge configurations and reference policy, as
    stored with the run (every worker rebuilds it from the ledger, never from a message).

    ``reference`` False makes the run reference-free: no judge is shown the reference
    answer (``--no-reference``)."""

    skillset: SkillSet
    judges: Mapping[str, JudgeConfig]
    mode: str = "instance"
    reference: bool = True
    #: a pairwise run compares two responses per call (the run config's "pairwise")
    pairwise: bool = False
    #: the kind of work (``rubrics.kinds``): judgment, generation or annotation, and the
    #: kind's options as stored with the run (an annotation's label space)
    kind: str = JUDGMENT
    options: Mapping[str, Any] = field(default_factory=dict)
    _protocols: dict[str, Protocol] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_config(cls, config: StoredConfig) -> RunContext:
        return cls(
            codec.from_data(config.skills),
            {j.name: j for j in config.judges},
            config.mode,
            config.reference,
            config.pairwise is not None,
            config.kind,
            dict(config.kind_options),
        )

    def protocol_for(self, judge: str) -> Protocol:
        """The grading protocol this run asks ``judge`` for (its judges-file ``protocol``,
        else ours; its pairwise form in a pairwise run); KeyError for an unknown protocol
        name, or one without a pairwise form in a pairwise run."""
        config = self.judges.get(judge)
        name = (config.protocol if config is not None else None) or DEFAULT_PROTOCOL
        if self.kind != JUDGMENT:  # one protocol per kind, for every model of the run
            name = f"kind:{self.kind}"
        known = self._protocols.get(name)
        if known is None and self.kind != JUDGMENT:
            known = self._protocols[name] = kinds.kind(self.kind).protocol(self.mode, self.options)
        if known is None:
            make = pairwise_protocol if self.pairwise else protocol
            known = self._protocols[name] = make(name, self.mode)
        return known

    def criterion(
        self, name: str, rubrics: Mapping[str, InstanceRubric] = _NO_RUBRICS
    ) -> Criterion:
        """The criterion ``name`` as one instance sees it: the instance's own rubric for it
        if it has one (its criteria text, or the global criterion's when it gives none),
        else the run's criterion of that name (KeyError if there is none)."""
        own = rubrics.get(name)
        if own is None:
            return self.skillset.get(name)
        base = self.skillset.get(name) if name in self.skillset else None
        return Skill(
            name=name,
            ability=base.ability if base is not None else INSTANCE_ABILITY,
            criterion=own.criteria or (base.criterion if base is not None else name),
            rubric=dict(own.scores),
            allow_na=base.allow_na if base is not None else False,
        )

    def subject(
        self,
        instruction: str,
        reference: str,
        response: str,
        system_prompt: str = "",
        response_b: str | None = None,
        model: str = "",
        conversation: Conversation = NO_CONVERSATION,
    ) -> Subject:
        """What a judge is shown of one response, or of two in a pairwise run (no
        reference in a reference-free run); ``model`` is the row's model (a judge probe's
        ``order`` twin is shown its criteria the other way round: ``core.probes``);
        ``conversation`` the turns before the judged one and the instruction's images."""
        history = conversation.history
        if not self.reference:
            history = tuple(Turn(t.user) for t in history)
        return Subject(
            instruction=instruction,
            reference=reference if self.reference else "",
            response=response,
            system_prompt=system_prompt,
            response_b=response_b if self.pairwise else None,
            reverse_criteria=reversed_criteria(model),
            history=history,
            answers=conversation.answers,
            answers_b=conversation.answers_b if self.pairwise else (),
            images=conversation.images,
        )

    def prompt(
        self, judge: str, subject: Subject, criteria: Sequence[Criterion]
    ) -> tuple[list[Message], dict[str, Any] | None]:
        """The messages asking ``judge`` to judge ``subject`` on ``criteria``, and the JSON
        schema its answer must follow (None: free text): the one rendering of a call, for
        the workers and for the estimates (whose cache lookups need the same keys).
        The instruction's images are placed after the shared prefix, in the user message
        (``rubrics.images.with_images``), whatever the protocol and its form."""
        protocol = self.protocol_for(judge)
        config = self.judges.get(judge)
        schema = protocol.response_schema(criteria) if config and config.structured else None
        if schema is not None:
            return with_images(
                protocol.render_structured(subject, criteria), subject.images
            ), schema
        return with_images(protocol.render(subject, criteria), subject.images), None
