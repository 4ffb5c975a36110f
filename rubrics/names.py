"""Criterion names that stay apart wherever they are read or printed (pure).

A criterion's name is a dictionary key for every reader (``[SCORES]`` and the structured
answer match it ignoring case; FLASK's dictionary also ignoring ``_`` and spacing), a
ledger key and a report label. Two names that a reader conflates make one judgment
unreadable forever (the readers refuse duplicate criteria: rows stayed ``running``), and
two names that print alike make a report lie. So every file that names criteria (the
criteria YAML, a skill set file) is checked at load, one line naming file and line:

- :func:`name_problem`: no invisible or look-alike character: no format character
  (category Cf: zero-width space and joiners, bidirectional overrides and isolates, soft
  hyphen, ...), no private-use, unassigned or surrogate code point, no line or paragraph
  separator, no space other than U+0020 (a no-break space prints as one), no variation
  selector or filler that prints as nothing, and no word mixing Latin, Cyrillic and Greek
  letters (``Еmpathy`` with a Cyrillic Е prints as ``Empathy``). Control characters are
  refused before, by ``core.text.control_problem``.
- :func:`name_key`: what two names may not share: NFKC (fullwidth and compatibility forms
  fold to their plain letters), then case folded, ``_`` read as a space and spacing runs
  collapsed: the union of what every reader ignores, so names with different keys are
  apart for every protocol.
"""

from __future__ import annotations

import unicodedata

_CATEGORIES = {
    "Cf": "an invisible format character",
    "Co": "a private-use character",
    "Cn": "an unassigned code point",
    "Cs": "a lone surrogate",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
}
#: code points that print as nothing though their category is not Cf
_BLANK = frozenset(
    [
        *(0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0),
        *range(0x180B, 0x1810),  # Mongolian free variation selectors
        *range(0xFE00, 0xFE10),  # variation selectors
        *range(0xE0100, 0xE01F0),  # variation selectors supplement
    ]
)
_SCRIPTS = ("LATIN", "CYRILLIC", "GREEK")


def name_key(name: str) -> str:
    """The form under which two criterion names collide (see the module docstring)."""
    text = unicodedata.normalize("NFKC", name).casefold().replace("_", " ")
    return " ".join(text.split())


def name_problem(name: str) -> str | None:
    """Why ``name`` could print like another name, or None."""
    for ch in name:
        code = ord(ch)
        category = unicodedata.category(ch)
        what = _CATEGORIES.get(category)
        if what is None and category == "Zs" and ch != " ":
            what = "a space other than the plain one"
        if what is None and code in _BLANK:
            what = "a character that prints as nothing"
        if what is not None:
            return f"contains {what} (U+{code:04X}), which hides what the name is; remove it"
    for word in name.split():
        scripts = sorted({s for ch in word if ch.isalpha() and (s := _script(ch))})
        if len(scripts) > 1:
            mixed = " and ".join(s.title() for s in scripts)
            return (
                f"mixes {mixed} letters in one word ({word!r}), so it looks like another "
                "name; write it in one script"
            )
    return None


def _script(ch: str) -> str | None:
    first = unicodedata.name(ch, "").split(" ", 1)[0]
    return first if first in _SCRIPTS else None
