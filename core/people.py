"""People as workers of a run: raters and panels (pure).

A judges file entry ``spec: human/NAME`` is one rater; ``spec: human/panel`` with
``raters: [alice, bob]`` and ``per_item: 2`` is a panel whose items each go to that many
of its raters. Either is a :class:`Panel`. In the ledger each rater works under the name
``human/RATER`` (:func:`rater_judge`), beside the judges: one row per planned item,
criterion and rater, so that the ledger's uniqueness is also "one rating per item and
rater". The prefix is reserved: no machine judge is called ``human/...``, so a ledger row
says by its name alone whether a person or a model answers it (:func:`is_person`).

A person's rows are planned with status ``waiting`` (:data:`core.errors.Status.WAITING`):
nothing is sent to a provider for them, and the machinery that dispatches, retries and
waits for judge calls never looks at them (docs/design/humans.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_LEASE",
    "HUMAN",
    "HUMAN_FIRST",
    "PANEL",
    "PREFIX",
    "RATE_PORT",
    "Panel",
    "People",
    "RaterNameError",
    "check_rater_name",
    "is_person",
    "rater_judge",
    "rater_of",
]

#: the provider name of people in a judge spec (``human/alice``)
HUMAN = "human"
#: the ledger name of a rater is this prefix and the rater's name
PREFIX = f"{HUMAN}/"
#: the spec of a panel entry (``spec: human/panel`` with ``raters: [...]``)
PANEL = "panel"
#: the port ``flask-eval rate`` serves the rating workspace on, and sign-in links name
RATE_PORT = 8687
#: seconds a rater holds an item before it goes back to their queue (30 minutes)
DEFAULT_LEASE = 1800.0
#: orders of a rater's queue: a random order, or the items the run's judges disagree on
#: most first (then the random order)
HUMAN_FIRST = ("random", "disagreement")
#: a rater's name: 1-40 letters, digits or . _ - starting with a letter or digit
RATER_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}"
_RATER = re.compile(RATER_PATTERN)


class RaterNameError(ValueError):
    """A rater's name that is not one."""


def check_rater_name(name: object) -> str:
    """``name`` if it is a valid rater name; RaterNameError saying the rule otherwise."""
    if not isinstance(name, str) or _RATER.fullmatch(name) is None or name == PANEL:
        raise RaterNameError(
            f"invalid rater name {name!r:.60}: use 1-40 letters, digits or . _ -, starting "
            f"with a letter or digit (and not {PANEL!r})"
        )
    return name


def is_person(judge: str) -> bool:
    """Whether the ledger's worker ``judge`` is a person (``human/RATER``)."""
    return judge.startswith(PREFIX)


def rater_judge(rater: str) -> str:
    """The ledger's name of rater ``rater``."""
    return PREFIX + rater


def rater_of(judge: str) -> str:
    """The rater whose ledger name is ``judge`` (``human/alice`` -> ``alice``)."""
    if not is_person(judge):
        raise ValueError(f"{judge!r} is no rater's ledger name")
    return judge[len(PREFIX) :]


@dataclass(frozen=True)
class Panel:
    """People of a run that rate through one protocol.

    ``raters`` rate ``per_item`` each of the items (1: each item once, by one of them),
    except the first ``overlap`` items, which every rater rates (the items agreement among
    people is measured on); ``sample`` / ``limit`` pick how many of the run's items people
    see (a seeded random sample, or the first ones); an item a rater holds goes back to
    their queue ``lease`` seconds after it was served unless rated, skipped or flagged
    before."""

    name: str
    raters: tuple[str, ...]
    per_item: int = 1
    overlap: int = 0
    sample: int | None = None
    limit: int | None = None
    #: the grading protocol whose rubrics and scale the raters see (None: ours)
    protocol: str | None = None

    def __post_init__(self) -> None:
        if not self.raters:
            raise ValueError("a panel has at least one rater")
        if not 1 <= self.per_item <= len(self.raters):
            raise ValueError(f"per_item must be from 1 to {len(self.raters)}")
        if self.overlap < 0:
            raise ValueError("overlap must be 0 or more")

    @property
    def judges(self) -> tuple[str, ...]:
        """The ledger names of its raters."""
        return tuple(rater_judge(r) for r in self.raters)

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "raters": list(self.raters)}
        if self.per_item != 1:
            data["per_item"] = self.per_item
        if self.overlap:
            data["overlap"] = self.overlap
        for key in ("sample", "limit", "protocol"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Panel:
        return cls(
            name=str(data["name"]),
            raters=tuple(str(r) for r in data["raters"]),
            per_item=int(data.get("per_item", 1)),
            overlap=int(data.get("overlap", 0)),
            sample=data.get("sample"),
            limit=data.get("limit"),
            protocol=data.get("protocol"),
        )


@dataclass(frozen=True)
class People:
    """A run's people: its panels, the order of their queues (:data:`HUMAN_FIRST`) and
    the seed of their random choices (which items, which rater, which side first)."""

    panels: tuple[Panel, ...]
    order: str = "random"
    seed: int = 0

    @property
    def judges(self) -> tuple[str, ...]:
        """The ledger names of every rater, in panel order."""
        return tuple(j for p in self.panels for j in p.judges)

    def panel_of(self, judge: str) -> Panel | None:
        """The panel rater ``judge`` (a ledger name) rates in."""
        return next((p for p in self.panels if judge in p.judges), None)

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"panels": [p.to_data() for p in self.panels]}
        if self.order != "random":
            data["order"] = self.order
        if self.seed:
            data["seed"] = self.seed
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> People:
        return cls(
            tuple(Panel.from_data(p) for p in data.get("panels") or ()),
            str(data.get("order") or "random"),
            int(data.get("seed") or 0),
        )
