"""The FLASK skill set: 12 skills in 4 abilities, each with a 1-5 rubric (pure, no network).

Two file formats are read by :func:`load`:

* ours (``rubrics/skills.yaml``, also accepted as JSON)::

      abilities: [Logical Thinking, ...]        # optional; declares the allowed abilities
      skills:
        - name: Readability
          ability: User Alignment
          criterion: One or two sentences.
          rubric: {1: ..., 2: ..., 3: ..., 4: ..., 5: ...}
          allow_na: true                        # optional, default true

* FLASK's ``skillset_description.json``: a JSON list of
  ``{"Skill": ..., "Criteria": ..., "Scoring": {"1": ..., "5": ...}}``; the ability of each
  skill is taken from our default set.

Every problem in a file raises :class:`core.errors.InputError` naming the file
(and the line, when known).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from flask_eval.core import strict_yaml
from flask_eval.core.errors import InputError
from flask_eval.core.files import MIB, read_text
from flask_eval.core.jsonl import DuplicateKey, unique_keys
from flask_eval.core.limits import MAX_CRITERION_NAME
from flask_eval.core.text import clip, control_problem, escape_line, walk_strings
from flask_eval.rubrics.names import name_key, name_problem

SCORE_LEVELS: tuple[int, ...] = (1, 2, 3, 4, 5)

#: FLASK's four abilities, in canonical order.
ABILITIES: tuple[str, ...] = (
    "Logical Thinking",
    "Background Knowledge",
    "Problem Handling",
    "User Alignment",
)

_DEFAULT_RESOURCE = "skills.yaml"
#: a skill set file is a few kilobytes; a limit keeps a wrong path from filling memory
MAX_FILE_BYTES = MIB
_SKILL_KEYS = frozenset({"name", "ability", "criterion", "rubric", "allow_na"})


@dataclass(frozen=True)
class Skill:
    """One FLASK skill: what it judges and its 1-5 rubric (one sentence per level)."""

    name: str
    ability: str
    criterion: str
    rubric: Mapping[int, str] = field(hash=False)
    allow_na: bool = True

    def __post_init__(self) -> None:
        # Freeze the rubric in score order so a Skill is truly immutable.
        frozen = MappingProxyType({k: self.rubric[k] for k in sorted(self.rubric)})
        object.__setattr__(self, "rubric", frozen)


@dataclass(frozen=True)
class SkillSet:
    """An ordered set of skills; the order of ``skills`` is the canonical order."""

    skills: tuple[Skill, ...]
    _by_name: Mapping[str, Skill] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        by_name: dict[str, Skill] = {}
        for skill in self.skills:
            if skill.name in by_name:
                raise InputError(f"duplicate skill name: {skill.name!r}")
            by_name[skill.name] = skill
        object.__setattr__(self, "skills", tuple(self.skills))
        object.__setattr__(self, "_by_name", MappingProxyType(by_name))

    @property
    def names(self) -> tuple[str, ...]:
        """Skill names in canonical order."""
        return tuple(s.name for s in self.skills)

    @property
    def abilities(self) -> Mapping[str, tuple[str, ...]]:
        """Ability -> its skill names, abilities in order of first appearance."""
        grouped: dict[str, list[str]] = {}
        for skill in self.skills:
            grouped.setdefault(skill.ability, []).append(skill.name)
        return MappingProxyType({a: tuple(names) for a, names in grouped.items()})

    def ability_of(self, name: str) -> str:
        """The ability a skill belongs to (KeyError for an unknown skill)."""
        return self.get(name).ability

    def get(self, name: str) -> Skill:
        """The skill called ``name`` (exact match); KeyError with a hint otherwise."""
        try:
            return self._by_name[name]
        except KeyError:
            pass
        folded = [n for n in self._by_name if n.casefold() == name.casefold()]
        hint = f"; did you mean {folded[0]!r}?" if folded else ""
        known = ", ".join(self._by_name)
        raise KeyError(f"unknown skill {name!r}{hint} (known skills: {known})") from None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._by_name

    def __iter__(self) -> Iterator[Skill]:
        return iter(self.skills)

    def __len__(self) -> int:
        return len(self.skills)


@functools.cache
def load_default() -> SkillSet:
    """The packaged FLASK skill set (``rubrics/skills.yaml``), loaded once."""
    resource = resources.files("flask_eval.rubrics").joinpath(_DEFAULT_RESOURCE)
    text = resource.read_text(encoding="utf-8")
    return _load_text(text, f"rubrics/{_DEFAULT_RESOURCE}", force_json=False)


def load(path: str | Path) -> SkillSet:
    """Load a skill set from our YAML/JSON format or FLASK's skillset_description.json."""
    p = Path(path)
    where = str(p)
    text = read_text(where, "a skill set file (YAML or JSON)", MAX_FILE_BYTES)
    force_json = p.suffix.lower() == ".json" or text.lstrip().startswith("[")
    return _load_text(text, where, force_json=force_json)


