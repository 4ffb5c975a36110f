"""Custom criteria: a YAML file of the user's own criteria, read as a SkillSet.

Format (a mapping with a ``criteria`` list, or just the list)::

    group: Support quality          # optional; the group of every criterion (default Custom)
    scale: 1-5                      # optional; the levels every criterion's scores describe
    criteria:
      - name: Empathy
        description: Does the response acknowledge the user's situation?
        scores:
          1: Ignores it.
          2: ...
          3: ...
          4: ...
          5: Acknowledges it and adapts the answer to it.
        allow_na: false             # optional, default false
        group: Tone                 # optional; overrides the file's group

Each criterion becomes a :class:`~rubrics.skills.Skill` whose ``ability`` is its group,
``criterion`` its description and ``rubric`` its scores (whitespace runs become one
space, as in the FLASK skill set). Unlike FLASK's skills, a custom criterion may not be
judged N/A unless it says ``allow_na: true``. The file's ``scale`` (default ``1-5``)
declares the levels of every criterion's rubric: ``scores`` gives each of them, no other;
a judge whose protocol scores on another scale is refused before a run starts
(``rubrics.coverage``).

The file is read by :func:`core.strict_yaml.parse` (no aliases, anchors, tags, merge or
duplicate keys; no NUL or lone surrogate); every problem raises
:class:`~core.errors.InputError` naming ``file:line``. Names follow ``rubrics.names``: no
invisible or look-alike character, and no two names alike once case, ``_``, spacing and
character forms (NFKC) are ignored.

Which criteria apply to an instance (the contract of
``producer.loaders.load_instances(..., custom_criteria=True)``): an instance record may
carry ``"criteria": [names]``, a non-empty list of names of this file's criteria, each
once; the instance is judged on those, in the listed order. Without the field it is
judged on all of the file's criteria, in file order. The instance's FLASK ``skill`` /
``metrics`` field is then ignored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from flask_eval.core import strict_yaml
from flask_eval.core.errors import InputError
from flask_eval.core.files import MIB, read_text
from flask_eval.core.limits import MAX_CRITERION_NAME
from flask_eval.core.text import clip, control_problem
from flask_eval.rubrics.names import name_key, name_problem
from flask_eval.rubrics.scale import FIVE_POINT, Scale
from flask_eval.rubrics.skills import Skill, SkillSet

__all__ = ["DEFAULT_GROUP", "MAX_FILE_BYTES", "load_criteria"]

#: the group (``Skill.ability``) of a criterion that names none
DEFAULT_GROUP = "Custom"
#: a criteria file is a few kilobytes; a limit keeps a wrong path from filling memory
MAX_FILE_BYTES = MIB
_TOP_KEYS = frozenset({"group", "scale", "criteria"})
_KEYS = frozenset({"name", "description", "scores", "allow_na", "group"})


class _Lines:
    """1-based lines of the nodes of a parsed criteria file (None when unknown)."""

    def __init__(self, root: yaml.Node | None) -> None:
        self.root = None if root is None else int(root.start_mark.line) + 1
        self.list_line = self.root
        self._top: dict[str, yaml.Node] = {}
        self._items: list[yaml.Node] = []
        if isinstance(root, yaml.MappingNode):
            self._top = {k.value: v for k, v in root.value if isinstance(k, yaml.ScalarNode)}
            node = self._top.get("criteria")
            if node is not None:
                self.list_line = int(node.start_mark.line) + 1
                if isinstance(node, yaml.SequenceNode):
                    self._items = list(node.value)
        elif isinstance(root, yaml.SequenceNode):
            self._items = list(root.value)

    def top(self, key: str) -> int | None:
        node = self._top.get(key)
        return self.root if node is None else int(node.start_mark.line) + 1

    def item(self, index: int, *keys: str) -> int | None:
        """The line of item ``index``, or of its value at the path ``keys``."""
        if index >= len(self._items):
            return self.list_line
        node = self._items[index]
        for key in keys:
            if not isinstance(node, yaml.MappingNode):
                break
            found = next(
                (v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key),
                None,
            )
            if found is None:
                break
            node = found
        return int(node.start_mark.line) + 1

    def keys(self, index: int, key: str) -> list[int]:
        """The lines of the keys of item ``index``'s mapping ``key``, in file order."""
        if index >= len(self._items) or not isinstance(self._items[index], yaml.MappingNode):
            return []
        for k, v in self._items[index].value:
            if (
                isinstance(k, yaml.ScalarNode)
                and k.value == key
                and isinstance(v, yaml.MappingNode)
            ):
                return [int(child.start_mark.line) + 1 for child, _ in v.value]
        return []


