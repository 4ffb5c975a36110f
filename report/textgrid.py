"""Plain-text tables (pure: strings only): numbers for display, names that wrap instead
of being cut, and :func:`grid`, a table of keys by columns that fits a width (the text
report's models-as-columns tables, paired-comparison and win-rate matrices)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

NONE_TEXT = "-"
MAX_KEY_WIDTH = 40
DEFAULT_WIDTH = 100
#: the widest column of a models-as-columns table (longer names wrap)
MAX_COLUMN_WIDTH = 10
#: where a name may wrap, strongest first
_BREAKS = ("/", " ", "-_.")


def fmt(value: float | None, digits: int = 2) -> str:
    """A number for display, or "-" for None."""
    return NONE_TEXT if value is None else f"{value:.{digits}f}"


def fmt_interval(low: float | None, high: float | None, digits: int = 2) -> str:
    return "" if low is None or high is None else f"[{low:.{digits}f}, {high:.{digits}f}]"


def clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 3, 1)] + "..."


def wrap_name(name: str, width: int) -> list[str]:
    """``name`` in pieces of at most ``width`` characters, never losing a character: cut
    after the last ``/`` of a piece, else its last space, ``-``, ``_`` or ``.`` (leaving
    a piece of at least half the width), else at ``width``."""
    pieces, rest = [], name
    while len(rest) > width:
        cut = 0
        for seps in _BREAKS:
            cut = max(rest.rfind(sep, 0, width) for sep in seps) + 1
            if cut >= width // 2:
                break
        cut = cut if cut >= width // 2 else width
        pieces.append(rest[:cut])
        rest = rest[cut:]
    return [*pieces, rest] if rest or not pieces else pieces


def column_width(names: Sequence[str], least: int = 6, most: int = MAX_COLUMN_WIDTH) -> int:
    return max(least, min(most, max((len(n) for n in names), default=least)))


# -- a table of keys by columns -----------------------------------------------------------

#: a section of a grid: (title, dimension, rows); a row is (key, label), key None for a
#: heading line inside the section (a task table's capability); a section without a
#: title has its rows unindented
Section = tuple[str, str, Sequence[tuple[str | None, str]]]


def _fitting_width(columns: int, room: int, longest: int, least: int) -> tuple[int, int]:
    """(column width, gap): the widest columns (up to the longest name, at most
    :data:`MAX_COLUMN_WIDTH`) that fit in ``room`` two spaces apart, or one apart when
    that fits names whole; when even ``least`` does not fit, as wide as names need (the
    columns then continue below)."""
    want = max(least, min(MAX_COLUMN_WIDTH, longest))
    for gap in (2, 1):
        fits = [w for w in range(least, want + 1) if columns * (w + gap) <= room]
        if fits and (max(fits) == want or gap == 1):
            return max(fits), gap
    return want, 2


def grid(
    sections: Sequence[Section],
    heads: Sequence[Sequence[str]],
    value: Callable[[int, str, str], str],
    width: int = DEFAULT_WIDTH,
    indent: str = "  ",
    least: int = 6,
) -> list[str]:
    """Keys (rows, by section) by columns. ``heads[c]`` are the names that head column c,
    one above the other, each wrapped to the column width (never cut); ``value(c,
    dimension, key)`` is its cell. The columns are as wide as fits ``width`` (at least
    ``least``); columns that do not fit continue in another table below."""
    if not heads or not any(rows for _, _, rows in sections):
        return []
    labels = [(2 if title else 0) + len(x) for title, _, rows in sections for _, x in rows]
    key_width = min(max([len(t) for t, _, _ in sections] + labels), MAX_KEY_WIDTH)
    longest = max(len(name) for head in heads for name in head)
    cw, gap = _fitting_width(len(heads), width - len(indent) - key_width, longest, least)
    wrapped = [[piece for name in head for piece in wrap_name(name, cw)] for head in heads]
    per = max(1, (width - len(indent) - key_width) // (cw + gap))
    sep = " " * gap
    out: list[str] = []
    for start in range(0, len(heads), per):
        chunk = range(start, min(start + per, len(heads)))
        depth = max(len(wrapped[c]) for c in chunk)
        for level in range(depth):
            cells = ""
            for c in chunk:
                head = wrapped[c]
                line = head[level - (depth - len(head))] if level >= depth - len(head) else ""
                cells += f"{sep}{line:>{cw}}"
            out.append(f"{indent}{'':<{key_width}}{cells}".rstrip())
        for title, dimension, rows in sections:
            if not rows:
                continue
            inner = indent + "  " if title else indent
            if title:
                out.append(f"{indent}{title}")
            room = key_width - len(inner) + len(indent)
            for key, label in rows:
                text = clip(label, room)
                if key is None:
                    out.append(f"{inner}{text}")
                    continue
                cells = "".join(f"{sep}{value(c, dimension, key):>{cw}}" for c in chunk)
                out.append(f"{inner}{text:<{room}}{cells}".rstrip())
        out.append("")
    return out[:-1]
