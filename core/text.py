"""Text every input must be: storable on both databases, sendable to a judge, printable.

Two characters break that promise although every parser accepts them from an escape
(JSON ``"\\u0000"``, ``"\\ud800"``; YAML ``"\\0"``, ``"\\ud800"``; a CSV field):

* NUL (U+0000): PostgreSQL refuses it in text columns (SQLite stores it), so a run would
  be accepted by one database and crash half-written on the other;
* a lone UTF-16 surrogate (U+D800..U+DFFF): not a character at all; it cannot be encoded
  as UTF-8, so the first write or HTTP request with it fails.

:func:`text_problem` is the one check; the JSON Lines reader and the strict YAML loader
call it on every string they produce. What a provider answers is not refused but kept:
:func:`storable` replaces both characters in it before it is written. :func:`clip` is how
a user value goes into an error message: quoted, and never longer than a few dozen characters.
"""

from __future__ import annotations

import re

__all__ = [
    "clip",
    "control_problem",
    "escape_line",
    "storable",
    "text_problem",
    "walk_strings",
]

_BAD_TEXT = re.compile("[\x00\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
#: a JSON escape of NUL or of a surrogate, preceded by an even number of backslashes
_BAD_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u(0000|[dD][89a-fA-F][0-9a-fA-F]{2})")
_LOW_ESCAPE = re.compile(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}")

#: characters of a user value shown in a message
CLIP = 80


def clip(value: object, limit: int = CLIP) -> str:
    """A short, quoted rendering of a user value for an error message.

    Strings longer than ``limit`` are cut (their length is said); containers are named
    by type only, because their ``repr`` may be huge (or recurse without end).
    """
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return f"{value[:limit]!r}... ({len(value)} characters)"
    if value is None or isinstance(value, bool | float):
        return repr(value)
    if isinstance(value, int):
        digits = len(str(value)) if value.bit_length() < 14_000 else None
        if digits is not None and digits <= limit:
            return str(value)
        return "a very long number"
    names: dict[type, str] = {dict: "a mapping", list: "a list", tuple: "a list", set: "a set"}
    return names.get(type(value), f"a {type(value).__name__}")


def storable(text: str) -> str:
    """``text`` with each NUL and lone surrogate replaced by U+FFFD (the replacement
    character): an untrusted text (a judge's answer) that both databases store."""
    return _BAD_TEXT.sub("\ufffd", text) if _BAD_TEXT.search(text) else text


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored and sent, or None when it can."""
    found = _BAD_TEXT.search(text)
    if found is None:
        return None
    char = found.group()
    if char == "\x00":
        return "contains a NUL character (\\u0000), which PostgreSQL cannot store; remove it"
    return (
        f"contains a lone UTF-16 surrogate (\\u{ord(char):04x}), which is not valid "
        "Unicode; fix the escape or re-export the file as UTF-8"
    )


def control_problem(text: str) -> str | None:
    """Why ``text`` cannot be an identifier (an id or a name), or None.

    Identifiers go into file names, CSV rows and one-line messages: on top of
    :func:`text_problem`, control characters and line separators are refused.
    """
    found = _CONTROL.search(text)
    if found is None:
        return None
    return text_problem(text) or (
        f"contains a control character (U+{ord(found.group()):04X}); remove it"
    )


def walk_strings(value: object) -> tuple[str, str] | None:
    """The first string (key or value) of a JSON value that :func:`text_problem` refuses,
    as ``(where, problem)``; None when every string is fine.

    Iterative, so a deeply nested value cannot exhaust the stack.
    """
    stack: list[tuple[str, object]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem is not None:
                return where or "the value", problem
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                problem = text_problem(key) if isinstance(key, str) else None
                if problem is not None:
                    return f"a key of {where or 'the object'}", problem
                name = clip(key, 30) if isinstance(key, str) else str(key)
                stack.append((f"{where}.{name}" if where else f"field {name}", child))
        elif isinstance(item, list):
            for index in range(len(item) - 1, -1, -1):
                stack.append((f"{where or 'the value'}[{index}]", item[index]))
    return None


def escape_line(text: str) -> int | None:
    """The 1-based line of the first JSON escape of NUL or of a lone surrogate in
    ``text`` (a whole JSON document), or None; for messages about multi-line files."""
    for found in _BAD_ESCAPE.finditer(text):
        code = found.group(1).lower()
        if code[:2] in ("d8", "d9", "da", "db") and _LOW_ESCAPE.match(text, found.end()):
            continue  # a high surrogate followed by a low one: a valid pair
        if code[:2] in ("dc", "dd", "de", "df"):
            before = text[max(0, found.start(1) - 8) : found.start(1) - 2]
            if re.fullmatch(r"\\u[dD][89abAB][0-9a-fA-F]{2}", before):
                continue  # the low half of a valid pair
        return text.count("\n", 0, found.start()) + 1
    return None
