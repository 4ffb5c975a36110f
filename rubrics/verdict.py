"""The end-of-answer verdict: one grammar for Prometheus's absolute and relative readers (pure).

An evaluator LM trained on Prometheus's format ends its feedback with a verdict:
``[RESULT] 4`` (absolute) or ``[RESULT] B`` (relative), and in practice many variants of
it, the ones prometheus-eval's own parser accepts among them (``[Result] Score: 2``,
``(Score 5)``, ``[Score 4]``, ``... a score of 4``, ``Result: 4``, ``[RESULT: B]``,
``[Response B]``). A :class:`VerdictGrammar` is the whole of what one mode accepts:

- **markers**, in two ranks. *Primary*: ``[RESULT]`` and ``[RESULT:`` (any case and
  spacing). *Secondary*: the mode's others (absolute: ``[SCORE]``, ``[Score``,
  ``(Score``, ``score of``, ``(final|overall) score``, ``score``, ``result``; relative:
  ``[Response``, ``result``). ``Result: X`` means the same in both modes: a secondary
  marker followed by the mode's value.
- between a marker and its value: emphasis marks (``*_`"'``), spaces, one colon, one
  opening bracket or parenthesis, and the mode's optional **lead** words (absolute:
  ``score of``, ``score``, ``result``, as in ``[Result] Score: 2``; relative:
  ``response``, as in ``[Result] Response B``);
- the **value** (absolute: ASCII digits, optionally ``.0``; relative: the letter A or B);
- after it, up to the end of the answer: at most a closing bracket or parenthesis, the
  mode's **suffix** (absolute: ``/5``, ``out of 5`` on the protocol's scale), a period or
  an exclamation mark, emphasis marks and spaces. Nothing else.

Reading (:meth:`VerdictGrammar.read`), after dropping trailing blank lines and code fences:

1. If the answer holds a primary marker anywhere, the verdict is a primary one at the very
   end, and every other primary marker followed by a value must give the same value;
   otherwise it is refused (text after the verdict, or two different results).
2. Without any primary marker, the verdict is a secondary one at the very end, and every
   other secondary marker followed by a value must give the same value (a rubric label
   such as ``Score 5:``, a value followed by a colon, is not a verdict).

The neutralizer (:meth:`VerdictGrammar.neutralize`) is built from the same patterns: it
rewrites (``rubrics.untrusted.defuse``) every primary marker and every marker followed by
a value in an untrusted text, so a judge quoting that text verbatim at the end of its
answer quotes nothing rule 1 or 2 can read. Every pattern is ASCII (``re.ASCII``): ``ſ``
is no ``s`` and a fullwidth digit is no digit (see docs/design/protocols.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from flask_eval.rubrics.protocol import RESULT_MARKER
from flask_eval.rubrics.untrusted import defuse

FLAGS = re.IGNORECASE | re.ASCII
#: emphasis and quote marks a judge puts around a marker or a value; a run of spaces.
#: Every repeated run is possessive (``*+``): adjacent optional runs cannot backtrack
#: into each other, so a long run in an answer stays linear.
DECOR = r"[*_`\"']*+"
SPACE = r"\s*+"
SEP = rf"{DECOR}{SPACE}:?{SPACE}{DECOR}{SPACE}"
_FENCE_RE = re.compile(r"^\s*+(?:```+|~~~+)\s*+$")


def body(text: str) -> str:
    """``text`` without trailing blank lines and code fences."""
    lines = text.rstrip().splitlines()
    while lines and (not lines[-1].strip() or _FENCE_RE.match(lines[-1])):
        lines.pop()
    return "\n".join(lines).rstrip()


@dataclass(frozen=True)
class Found:
    """A verdict read: its raw value and where it starts, or the problem (``value`` None)."""

    value: str | None
    start: int = -1
    problem: str = ""


@dataclass(frozen=True)
class VerdictGrammar:
    """What one mode accepts as an end-of-answer verdict (see the module docstring).

    ``primary`` and ``secondary`` are regular-expression alternatives of markers,
    ``lead`` of the words that may stand between a marker and its value, ``value`` of the
    value itself, ``suffix`` of what may follow it (``/5``); ``same`` tells two raw values
    apart (``4`` and ``4.0`` are the same score); ``shown`` is how problems show the
    expected verdict (``"[RESULT] N"``) and ``what`` name its value (``score``).
    """

    primary: str
    secondary: str
    lead: str
    value: str
    suffix: str
    same: Callable[[str], object]
    shown: str
    what: str
    _compiled: dict[str, re.Pattern[str]] = field(default_factory=dict, compare=False, repr=False)

    def _pattern(self, key: str, source: str) -> re.Pattern[str]:
        found = self._compiled.get(key)
        if found is None:
            found = self._compiled[key] = re.compile(source, FLAGS)
        return found

    def occurrence(self, markers: str, value: str | None = None) -> str:
        """A marker, what may stand between it and a value, and the value."""
        return (
            rf"(?P<mark>{markers}){SEP}(?:(?:{self.lead}){SEP})?[(\[]?{SPACE}{DECOR}{SPACE}"
            rf"(?P<value>{value or self.value})"
        )

    def tail(self, markers: str, value: str | None = None) -> str:
        """:meth:`occurrence` and nothing but closing marks up to the end of the text."""
        return (
            self.occurrence(markers, value)
            + rf"{SPACE}{DECOR}{SPACE}[)\]]?{SPACE}(?:{self.suffix})?{SPACE}{DECOR}{SPACE}"
            rf"[.!]?{SPACE}{DECOR}{SPACE}\Z"
        )

    # --- the compiled patterns (shared by the reader and the neutralizer) ---------------

    @property
    def primary_any(self) -> re.Pattern[str]:
        return self._pattern("primary_any", self.primary)

    @property
    def primary_valued(self) -> re.Pattern[str]:
        return self._pattern("primary_valued", self.occurrence(self.primary))

    @property
    def secondary_valued(self) -> re.Pattern[str]:
        return self._pattern("secondary_valued", self.occurrence(self.secondary))

    @property
    def primary_tail(self) -> re.Pattern[str]:
        return self._pattern("primary_tail", self.tail(self.primary))

    @property
    def secondary_tail(self) -> re.Pattern[str]:
        return self._pattern("secondary_tail", self.tail(self.secondary))

    def custom_tail(self, key: str, primary: bool, value: str) -> re.Pattern[str]:
        """The tail of either rank with another value (a tie word, non-ASCII digits), for
        a precise problem only: never read as a verdict."""
        markers = self.primary if primary else self.secondary
        return self._pattern(f"tail:{key}:{primary}", self.tail(markers, value))

    def neutralize(self, text: str) -> str:
        """``text`` with every primary marker and every marker followed by a value
        rewritten (``rubrics.untrusted.defuse``), so no quote of it can be read."""
        return defuse(text, (self.primary_any, self.primary_valued, self.secondary_valued))

    # --- reading --------------------------------------------------------------------------

    def read(self, text: str) -> Found:
        """The verdict of ``text`` (rules in the module docstring)."""
        answer = body(text)
        if not answer:
            return Found(None, problem="empty output")
        primary = self.primary_any.search(answer) is not None
        tail = self.primary_tail if primary else self.secondary_tail
        valued = self.primary_valued if primary else self.secondary_valued
        match = tail.search(answer)
        if match is None:
            return Found(None, problem=self._why_not(answer, primary))
        final = self.same(match.group("value"))
        others = sorted(
            {
                m.group("value")
                for m in valued.finditer(answer, 0, match.start())
                if not _is_label(answer, m.end()) and self.same(m.group("value")) != final
            }
        )
        if others:
            kind = "results" if primary else "verdicts"
            return Found(
                None, problem=f"two different {kind}: {', '.join([*others, match['value']])}"
            )
        return Found(match.group("value"), match.start())

    def _why_not(self, answer: str, primary: bool) -> str:
        if self.custom_tail("digits", primary, r"(?u:\d)++").search(answer):
            return f"the {self.what} is not written in ASCII digits (0-9)"
        if primary:
            return f"no final {self.shown} verdict (text follows the last {RESULT_MARKER})"
        return f"no final {self.shown} verdict"


def _is_label(text: str, end: int) -> bool:
    """Whether the value ending at ``end`` is followed by a colon (``Score 5:``, a rubric
    level's label echoed in the feedback), which makes it no verdict."""
    rest = text[end : end + 40].lstrip(" \t*_`")
    return rest.startswith(":")