def load_criteria(path: str | Path) -> SkillSet:
    """The criteria of a custom criteria file, in file order (see the module docstring)."""
    where = str(path)
    text = read_text(where, "a criteria file (YAML)", MAX_FILE_BYTES)
    try:
        data, node = strict_yaml.parse(text)
    except yaml.YAMLError as exc:
        message, line = strict_yaml.describe(exc, text)
        raise InputError(message, where, line) from None
    lines = _Lines(node)
    group = DEFAULT_GROUP
    scale = FIVE_POINT
    if isinstance(data, dict):
        unknown = sorted(clip(str(k), 40) for k in data if k not in _TOP_KEYS)
        if unknown:
            raise InputError(
                f"unknown top-level keys: {', '.join(unknown)} (expected group, scale, criteria)",
                where,
                lines.root,
            )
        if "group" in data:
            group = _label_text(data["group"], "'group'", where, lines.top("group"))
        if "scale" in data:
            scale = _scale(data["scale"], where, lines.top("scale"))
        items = data.get("criteria")
    else:
        items = data
    if not isinstance(items, list) or not items:
        raise InputError(
            f"expected a non-empty 'criteria' list (name, description, scores {scale.text})",
            where,
            lines.list_line,
        )
    skills: list[Skill] = []
    first: dict[str, tuple[str, int | None]] = {}
    for index, item in enumerate(items):
        skill = _criterion(item, index, group, scale, where, lines)
        line = lines.item(index, "name")
        key = name_key(skill.name)
        if key in first:
            other, at = first[key]
            if other == skill.name:
                message = f"duplicate criterion name {clip(skill.name)} (first on line {at})"
            else:
                message = (
                    f"criterion name {clip(skill.name)} differs from {clip(other)} (line {at}) "
                    "only by case, spacing, '_' or character forms: judges and reports "
                    "cannot tell them apart; rename one"
                )
            raise InputError(message, where, line)
        first[key] = (skill.name, line)
        skills.append(skill)
    return SkillSet(tuple(skills))


def _criterion(item: Any, index: int, group: str, scale: Scale, where: str, lines: _Lines) -> Skill:
    label = f"criterion #{index + 1}"
    if not isinstance(item, dict):
        raise InputError(f"{label} is not a mapping", where, lines.item(index))
    if isinstance(item.get("name"), str) and item["name"].strip():
        label = f"criterion {clip(item['name'].strip())}"
    extra = sorted(clip(str(k), 40) for k in item if k not in _KEYS)
    if extra:
        raise InputError(
            f"{label}: unknown keys: {', '.join(extra)} "
            "(expected name, description, scores, allow_na, group)",
            where,
            lines.item(index),
        )
    for key in ("name", "description", "scores"):
        if key not in item:
            raise InputError(f"{label}: missing {key!r}", where, lines.item(index))
    name = _label_text(item["name"], f"{label}: 'name'", where, lines.item(index, "name"))
    problem = name_problem(name)
    if problem is not None:
        raise InputError(f"{label}: 'name' {problem}", where, lines.item(index, "name"))
    description = _prose(item["description"])
    if description is None:
        raise InputError(
            f"{label}: 'description' must be a non-empty string",
            where,
            lines.item(index, "description"),
        )
    allow_na = item.get("allow_na", False)
    if not isinstance(allow_na, bool):
        raise InputError(
            f"{label}: 'allow_na' must be true or false", where, lines.item(index, "allow_na")
        )
    if "group" in item:
        group = _label_text(item["group"], f"{label}: 'group'", where, lines.item(index, "group"))
    scores = _scores(item["scores"], label, index, scale, where, lines)
    return Skill(name, group, description, scores, allow_na)


def _scores(
    raw: Any, label: str, index: int, scale: Scale, where: str, lines: _Lines
) -> dict[int, str]:
    if not isinstance(raw, dict):
        raise InputError(
            f"{label}: 'scores' must be a mapping of scores {scale.text} to their text",
            where,
            lines.item(index, "scores"),
        )
    scores: dict[int, str] = {}
    key_lines = lines.keys(index, "scores")
    for number, (key, text) in enumerate(raw.items()):
        line = key_lines[number] if number < len(key_lines) else lines.item(index, "scores")
        level = _level(key, scale)
        if level is None:
            raise InputError(f"{label}: score {clip(key)} is not one of {scale.text}", where, line)
        if level in scores:
            raise InputError(f"{label}: score {level} is given twice", where, line)
        prose = _prose(text)
        if prose is None:
            raise InputError(
                f"{label}: the text of score {level} must be a non-empty string", where, line
            )
        scores[level] = prose
    missing = [str(s) for s in scale.levels if s not in scores]
    if missing:
        raise InputError(
            f"{label}: 'scores' is missing {', '.join(missing)}",
            where,
            lines.item(index, "scores"),
        )
    return scores


def _level(key: object, scale: Scale) -> int | None:
    if isinstance(key, bool):
        return None
    if isinstance(key, str) and key.strip().isascii() and key.strip().isdigit():
        key = int(key.strip())
    return key if isinstance(key, int) and key in scale else None


def _scale(value: object, where: str, line: int | None) -> Scale:
    """A file's declared ``scale`` (``1-10``; YAML reads ``1-5`` as a string)."""
    try:
        return Scale.parse(value if isinstance(value, str) else "")
    except ValueError as exc:
        raise InputError(f"'scale' {clip(value)}: {exc}", where, line) from None


def _prose(value: object) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    return " ".join(value.split())


def _label_text(value: object, what: str, where: str, line: int | None) -> str:
    """A name or a group: one printable line within the criterion-name column."""
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{what} must be a non-empty string", where, line)
    text = value.strip()
    if len(text) > MAX_CRITERION_NAME:
        raise InputError(f"{what} is longer than {MAX_CRITERION_NAME} characters", where, line)
    problem = control_problem(text)
    if problem is not None:
        raise InputError(f"{what} {problem}", where, line)
    return text
