"""Untrusted text made unable to carry a verdict, from each reader's own patterns (pure).

A reader finds a score only through a marker (``[SCORES]``, ``[VERDICT]``, ``[RESULT]``,
``Score:``, a final dictionary naming a criterion ...). Each reader exports the compiled
patterns of what it accepts as a marker, and :func:`defuse` rewrites every match of those
same pattern objects in an untrusted text (a response, an instruction, a reference) until
none is left. A judge that quotes such a text verbatim, even as the very end of its answer,
therefore quotes no marker its reader accepts: the neutralizer covers the reader's grammar
by construction, not by a second list that could drift from it.

A match is rewritten visibly and minimally: its ASCII brackets, braces, parentheses and
colons become their fullwidth forms (``[RESULT]`` -> ``［RESULT］``, ``Score: 5`` ->
``Score： 5``); a match without any (``score of 4``) has its first letter made fullwidth
(``ｓcore of 4``). Every pattern is ASCII-only (``re.ASCII``) and every rewrite replaces
ASCII characters with non-ASCII ones, so the loop ends (a few rounds at most).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

#: the characters a rewrite prefers, in this order of preference
_PUNCT = "[](){}:"
_FULLWIDTH_OFFSET = 0xFEE0  # "!" (U+0021) .. "~" (U+007E) -> U+FF01 .. U+FF5E


def fullwidth(ch: str) -> str:
    """The fullwidth form of a printable ASCII character (others unchanged)."""
    return chr(ord(ch) + _FULLWIDTH_OFFSET) if "!" <= ch <= "~" else ch


def defang(span: str) -> str:
    """``span`` with its brackets, braces, parentheses and colons made fullwidth, or, when
    it has none, its first printable ASCII character."""
    if any(ch in _PUNCT for ch in span):
        return "".join(fullwidth(ch) if ch in _PUNCT else ch for ch in span)
    for i, ch in enumerate(span):
        if "!" <= ch <= "~":
            return span[:i] + fullwidth(ch) + span[i + 1 :]
    return span


def defuse(
    text: str,
    patterns: Sequence[re.Pattern[str]],
    rewrite: Callable[[re.Match[str]], str] | None = None,
) -> str:
    """``text`` in which no pattern of ``patterns`` matches any more.

    Each match is replaced by ``rewrite(match)`` (default: :func:`defang` of the whole
    match). The rounds
    repeat until no pattern matches; a rewrite that changes nothing stops them (a pattern
    that matched only non-ASCII text, which no reader's pattern does).
    """
    change = rewrite or (lambda match: defang(match.group(0)))
    while True:
        before = text
        for pattern in patterns:
            text = pattern.sub(change, text)
        if text == before:
            return text
