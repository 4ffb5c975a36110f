"""The kinds of work the ledger and the executor do (docs/design/job-kinds.md). Pure.

A run does one kind of work: **judgment** (a judge scores responses: the grading
protocols of ``rubrics.grading``), or one of the plug-ins of :data:`PLUGINS`:
**generation** (a model under test answers the instances: ``rubrics.generation``),
**annotation** (a model labels instances with FLASK's metadata: ``rubrics.annotation``),
... Every kind shares the ledger's rows, leases, the answer cache, budgets, retries,
halts, write-behind, provider batches and costs; what differs is what its
:class:`~rubrics.kind.Kind` says. A kind other than judgment reads a *value* per row
(``Reading.values``: a response, labels as JSON, ...), kept in ``judgment.value``.

A new kind is one module (its protocol, a subclass of ``rubrics.grading.Protocol`` with
its ``kind``, its criteria as a ``SkillSet``, and its ``KIND``, a
:class:`~rubrics.kind.Kind`) and one line in :data:`PLUGINS`.

A run's stored configuration names its kind and the kind's options
(``core.stored.StoredConfig.kind``, ``kind_options``); :func:`of` gives the kind of a name.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

from flask_eval.rubrics.grading import DEFAULT_PROTOCOL, Protocol, protocol
from flask_eval.rubrics.kind import RESPONSE, SCORE, Kind, Words
from flask_eval.rubrics.skills import SkillSet

JUDGMENT = "judgment"
GENERATION = "generation"
ANNOTATION = "annotation"

#: the kinds of work other than judgment: name -> the module defining it (as ``KIND``)
PLUGINS: Mapping[str, str] = {
    GENERATION: "flask_eval.rubrics.generation",
    ANNOTATION: "flask_eval.rubrics.annotation",
    "critique": "flask_eval.rubrics.critique",
}


def _judgment_protocol(mode: str, options: Mapping[str, Any]) -> Protocol:
    return protocol(DEFAULT_PROTOCOL, mode)


def _judgment_criteria(options: Mapping[str, Any]) -> SkillSet:
    raise ValueError("a judgment's criteria are its run's own (run --criteria)")


#: judging: each judge's protocol is its own (``RunContext.protocol_for``), its criteria
#: are the run's; not a plug-in, but described alike
JUDGING = Kind(
    JUDGMENT,
    _judgment_protocol,
    _judgment_criteria,
    Words(worker="judge", holds="scores", doing="judging"),
    summary="Validate inputs, plan the judgments and judge them.",
    subject=RESPONSE,
    answer=SCORE,
    command="run",
)


class _Registry(Mapping[str, Kind]):
    """:data:`PLUGINS`, each kind's module imported when the kind is first asked for."""

    def __init__(self, modules: Mapping[str, str]) -> None:
        self._modules = modules
        self._loaded: dict[str, Kind] = {}

    def __getitem__(self, name: str) -> Kind:
        found = self._loaded.get(name)
        if found is None:
            made = importlib.import_module(self._modules[name]).KIND
            if not isinstance(made, Kind) or made.name != name:
                raise TypeError(f"{self._modules[name]}.KIND is not the kind {name!r}")
            found = self._loaded[name] = made
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __len__(self) -> int:
        return len(self._modules)


#: the plug-in kinds by name (judgment is :data:`JUDGING`)
KINDS: Mapping[str, Kind] = _Registry(PLUGINS)


def kind(name: str) -> Kind:
    """The plug-in kind called ``name`` (KeyError naming the known ones; judgment is not
    in the table: its protocols are ``rubrics.grading.PROTOCOLS``)."""
    try:
        return KINDS[name]
    except KeyError:
        raise KeyError(f"unknown kind of work {name!r}; known: {', '.join(KINDS)}") from None


def of(name: str) -> Kind:
    """The kind called ``name``, judgment included."""
    return JUDGING if name == JUDGMENT else kind(name)


def known(name: str) -> bool:
    return name == JUDGMENT or name in KINDS
