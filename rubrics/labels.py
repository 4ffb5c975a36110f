"""The labels an annotator chooses from: skills, domains and difficulty levels (pure).

An annotation run asks a model to label each instance with FLASK's metadata (the
protocol is rubrics/annotation.py). What it may answer is data, a :class:`LabelSpace`:
the run stores it with its config (:meth:`LabelSpace.to_data`), the prompt lists it
before the instance (the same for every call of the run, so it is the shared prefix) and
the reader refuses any label off it. FLASK's own space is :func:`flask_label_space`; a run
with custom criteria labels instances with those criteria as its skills
(:func:`label_space_of`), its domains and levels staying FLASK's.

Labels are matched as criterion names are everywhere (``rubrics.names.name_key``: case,
``_``, spacing and character forms ignored), so two labels of one space may not share that
key, and an answer's label maps back to the space's own spelling.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from flask_eval.core.types import DIFFICULTY_LABELS, DOMAINS
from flask_eval.rubrics.names import name_key
from flask_eval.rubrics.skills import SkillSet, load_default

#: what each of FLASK's difficulty levels means, in our words (level 1..5)
LEVEL_DESCRIPTIONS: tuple[str, ...] = (
    "Everyday knowledge almost anyone has; a short, direct answer needs no explanation "
    "and no schooling.",
    "Still no formal study or specialist knowledge, but the answer has to explain a widely "
    "known idea or connect a few common facts.",
    "Needs the background a general school education gives in the field, though not a "
    "specialist's grasp of it.",
    "Needs concepts someone studying the field at university would know, applied to give "
    "a sound and original answer.",
    "Needs rare or professional knowledge of the field and a sound, inventive answer that "
    "only a practitioner could give.",
)


@dataclass(frozen=True)
class LabelSpace:
    """What an annotator may answer: ``skills`` as (name, one-line description),
    ``domains`` by name, difficulty ``levels`` as (level, name, description); an answer
    names exactly ``min(top_skills, len(skills))`` skills, most important first, and one
    to ``max_domains`` domains. ValueError for an empty list, a blank or multi-line name,
    two labels alike (:func:`rubrics.names.name_key`), a level that is not a positive
    integer or repeats, or a count below 1. Descriptions are kept on one line (their
    whitespace runs become one space): the prompt lists one label per line."""

    skills: tuple[tuple[str, str], ...]
    domains: tuple[str, ...]
    levels: tuple[tuple[int, str, str], ...]
    top_skills: int = 3
    max_domains: int = 2

    def __post_init__(self) -> None:
        texts = [d for _, d in self.skills] + [d for _, _, d in self.levels]
        if not all(isinstance(d, str) for d in texts):
            raise ValueError("a label's description must be text")
        object.__setattr__(self, "skills", tuple((n, _line(d)) for n, d in self.skills))
        object.__setattr__(self, "domains", tuple(self.domains))
        object.__setattr__(self, "levels", tuple((lv, n, _line(d)) for lv, n, d in self.levels))
        _distinct("skill", [n for n, _ in self.skills])
        _distinct("domain", self.domains)
        _distinct("difficulty level", [n for _, n, _ in self.levels])
        numbers = [level for level, _, _ in self.levels]
        if any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in numbers):
            raise ValueError(f"difficulty levels must be positive integers, got {numbers}")
        if len(set(numbers)) != len(numbers):
            raise ValueError(f"a difficulty level is given twice: {numbers}")
        for name, value in (("top_skills", self.top_skills), ("max_domains", self.max_domains)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")

    @property
    def skill_count(self) -> int:
        """How many skills an answer names: ``top_skills``, or all of a smaller space."""
        return min(self.top_skills, len(self.skills))

    @property
    def domain_count(self) -> int:
        """The most domains an answer names."""
        return min(self.max_domains, len(self.domains))

    @property
    def skill_names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.skills)

    @property
    def level_numbers(self) -> tuple[int, ...]:
        return tuple(level for level, _, _ in self.levels)

    def skill(self, label: str) -> str | None:
        """The space's spelling of the skill ``label`` names, or None: not in the space."""
        return _find(label, self.skill_names)

    def domain(self, label: str) -> str | None:
        """The space's spelling of the domain ``label`` names, or None: not in the space."""
        return _find(label, self.domains)

    def to_data(self) -> dict[str, Any]:
        """The space as JSON data (the run's stored config), read back by :meth:`from_data`."""
        return {
            "skills": [{"name": n, "description": d} for n, d in self.skills],
            "domains": list(self.domains),
            "levels": [{"level": lv, "name": n, "description": d} for lv, n, d in self.levels],
            "top_skills": self.top_skills,
            "max_domains": self.max_domains,
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> LabelSpace:
        """The space :meth:`to_data` wrote; ValueError naming what is wrong."""
        if not isinstance(data, Mapping):
            raise ValueError("a label space must be a JSON object")
        unknown = sorted(str(k)[:40] for k in data if k not in _DATA_KEYS)
        if unknown:
            raise ValueError(f"unknown label space keys: {', '.join(unknown)}")
        try:
            skills = tuple((s["name"], s["description"]) for s in _objects(data, "skills"))
            levels = tuple(
                (lv["level"], lv["name"], lv["description"]) for lv in _objects(data, "levels")
            )
        except KeyError as exc:
            raise ValueError(f"a label space entry lacks {exc}") from None
        domains = data.get("domains")
        if not isinstance(domains, list):
            raise ValueError("label space 'domains' must be a list of names")
        return cls(
            skills=skills,
            domains=tuple(domains),
            levels=levels,
            top_skills=data.get("top_skills", 3),
            max_domains=data.get("max_domains", 2),
        )


_DATA_KEYS = frozenset({"skills", "domains", "levels", "top_skills", "max_domains"})


def flask_levels() -> tuple[tuple[int, str, str], ...]:
    """FLASK's five difficulty levels with our descriptions."""
    return tuple(
        (i, name, text)
        for i, (name, text) in enumerate(
            zip(DIFFICULTY_LABELS, LEVEL_DESCRIPTIONS, strict=True), start=1
        )
    )


def label_space_of(skillset: SkillSet, *, top_skills: int = 3, max_domains: int = 2) -> LabelSpace:
    """A space whose skills are ``skillset``'s (each described by its criterion text),
    with FLASK's domains and difficulty levels: custom criteria as the skill labels."""
    return LabelSpace(
        skills=tuple((s.name, s.criterion) for s in skillset),
        domains=DOMAINS,
        levels=flask_levels(),
        top_skills=top_skills,
        max_domains=max_domains,
    )


def flask_label_space() -> LabelSpace:
    """FLASK's space: its 12 skills, 10 domains and 5 difficulty levels; three skills
    in order of importance and one or two domains per instance, as FLASK annotates."""
    return label_space_of(load_default())


# --- helpers ---------------------------------------------------------------------------


def _line(text: str) -> str:
    return " ".join(text.split())


def _find(label: str, names: Iterable[str]) -> str | None:
    key = name_key(label)
    return next((n for n in names if name_key(n) == key), None)


def _distinct(what: str, names: Iterable[object]) -> None:
    listed = list(names)
    if not listed:
        raise ValueError(f"a label space needs at least one {what}")
    seen: dict[str, str] = {}
    for name in listed:
        if not isinstance(name, str) or not name.strip() or name != " ".join(name.split()):
            raise ValueError(f"a {what} name must be one non-blank line, got {name!r}")
        key = name_key(name)
        if key in seen:
            raise ValueError(f"{what} names {seen[key]!r} and {name!r} are alike")
        seen[key] = name


def _objects(data: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    items = data.get(key)
    if not isinstance(items, list) or not all(isinstance(i, Mapping) for i in items):
        raise ValueError(f"label space {key!r} must be a list of objects")
    return items
