"""The kinds of work the ledger and the executor do (docs/design/job-kinds.md). Pure.

A run does one kind of work: **judgment** (a judge scores responses: the grading
protocols of ``rubrics.grading``), **generation** (a model under test answers the
instances: ``rubrics.generation``) or **annotation** (a model labels instances with
FLASK's metadata: ``rubrics.annotation``). Every kind shares the ledger's rows, leases,
the answer cache, budgets, retries, halts, write-behind, provider batches and costs; what
differs is what a kind's protocol renders and reads. A kind other than judgment reads a
*value* per row (``Reading.values``: the response, the labels as JSON), kept in
``judgment.value``.

A new kind is one module (its protocol, a subclass of ``rubrics.grading.Protocol`` with
its ``kind``, its criteria as a ``SkillSet``) and one line in :data:`KINDS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from flask_eval.rubrics.grading import Protocol
from flask_eval.rubrics.skills import SkillSet

JUDGMENT = "judgment"
GENERATION = "generation"
ANNOTATION = "annotation"


@dataclass(frozen=True)
class Kind:
    """What a kind of work provides: its protocol (made from the run's mode and the
    kind's options stored with the run) and its criteria (the rows of one subject)."""

    name: str
    protocol: Callable[[str, Mapping[str, Any]], Protocol]
    criteria: Callable[[Mapping[str, Any]], SkillSet]
    #: what one row holds once done, for messages ("responses", "labels")
    noun: str


def _generation_protocol(mode: str, options: Mapping[str, Any]) -> Protocol:
    from flask_eval.rubrics.generation import GenerationProtocol

    return GenerationProtocol(mode)


def _generation_criteria(options: Mapping[str, Any]) -> SkillSet:
    from flask_eval.rubrics.generation import response_skillset

    return response_skillset()


def _annotation_protocol(mode: str, options: Mapping[str, Any]) -> Protocol:
    from flask_eval.rubrics.annotation import AnnotationProtocol, LabelSpace

    labels = options.get("labels")
    return AnnotationProtocol(mode, LabelSpace.from_data(labels) if labels else None)


def _annotation_criteria(options: Mapping[str, Any]) -> SkillSet:
    from flask_eval.rubrics.annotation import facet_skillset

    return facet_skillset()


KINDS: dict[str, Kind] = {
    GENERATION: Kind(GENERATION, _generation_protocol, _generation_criteria, "responses"),
    ANNOTATION: Kind(ANNOTATION, _annotation_protocol, _annotation_criteria, "labels"),
}


def kind(name: str) -> Kind:
    """The kind called ``name`` (KeyError naming the known ones; judgment is not in the
    table: its protocols are ``rubrics.grading.PROTOCOLS``)."""
    try:
        return KINDS[name]
    except KeyError:
        raise KeyError(f"unknown kind of work {name!r}; known: {', '.join(KINDS)}") from None
