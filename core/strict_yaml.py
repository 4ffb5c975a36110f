"""The one YAML loader for user files (judges files, rubric files): plain data only.

``yaml.safe_load`` is safe from code execution but not from the rest:

* aliases: a 464-byte "billion laughs" file expands to a gigabyte and hangs the loader;
* explicit tags: ``!!float abc`` raises ``ValueError`` (not a ``YAMLError``) and
  ``!!python/object`` is meaningless in a configuration file;
* duplicate keys: the last one silently wins, hiding a typo;
* escapes that make NUL or a lone surrogate (``"\\0"``, ``"\\ud800"``), which no database
  or judge can take.

:class:`StrictLoader` refuses all of them, and deep nesting, with a
:class:`StrictYAMLError` carrying the line, so every caller reports ``file:line``.
Error messages never include an unbounded user value (see :func:`core.text.clip`).
"""

from __future__ import annotations

from typing import Any

import yaml

from flask_eval.core.text import clip, text_problem

__all__ = ["MAX_DEPTH", "StrictLoader", "StrictYAMLError", "describe", "parse"]

#: deepest nesting of lists and mappings accepted (configuration files need a few)
MAX_DEPTH = 32

_STANDARD = "tag:yaml.org,2002:"
_MERGE_TAG = _STANDARD + "merge"


class StrictYAMLError(yaml.MarkedYAMLError):
    """A YAML construct a user file may not use; ``problem_mark`` says where."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem=problem, problem_mark=mark)


class StrictLoader(yaml.SafeLoader):
    """A SafeLoader without aliases, anchors, explicit tags, merge keys, duplicate keys,
    unstorable text or deep nesting."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            raise StrictYAMLError(
                "aliases (*name) are not allowed; write the value out", event.start_mark
            )
        if getattr(event, "anchor", None) is not None:
            raise StrictYAMLError(
                "anchors (&name) are not allowed; write each value out", event.start_mark
            )
        tag = getattr(event, "tag", None)
        if tag is not None:
            short = "!!" + tag.removeprefix(_STANDARD) if tag.startswith(_STANDARD) else tag
            raise StrictYAMLError(
                f"explicit tags such as {clip(short)} are not allowed; write a plain value",
                event.start_mark,
            )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise StrictYAMLError(f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_scalar(self, node: yaml.Node) -> Any:
        value = super().construct_scalar(node)  # type: ignore[arg-type]
        if isinstance(value, str):
            problem = text_problem(value)
            if problem is not None:
                raise StrictYAMLError(f"the text {problem}", node.start_mark)
        return value

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:
                    raise StrictYAMLError(
                        "merge keys (<<) are not allowed; write each key out",
                        key_node.start_mark,
                    )
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:
                    raise StrictYAMLError(
                        "a key must be a plain value, not a list or a mapping",
                        key_node.start_mark,
                    ) from None
                if first is not None:
                    raise StrictYAMLError(
                        f"duplicate key {clip(key)} (first on line {first})",
                        key_node.start_mark,
                    )
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)  # type: ignore[arg-type]

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except (ValueError, OverflowError, TypeError) as exc:
            raise StrictYAMLError(_invalid(exc), node.start_mark) from None


def _invalid(exc: Exception) -> str:
    if "digits" in str(exc):
        return "invalid value: a number with more than 4300 digits"
    return f"invalid value ({str(exc)[:80]})"


def parse(text: str) -> tuple[Any, yaml.Node | None]:
    """The data of a one-document YAML text and its node tree (for line numbers).

    Raises ``yaml.YAMLError`` (a :class:`StrictYAMLError` for what this loader refuses);
    :func:`describe` turns it into a message and a line.
    """
    loader = StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        try:
            data = loader.construct_document(node)
        except yaml.YAMLError:
            raise
        except (ValueError, OverflowError, TypeError) as exc:
            raise StrictYAMLError(_invalid(exc), node.start_mark) from None
        return data, node
    finally:
        loader.dispose()


def describe(exc: yaml.YAMLError, text: str) -> tuple[str, int | None]:
    """``(message, 1-based line or None)`` of a YAML error, for ``file:line: message``."""
    if isinstance(exc, yaml.reader.ReaderError):
        code = exc.character if isinstance(exc.character, int) else 0
        at = text.count("\n", 0, exc.position) + 1
        return f"invalid YAML: character U+{code:04X} is not allowed", at
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        if exc.context and problem.startswith("but "):
            problem = f"{exc.context}, {problem}"  # "expected X, but found Y"
        line = None if mark is None else int(mark.line) + 1
        prefix = "" if isinstance(exc, StrictYAMLError) else "invalid YAML: "
        return f"{prefix}{problem}", line
    return f"invalid YAML: {str(exc).splitlines()[0][:120] if str(exc) else 'unreadable'}", None