# --- parsing -------------------------------------------------------------------------


def _load_text(text: str, where: str, *, force_json: bool) -> SkillSet:
    lines: _Lines
    if force_json:
        data = _json(text, where)
        lines = _Lines(None)
    else:
        try:
            data, node = strict_yaml.parse(text)
        except yaml.YAMLError as exc:
            message, line = strict_yaml.describe(exc, text)
            raise InputError(message, where, line) from None
        lines = _Lines(node)

    if isinstance(data, list):
        return _from_flask(data, where)
    if isinstance(data, dict):
        return _from_ours(data, where, lines)
    raise InputError(
        "expected a mapping with a 'skills' list, or FLASK's list of "
        '{"Skill", "Criteria", "Scoring"} objects',
        where,
    )


def _json(text: str, where: str) -> Any:
    """A JSON skill set file: each key once, and no text a database or judge refuses."""
    try:
        data = json.loads(text, object_pairs_hook=unique_keys)
    except DuplicateKey as exc:
        raise InputError(f"key {clip(exc.key)} appears twice in an object", where) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", where, exc.lineno) from None
    except RecursionError:
        raise InputError("invalid JSON: nested too deeply", where) from None
    except ValueError as exc:
        detail = "a number has more than 4300 digits" if "digits" in str(exc) else str(exc)[:80]
        raise InputError(f"invalid JSON: {detail}", where) from None
    found = walk_strings(data)
    if found is not None:
        place, problem = found
        raise InputError(f"{place} {problem}", where, escape_line(text))
    return data


def _name(item: dict[Any, Any], label: str, where: str, line: int | None) -> str:
    """A skill's name as stored in the ledger: within the column, one printable line."""
    name = str(item["name"]).strip()
    if len(name) > MAX_CRITERION_NAME:
        raise InputError(
            f"{label}: 'name' is longer than {MAX_CRITERION_NAME} characters", where, line
        )
    problem = control_problem(name) or name_problem(name)
    if problem is not None:
        raise InputError(f"{label}: 'name' {problem}", where, line)
    return name


class _Lines:
    """Line numbers (1-based) of the items of the top-level ``skills`` list, when known."""

    def __init__(self, root: yaml.Node | None) -> None:
        self._root_line = None if root is None else root.start_mark.line + 1
        self._items: list[yaml.Node] = []
        self._skills_line: int | None = None
        if isinstance(root, yaml.MappingNode):
            for key, value in root.value:
                if isinstance(key, yaml.ScalarNode) and key.value == "skills":
                    self._skills_line = key.start_mark.line + 1
                    if isinstance(value, yaml.SequenceNode):
                        self._items = list(value.value)

    def skills(self) -> int | None:
        return self._skills_line or self._root_line

    def item(self, index: int, key: str | None = None) -> int | None:
        if index >= len(self._items):
            return None
        node = self._items[index]
        if key is not None and isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == key:
                    return int(v.start_mark.line) + 1
        return int(node.start_mark.line) + 1


