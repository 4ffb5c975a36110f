"""A run's stored configuration, typed: what the store keeps about what a run was planned
with (``producer.plan.run_config`` writes it), read back through one decoder,
:meth:`StoredConfig.from_data`, which reads every shape a store has held.

The stored form is the JSON the store has always written, with its ``version`` since
0.3.0 (a configuration without one is version 1, written by 0.2.0 or before: its shape
says its age, docs/design/run-spec.md lists the shapes); :meth:`StoredConfig.to_data`
gives back exactly the data it was decoded from, changed only where a run's settings
were updated (:meth:`StoredConfig.with_max_cost`, :meth:`StoredConfig.with_queue`,
:meth:`StoredConfig.with_judge_settings`), so a store's configurations never change
form when read and written again. Pure.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from flask_eval.core.people import People
from flask_eval.core.types import JudgeConfig

#: the kind of work of a run whose configuration names none
JUDGMENT = "judgment"
#: the shape this release writes (its ``version`` key); configurations written by 0.2.0
#: and before carry none and are version 1 (every later key absent: its default)
STORED_VERSION = 2
#: the version of a configuration without a ``version`` key
UNVERSIONED = 1


@dataclass(frozen=True)
class StoredPairwise:
    """A pairwise run's settings: ``plan`` all pairs or each ``baseline`` pair, both
    orders (``swap``), and an imported set's gold labels (instance, first model, second
    model, label)."""

    plan: str = "all"
    baseline: str | None = None
    swap: bool = True
    labels: tuple[tuple[str, str, str, int], ...] = ()

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> StoredPairwise:
        baseline = data.get("baseline")
        labels = tuple(
            (str(i), str(a), str(b), int(lab)) for i, a, b, lab in data.get("labels") or ()
        )
        return cls(
            str(data.get("plan") or "all"),
            baseline if isinstance(baseline, str) else None,
            bool(data.get("swap", True)),
            labels,
        )


@dataclass(frozen=True)
class StoredConfig:
    """A run's stored configuration. Every attribute is decoded with the default of the
    runs from before its key existed; :meth:`to_data` is the stored data itself."""

    #: the run's judges stored as configurations (of each sample, in a run of repeated
    #: judgments), in the run's order
    judges: tuple[JudgeConfig, ...]
    #: the names of all the run's judges, also those the oldest runs stored as bare names
    judge_names: tuple[str, ...]
    #: stored judges that are neither a name nor an object with one (a damaged config)
    unnamed_judges: tuple[object, ...]
    mode: str
    reference: bool
    #: the run's criteria as ``rubrics.codec.to_data`` wrote them
    skills: list[dict[str, Any]]
    instances_path: str | None
    #: model -> the path of its responses
    responses: dict[str, str]
    #: the models in the order the run was given them (the anchor of ratings)
    models: tuple[str, ...]
    #: model -> (instances answered, instances)
    coverage: dict[str, tuple[int, ...]]
    pairwise: StoredPairwise | None
    #: judgments per judge and item (``--samples``)
    samples: int
    #: the kind of work (``judgment``, ``generation``, ``annotation``, ...) and its options
    kind: str
    kind_options: dict[str, Any]
    #: the run's budget in USD (None: none)
    max_cost: float | None
    #: the queue the run's messages were sent to (None: judged in-process)
    dispatched: str | None
    #: the run's people (``human/...`` entries; None: none), beside its judges
    people: People | None = None
    #: a probe run's probes: ``variants``, ``probes``, ``families``, ``left_out``
    #: (``producer.probe_plan``; empty: not a probe run)
    probes: dict[str, Any] = field(default_factory=dict)
    version: int = STORED_VERSION
    _data: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> StoredConfig:
        """The one decoder of a stored configuration, of any age: judges stored as bare
        names, models as objects with a name, keys absent from older runs."""
        samples = data.get("samples")
        kind = data.get("kind")
        max_cost = data.get("max_cost")
        dispatched = data.get("dispatched")
        pairwise = data.get("pairwise")
        version = data.get("version")
        people = data.get("people")
        return cls(
            judges=tuple(_judges(data.get("judges") or ())),
            judge_names=tuple(str(_name(j)) for j in data.get("judges") or () if _named(j)),
            unnamed_judges=tuple(j for j in data.get("judges") or () if not _named(j)),
            mode=str(data.get("mode") or "instance"),
            reference=bool(data.get("reference", True)),
            skills=list(data.get("skills") or []),
            instances_path=_text(data.get("instances_path")),
            responses={str(m): str(p) for m, p in (data.get("responses") or {}).items()},
            models=_models(data),
            coverage={str(m): tuple(c) for m, c in (data.get("coverage") or {}).items()},
            pairwise=StoredPairwise.from_data(pairwise)
            if isinstance(pairwise, Mapping) and pairwise
            else None,
            samples=samples if isinstance(samples, int) and samples > 1 else 1,
            kind=str(kind or JUDGMENT),
            kind_options=dict(data.get("kind_options") or {}),
            max_cost=float(max_cost) if isinstance(max_cost, int | float) else None,
            dispatched=dispatched if isinstance(dispatched, str) else None,
            people=_people(people),
            probes=dict(data.get("probes") or {}),
            version=version if isinstance(version, int) else UNVERSIONED,
            _data=copy.deepcopy(dict(data)),
        )

    @classmethod
    def from_text(cls, text: str) -> StoredConfig:
        """The configuration of its stored JSON text."""
        return cls.from_data(json.loads(text))

    def to_data(self) -> dict[str, Any]:
        """The stored data (a copy): what it was decoded from, with its updates."""
        return copy.deepcopy(self._data)

    def to_text(self) -> str:
        """The stored JSON text (keys sorted, as the store has always written it)."""
        return json.dumps(self._data, sort_keys=True)

    def every_judge(self) -> list[JudgeConfig]:
        """A configuration of each judge, those stored as bare names with their defaults."""
        held = {j.name: j for j in self.judges}
        return [held.get(name) or JudgeConfig(name, name) for name in self.judge_names]

    def with_max_cost(self, max_cost: float) -> StoredConfig:
        """The configuration with a new budget."""
        return self._updated({**self._data, "max_cost": max_cost})

    def with_queue(self, queue: str | None) -> StoredConfig:
        """The configuration of a run whose messages went to ``queue``."""
        return self._updated({**self._data, "dispatched": queue})

    def with_people(self, people: People | None) -> StoredConfig:
        """The configuration of a run whose people are ``people`` (None: none)."""
        data = {k: v for k, v in self._data.items() if k != "people"}
        return self._updated(data if people is None else {**data, "people": people.to_data()})

    def without_queue(self) -> StoredConfig:
        """The configuration of a run sent to no queue (one imported from a bundle)."""
        return self._updated({k: v for k, v in self._data.items() if k != "dispatched"})

    def with_judge_settings(
        self, judges: Sequence[JudgeConfig], keys: Sequence[str]
    ) -> tuple[StoredConfig, list[str]]:
        """The configuration with the ``keys`` settings of ``judges`` (by name; a price
        not given again keeps the stored one), and what changed, as text."""
        given = {j.name: j.to_data() for j in judges}
        data = copy.deepcopy(self._data)
        changed: list[str] = []
        for stored in data.get("judges") or ():
            new = given.get(str(stored.get("name"))) if isinstance(stored, dict) else None
            if new is None:
                continue
            for key in keys:
                if key == "price" and new.get(key) is None:
                    continue  # no price given again: the stored one stays
                if stored.get(key) != new.get(key):
                    changed.append(f"{stored['name']}: {key} {stored.get(key)} -> {new.get(key)}")
                    stored[key] = new.get(key)
        return self._updated(data), changed

    def _updated(self, data: dict[str, Any]) -> StoredConfig:
        return StoredConfig.from_data(data)


def _people(data: object) -> People | None:
    """The stored people (None: none); ValueError for a shape that is not theirs."""
    if not data:
        return None
    try:
        if not isinstance(data, dict):
            raise TypeError(type(data).__name__)
        return People.from_data(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"people cannot be read: {exc!r:.80}") from None


def _name(entry: object) -> object:
    return entry.get("name") if isinstance(entry, Mapping) else entry


def _named(entry: object) -> bool:
    name = _name(entry)
    return isinstance(name, str) and bool(name)


_JUDGE_KEYS = frozenset(f.name for f in fields(JudgeConfig))


def _judges(entries: Sequence[object]) -> Iterator[JudgeConfig]:
    """The stored judges: ``JudgeConfig.to_data()`` entries (keys a later release added
    left out); a bare name (the oldest runs) or an entry that does not decode is only
    a name (:attr:`StoredConfig.judge_names`)."""
    for entry in entries:
        if not (isinstance(entry, Mapping) and _named(entry)):
            continue
        data = {k: v for k, v in entry.items() if k in _JUDGE_KEYS}
        data.setdefault("spec", data["name"])
        try:
            yield JudgeConfig.from_data(data)
        except (TypeError, ValueError):
            continue


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _models(data: Mapping[str, Any]) -> tuple[str, ...]:
    """The models in the order the run was given them: its ``models`` list (names, or
    objects with a ``name``), then any other model of ``responses`` (a mapping the store
    keeps sorted: runs from before the list have their models in sorted order)."""
    names = []
    for entry in data.get("models") or ():
        name = entry.get("name") if isinstance(entry, Mapping) else entry
        if isinstance(name, str) and name:
            names.append(name)
    names += [str(m) for m in data.get("responses") or {}]
    return tuple(dict.fromkeys(names))
