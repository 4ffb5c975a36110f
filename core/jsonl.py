"""Reading JSON Lines input files strictly: one object per line, errors at ``file:line``.

Used for every JSON Lines input (instances, responses, reference scores), so the rules
are the same everywhere: a regular file only (:mod:`core.files`), lines of at most
:data:`MAX_LINE_BYTES`, strict UTF-8, a byte-order mark only at the start, one JSON
object per line with each key once, and no string that cannot be stored or sent
(:func:`core.text.text_problem`).
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from flask_eval.core.errors import InputError
from flask_eval.core.files import MIB, open_input
from flask_eval.core.text import clip, walk_strings

__all__ = [
    "EMPTY_MESSAGE",
    "MAX_LINE_BYTES",
    "DuplicateKey",
    "json_type",
    "parse_object",
    "read_json_lines",
    "read_line",
    "unique_keys",
]

#: Longest accepted line, in bytes (without the newline).
MAX_LINE_BYTES = MIB

EMPTY_MESSAGE = "no records; expected JSON Lines (one JSON object per line)"


class DuplicateKey(Exception):
    """A JSON object with a key twice (raised by :func:`unique_keys`)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook``: JSON allows a key twice (the last wins); we refuse it."""
    record = dict(pairs)
    if len(record) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return record


#: the C scanner of ``json.loads(text, object_pairs_hook=unique_keys)``: the same decoder
_DECODER = json.JSONDecoder(object_pairs_hook=unique_keys)
_SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]


def read_json_lines(
    path: str, what: str = "a JSON Lines file", *, allow_empty: bool = False
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` for every non-blank line of a JSON Lines file.

    Raises InputError for a file that is missing, unreadable or not a regular file, a
    line over :data:`MAX_LINE_BYTES`, invalid UTF-8, invalid JSON, a line that is not an
    object, unstorable text, or (unless ``allow_empty``) a file with no records.
    """
    lineno = 0
    records = 0
    with open_input(path, what) as handle:
        while True:
            try:
                raw = read_line(
                    handle, MAX_LINE_BYTES, path, lineno + 1, "put one JSON object per line"
                )
            except OSError as exc:
                where = lineno + 1
                raise InputError(f"cannot read file: {exc.strerror or exc}", path, where) from None
            if not raw:
                break
            lineno += 1
            if raw.startswith(codecs.BOM_UTF8):
                if lineno > 1:
                    raise InputError(
                        "line starts with a byte-order mark (U+FEFF), which only the first "
                        "line may have; were two files joined? remove it",
                        path,
                        lineno,
                    )
                raw = raw[len(codecs.BOM_UTF8) :]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(
                    f"invalid UTF-8 (byte {exc.start + 1} of the line); save the file as UTF-8",
                    path,
                    lineno,
                ) from None
            if not text or text.isspace():  # not text.strip(), without copying the line
                continue
            yield lineno, _parse_fast(text, path, lineno)
            records += 1
    if records == 0 and not allow_empty:
        raise InputError(EMPTY_MESSAGE, path, None)


class Readable(Protocol):
    """What :func:`read_line` reads: a binary file, a decompressing one included."""

    def readline(self, size: int = -1, /) -> bytes: ...


def read_line(handle: Readable, limit: int, path: str, line: int, hint: str) -> bytes:
    """The next line of ``handle`` (with its newline; ``b""`` at the end), never reading
    more than ``limit + 1`` bytes of it: a longer line is an InputError naming ``path``
    and ``line`` (``hint`` says what to do), however long it is, so memory stays flat
    whatever a file holds (a compressed file may expand one line to gigabytes)."""
    raw = handle.readline(limit + 1)
    if len(raw) > limit and not raw.endswith(b"\n"):
        size = f"{limit // MIB} MiB" if limit % MIB == 0 else f"{limit} bytes"
        raise InputError(f"line is longer than {limit} bytes ({size}); {hint}", path, line)
    return raw


def parse_object(text: str, path: str, line: int) -> dict[str, Any]:
    """One line's JSON object; InputError naming ``path:line`` otherwise."""
    try:
        value = json.loads(text, object_pairs_hook=unique_keys)
    except DuplicateKey as exc:
        raise InputError(
            f"key {clip(exc.key)} appears twice in the object; give each key once", path, line
        ) from None
    except json.JSONDecodeError as exc:
        hint = "each line must be one complete JSON object"
        if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
            hint = "the record looks truncated; " + hint
        elif exc.msg == "Extra data" and "\r" in text.strip():
            hint = "lines seem to end with CR only; use LF (or CRLF) line endings"
        raise InputError(
            f"invalid JSON: {exc.msg.removesuffix(' at')} at column {exc.colno}; {hint}", path, line
        ) from None
    except RecursionError:
        raise InputError("invalid JSON: nested too deeply", path, line) from None
    except ValueError as exc:
        detail = "a number has more than 4300 digits" if "digits" in str(exc) else str(exc)[:80]
        raise InputError(f"invalid JSON: {detail}", path, line) from None
    return _checked(value, text, path, line)


def _parse_fast(text: str, path: str, line: int) -> dict[str, Any]:
    """:func:`parse_object` of a well-formed line at about half its cost: the C scanner
    is called directly (``json.loads`` goes through three Python calls and two regular
    expressions a line). Whatever it does not take as is (leading whitespace, anything
    after the object, a scanner error, a key twice) goes to :func:`parse_object`, which
    returns the same value or raises the line's error."""
    try:
        value, end = _SCAN(text, 0)
    except Exception:
        return parse_object(text, path, line)
    if end != len(text) and text[end:].strip(" \t\n\r"):  # json.loads's whitespace
        return parse_object(text, path, line)
    return _checked(value, text, path, line)


def _checked(value: object, text: str, path: str, line: int) -> dict[str, Any]:
    """``value`` parsed from ``text``, if it is an object whose strings can be stored."""
    if not isinstance(value, dict):
        raise InputError(
            f"expected a JSON object, got {json_type(value)}; put one object per line",
            path,
            line,
        )
    # NUL and lone surrogates only come from \u escapes: strict UTF-8 decoding refuses
    # encoded surrogates and JSON refuses a raw NUL, so lines without "\u" are clean.
    if "\\" in text and "\\u" in text:  # a backslash's look-up is ten times faster
        found = walk_strings(value)
        if found is not None:
            where, problem = found
            raise InputError(f"{where} {problem}", path, line)
    return value


def json_type(value: object) -> str:
    """The JSON name of a parsed value's type, for messages."""
    if isinstance(value, bool):
        return "boolean"
    names = {type(None): "null", int: "number", float: "number", str: "string", list: "array"}
    return names.get(type(value), "object" if isinstance(value, dict) else type(value).__name__)
