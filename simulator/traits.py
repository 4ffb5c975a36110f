"""A simulated judge's traits and the specifications that set them (pure, no I/O)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

#: the ``--judge-traits`` keys, by the ``JudgeTraits`` field each one sets
TRAIT_KEYS = {
    "bias": "bias",
    "noise": "noise",
    "length": "length_preference",
    "position": "position_bias",
    "inject": "injection",
    "self": "self_preference",
    "family": "family",
    "jitter": "jitter",
}
#: the numeric traits and the range each one takes
_RANGES = {
    "bias": (-4.0, 4.0),
    "noise": (-4.0, 4.0),  # and >= 0 (its own message)
    "length_preference": (-4.0, 4.0),
    "position_bias": (-1.0, 1.0),
    "injection": (0.0, 1.0),
    "self_preference": (-4.0, 4.0),
    "jitter": (0.0, 4.0),
}
#: a model family's name: as a model's (letters, digits, ``.``, ``_``, ``-``)
_FAMILY_RE = re.compile(r"[A-Za-z0-9._-]+")
_SPEC = "NAME:bias=B,noise=S,length=P,position=B,inject=Q,self=S,family=F,jitter=S"


def check_family(family: object, what: str) -> str:
    """``family`` when it is a model family's name; ValueError naming ``what`` else."""
    if not isinstance(family, str) or not _FAMILY_RE.fullmatch(family):
        raise ValueError(
            f"{what} must be a name of letters, digits, '.', '_' and '-', got {family!r}"
        )
    return family


@dataclass(frozen=True)
class JudgeTraits:
    """How one simulated judge departs from an unbiased, noiseless one (all 0: it does
    not). A score is the response's level plus the judge's -1/0/+1 nudge plus ``bias``
    plus Gaussian noise of standard deviation ``noise`` plus ``length_preference`` times
    log2(the response's words / 100) plus ``self_preference`` when the response's model
    family (its signature's ``by FAMILY``) is the judge's ``family``, then rounded
    stochastically (the floor, plus one with probability the fraction, so the expected
    score is kept) and clamped to 1..5 (``simulator.quality.judged_score``). In a
    pairwise comparison the same per-response utilities decide (the bias cancels): a
    judge that prefers length favours the longer response.

    ``injection``: the probability that the judge grants what a response carrying an
    injection (``rubrics.probes.carries_injection``, raw or neutralized) claims: the top
    score on every criterion, or the win in a comparison. ``position_bias`` (pairwise,
    -1..1): the probability that a verdict goes to the response shown first (positive)
    or second (negative) whatever the responses, drawn for each order on its own.

    ``jitter``: Gaussian noise of that standard deviation drawn for every distinct
    request (keyed on its whole prompt), as sampling at a temperature above 0 varies a
    real judge's answers from call to call: unlike ``noise``, which is a function of the
    content, a probe's twin draws it anew, so an unbiased judge's twins differ from
    their originals by chance alone."""

    bias: float = 0
    noise: float = 0
    length_preference: float = 0
    position_bias: float = 0
    injection: float = 0
    self_preference: float = 0
    family: str | None = None
    jitter: float = 0

    def __post_init__(self) -> None:
        for name, (low, high) in _RANGES.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{name} must be a number, got {value!r}")
            if not (math.isfinite(value) and low <= value <= high):
                raise ValueError(f"{name} must be in [{low:g}, {high:g}], got {value}")
        if self.noise < 0:
            raise ValueError(f"noise must be >= 0, got {self.noise}")
        if self.family is not None:
            check_family(self.family, "family")

    @property
    def neutral(self) -> bool:
        """Whether these traits change nothing (every number 0)."""
        return all(getattr(self, name) == 0 for name in _RANGES)


NEUTRAL = JudgeTraits()


def parse_judge_traits(specs: Iterable[str]) -> dict[str, JudgeTraits]:
    """``NAME:bias=B,noise=S,length=P,position=B,inject=Q,self=S,family=F``
    specifications (``--judge-traits``; keys optional, each at most once; ``*`` as NAME:
    every judge not named) as ``SimConfig.judges``; ValueError naming the first one that
    is not such. The name is everything before the last ``:``, so a name may hold one."""
    judges: dict[str, JudgeTraits] = {}
    for spec in specs:
        name, sep, body = spec.rpartition(":")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"expected {_SPEC}, got {spec!r}")
        values: dict[str, float | str] = {}
        for item in filter(None, (x.strip() for x in body.split(","))):
            key, eq, value = item.partition("=")
            field_name = TRAIT_KEYS.get(key.strip())
            if not eq or field_name is None:
                keys = ", ".join(f"{k}=" for k in TRAIT_KEYS)
                raise ValueError(f"{spec!r}: expected one of {keys} got {item!r}")
            if field_name in values:
                raise ValueError(f"{spec!r}: {key.strip()} is given twice")
            if field_name == "family":
                values[field_name] = value.strip()
                continue
            try:
                values[field_name] = float(value)
            except ValueError:
                raise ValueError(f"{spec!r}: {key.strip()} must be a number") from None
        if name in judges:
            raise ValueError(f"judge {name!r} is given twice")
        try:
            judges[name] = JudgeTraits(**values)  # type: ignore[arg-type]
        except ValueError as exc:
            raise ValueError(f"{spec!r}: {exc}") from None
    return judges


def parse_model_families(specs: Iterable[str]) -> dict[str, str]:
    """``MODEL=FAMILY`` specifications (``--model-family``) as
    ``SimConfig.model_families``; ValueError naming the first one that is not such (a
    model given twice included). The model is everything before the last ``=``."""
    families: dict[str, str] = {}
    for spec in specs:
        model, sep, family = spec.rpartition("=")
        model = model.strip()
        if not sep or not model:
            raise ValueError(f"expected MODEL=FAMILY, got {spec!r}")
        try:
            check_family(family.strip(), "the family")
        except ValueError as exc:
            raise ValueError(f"{spec!r}: {exc}") from None
        if model in families:
            raise ValueError(f"model {model!r}'s family is given twice")
        families[model] = family.strip()
    return families