def _from_ours(data: dict[Any, Any], where: str, lines: _Lines) -> SkillSet:
    unknown_top = sorted(str(k)[:40] for k in data if k not in ("abilities", "skills"))
    if unknown_top:
        raise InputError(f"unknown top-level keys: {', '.join(unknown_top)}", where)
    abilities: tuple[str, ...] = ABILITIES
    if "abilities" in data:
        raw = data["abilities"]
        if not (isinstance(raw, list) and raw and all(_nonempty_str(a) for a in raw)):
            raise InputError("'abilities' must be a non-empty list of names", where)
        abilities = tuple(a.strip() for a in raw)
    items = data.get("skills")
    if not isinstance(items, list) or not items:
        raise InputError("'skills' must be a non-empty list", where, lines.skills())

    skills: list[Skill] = []
    seen: dict[str, str] = {}
    for i, item in enumerate(items):
        line = lines.item(i)
        if not isinstance(item, dict):
            raise InputError(f"skill #{i + 1} is not a mapping", where, line)
        label = f"skill #{i + 1}"
        if _nonempty_str(item.get("name")):
            label = f"skill {clip(item['name'].strip())}"
        extra = sorted(str(k)[:40] for k in item if k not in _SKILL_KEYS)
        if extra:
            raise InputError(f"{label}: unknown keys: {', '.join(extra)}", where, line)
        for key in ("name", "ability", "criterion"):
            if not _nonempty_str(item.get(key)):
                raise InputError(
                    f"{label}: '{key}' must be a non-empty string", where, lines.item(i, key)
                )
        name = _name(item, label, where, lines.item(i, "name"))
        ability = item["ability"].strip()
        if ability not in abilities:
            raise InputError(
                f"{label}: unknown ability {clip(ability)} "
                f"(expected one of: {', '.join(clip(a) for a in abilities)})",
                where,
                lines.item(i, "ability"),
            )
        key = name_key(name)
        if key in seen:
            other = seen[key]
            if other == name:
                raise InputError(f"duplicate skill name: {clip(name)}", where, line)
            raise InputError(
                f"skill name {clip(name)} differs from {clip(other)} only by case, spacing, "
                "'_' or character forms: judges and reports cannot tell them apart; rename one",
                where,
                lines.item(i, "name"),
            )
        seen[key] = name
        allow_na = item.get("allow_na", True)
        if not isinstance(allow_na, bool):
            raise InputError(
                f"{label}: 'allow_na' must be true or false", where, lines.item(i, "allow_na")
            )
        rubric = _rubric(item.get("rubric"), label, where, lines.item(i, "rubric"))
        skills.append(Skill(name, ability, " ".join(item["criterion"].split()), rubric, allow_na))
    return SkillSet(tuple(skills))


def _from_flask(data: list[Any], where: str) -> SkillSet:
    if not data:
        raise InputError("empty skill list", where)
    default = load_default()
    skills: list[Skill] = []
    seen: set[str] = set()
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            raise InputError(f"entry #{i + 1} is not an object", where)
        label = f"entry #{i + 1}"
        for key in ("Skill", "Criteria"):
            if not _nonempty_str(item.get(key)):
                raise InputError(f"{label}: {key!r} must be a non-empty string", where)
        name = item["Skill"].strip()
        label = f"skill {clip(name)}"
        if name not in default:
            raise InputError(
                f"unknown skill {clip(name)} (FLASK's skills are: {', '.join(default.names)})",
                where,
            )
        if name in seen:
            raise InputError(f"duplicate skill name: {clip(name)}", where)
        seen.add(name)
        rubric = _rubric(item.get("Scoring"), label, where, None)
        criterion = " ".join(item["Criteria"].split())
        skills.append(Skill(name, default.ability_of(name), criterion, rubric, True))
    # Canonical order is ours, not the file's.
    order = {n: i for i, n in enumerate(default.names)}
    return SkillSet(tuple(sorted(skills, key=lambda s: order[s.name])))


def _rubric(raw: object, label: str, where: str, line: int | None) -> dict[int, str]:
    if not isinstance(raw, dict):
        raise InputError(f"{label}: rubric must be a mapping of scores 1-5 to text", where, line)
    rubric: dict[int, str] = {}
    for key, text in raw.items():
        score = _score_key(key)
        if score is None:
            raise InputError(f"{label}: rubric key {clip(key)} is not a score 1-5", where, line)
        if score in rubric:
            raise InputError(f"{label}: rubric score {score} given twice", where, line)
        if not _nonempty_str(text):
            raise InputError(f"{label}: rubric text for score {score} is empty", where, line)
        rubric[score] = " ".join(text.split())
    missing = [str(s) for s in SCORE_LEVELS if s not in rubric]
    if missing:
        raise InputError(f"{label}: rubric is missing scores {', '.join(missing)}", where, line)
    return rubric


def _score_key(key: object) -> int | None:
    if isinstance(key, bool):
        return None
    if isinstance(key, int):
        value = key
    elif isinstance(key, str) and key.strip().isdigit() and key.strip().isascii():
        value = int(key.strip())
    else:
        return None
    return value if value in SCORE_LEVELS else None


def _nonempty_str(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())
