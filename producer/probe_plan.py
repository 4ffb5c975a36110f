"""A probe run's plan: the twins of each response judged beside the originals
(``core.probes``, docs/design/probes.md).

Each probe that needs one makes, of every response of the run's sample, a twin: a model
of its own, ``MODEL~VARIANT``, whose responses are the originals transformed
(``rubrics.probes``). Absolute grading then plans the twins' rows as any model's; a
pairwise run plans each twin against the other model of each of its comparisons, in both
orders: ``(A~v, B)`` and ``(B, A~v)``. So the ledger, the answer cache, budgets, batches
and ``--dry-run`` treat twins as they treat any response, and a twin is told apart by its
name only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from flask_eval.core import probes
from flask_eval.core.errors import InputError
from flask_eval.core.limits import MAX_MODEL_NAME
from flask_eval.core.text import clip
from flask_eval.core.types import JudgeConfig, Response, ResponseSet
from flask_eval.producer.inputs import Inputs
from flask_eval.rubrics import probes as transforms
from flask_eval.rubrics.grading import DEFAULT_PROTOCOL, protocol

__all__ = ["ProbePlan", "parse_families", "plan_probes"]

#: a family's name: as a model's
_FAMILY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: the probes ``flask-eval probe`` runs when none is named
ALL = "all"
DEFAULT = ("length", probes.STYLE, probes.ORDER, "inject", probes.SWAP, probes.SELF)


@dataclass(frozen=True)
class ProbePlan:
    """The twins' inputs and pairs, and what the run's stored configuration says of its
    probes (``"probes"``): the variants planned, the probes named, the families, and why
    a probe named by default was left out."""

    inputs: Inputs
    pairs: tuple[tuple[str, str], ...] | None
    config: dict[str, Any] = field(default_factory=dict)


def parse_families(entries: Sequence[str], names: Sequence[str]) -> dict[str, str]:
    """``NAME=FAMILY`` entries (``--family``) as a mapping; InputError (one line) for an
    entry without ``=``, a name that is neither a model nor a judge of the run
    (``names``), a family that is not a name, or a name given twice."""
    out: dict[str, str] = {}
    known = set(names)
    for entry in entries:
        name, sep, family = entry.partition("=")
        if not sep or not name or not family:
            raise InputError(f"--family {clip(entry)}: expected NAME=FAMILY")
        if name not in known:
            raise InputError(
                f"--family {clip(entry)}: {clip(name)} is neither a model nor a judge of the run"
            )
        if _FAMILY.fullmatch(family) is None:
            raise InputError(
                f"--family {clip(entry)}: a family is letters, digits, '.', '_' or '-'"
            )
        if name in out:
            raise InputError(f"--family {clip(name)} is given twice")
        out[name] = family
    return out


def _variants(
    named: Sequence[str], explicit: bool, pairwise: bool, multi_criteria: bool
) -> tuple[tuple[str, ...], dict[str, str]]:
    """The variants of the probes ``named`` and the probes left out, with why (a probe
    named explicitly that cannot apply is an InputError)."""
    left: dict[str, str] = {}
    wanted: list[str] = []
    for name in named:
        why = None
        if name == probes.SWAP and not pairwise:
            why = "the order swap probes a pairwise run (--pairwise)"
        elif name == probes.ORDER and (pairwise or not multi_criteria):
            why = "the criteria's order needs calls that ask for two or more criteria"
        if why is not None:
            if explicit:
                raise InputError(f"--probes {name}: {why}")
            left[name] = why
            continue
        wanted.append(name)
    try:
        return probes.expand(tuple(wanted)), left
    except ValueError as exc:
        raise InputError(f"--probes: {exc}") from None


def _twin(rs: ResponseSet, variant: str, injection: str) -> ResponseSet:
    """``rs``'s twin of ``variant``: its responses transformed (``order``: as they are)."""
    name = probes.twin_name(rs.model, variant)
    percent = probes.length_percent(variant)

    def text(t: str) -> str:
        if percent is not None:
            return transforms.pad(t, percent)
        if variant == probes.STYLE:
            return transforms.restyle(t)
        if variant == probes.INJECT_SCORE:
            return transforms.inject(t, injection)
        if variant == probes.INJECT_INSTRUCTION:
            return transforms.inject(t, transforms.INSTRUCTION)
        return t

    responses = tuple(Response(name, r.instance_id, text(r.text), r.line) for r in rs.responses)
    return ResponseSet(name, f"{rs.path}#{variant}", responses)


def _groups(judge: JudgeConfig, mode: str) -> bool:
    """Whether ``judge``'s calls ask for two or more criteria at once (in ``mode``)."""
    asked = protocol(judge.protocol or DEFAULT_PROTOCOL, mode).calls(["a", "b"])
    return any(len(call) > 1 for call in asked)


def _injection(judges: Sequence[JudgeConfig], pairwise: bool) -> str:
    """The claim of the top score in the dialect of each protocol the run's judges read
    (one line each, in the judges' order)."""
    protocols = dict.fromkeys(j.protocol or DEFAULT_PROTOCOL for j in judges)
    return "\n".join(transforms.injection_score(p, pairwise) for p in protocols)


def plan_probes(
    inputs: Inputs,
    pairs: tuple[tuple[str, str], ...] | None,
    judges: Sequence[JudgeConfig],
    named: Sequence[str],
    families: dict[str, str],
    mode: str,
) -> ProbePlan:
    """The probe run's inputs (the originals and their twins) and pairs. ``named``: the
    probes asked for (``("all",)``: every probe of :data:`DEFAULT` that applies)."""
    explicit = tuple(named) != (ALL,)
    named = () if not explicit else named
    pairwise = pairs is not None
    multi = any(len(i.skills) > 1 for i in inputs.instances) and any(
        _groups(j, mode) for j in judges
    )
    variants, left = _variants(named or DEFAULT, explicit, pairwise, multi)
    judge_families = {j.name: families[j.name] for j in judges if j.name in families}
    if probes.SELF in (named or DEFAULT):
        models = {rs.model for rs in inputs.response_sets}
        declared = {families[m] for m in models if m in families}
        if not judge_families or not declared:
            why = "self-preference needs --family for a judge and for the models"
            if explicit:
                raise InputError(f"--probes self: {why}")
            left[probes.SELF] = why
    for rs in inputs.response_sets:
        longest = max((probes.twin_name(rs.model, v) for v in variants), key=len, default="")
        if len(longest) > MAX_MODEL_NAME:
            raise InputError(
                f"model {clip(rs.model)}: its probe twin {clip(longest)} is longer than "
                f"{MAX_MODEL_NAME} characters; give the model a shorter name"
            )
    injection = _injection(judges, pairwise)
    twins = tuple(_twin(rs, v, injection) for v in variants for rs in inputs.response_sets)
    new_pairs = pairs
    if pairs is not None:
        extra = [
            pair
            for v in variants
            for first, second in pairs
            for pair in (
                (probes.twin_name(first, v), second),
                (second, probes.twin_name(first, v)),
            )
        ]
        new_pairs = (*pairs, *dict.fromkeys(extra))
    config = {
        "variants": list(variants),
        "probes": [n for n in (named or DEFAULT) if n not in left],
        "families": dict(sorted(families.items())),
        "left_out": left,
    }
    return ProbePlan(
        Inputs(inputs.instances, (*inputs.response_sets, *twins), inputs.about_instances),
        new_pairs,
        config,
    )
