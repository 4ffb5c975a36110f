"""A protocol's score scale as data: its lowest and highest score (pure).

Every reader (``rubrics.parse``, ``rubrics.structured``, ``rubrics.flask_review``,
``rubrics.prometheus``), every prompt that names the scale and the report's display read it
from here, so a protocol on another scale (1-10, say) is one class that sets
``Protocol.scale``. Whether a criterion may be judged N/A is the criterion's own data
(``Skill.allow_na``). Scores are integers; a scale needs at least two levels.

A criterion's rubric declares its levels too (the keys of ``Skill.rubric``);
:func:`levels_text` names them and :meth:`Scale.parse` reads a declared scale (a criteria
file's ``scale: 1-10``), so a protocol and a rubric can be compared before a run starts
(``rubrics.coverage``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: the most levels a declared scale may have (0-100): each one is a rubric's description
MAX_PARSED_LEVELS = 101


@dataclass(frozen=True)
class Scale:
    """The integer scores ``low`` .. ``high`` (both included)."""

    low: int = 1
    high: int = 5

    def __post_init__(self) -> None:
        for value in (self.low, self.high):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"a scale's ends are integers, got {value!r}")
        if self.low >= self.high:
            raise ValueError(f"a scale needs low < high, got {self.low}-{self.high}")

    @property
    def levels(self) -> tuple[int, ...]:
        return tuple(range(self.low, self.high + 1))

    @property
    def text(self) -> str:
        """``"1-5"``: how prompts and reports name the scale."""
        return f"{self.low}-{self.high}"

    def __contains__(self, value: object) -> bool:
        return (
            isinstance(value, int)
            and not isinstance(value, bool)
            and self.low <= value <= self.high
        )

    @classmethod
    def parse(cls, text: object) -> Scale:
        """The scale written ``"1-10"`` (ValueError saying what is expected otherwise)."""
        low, dash, high = str(text).strip().partition("-")
        if dash and all(t.strip().isascii() and t.strip().isdigit() for t in (low, high)):
            lo, hi = int(low), int(high)
            if lo < hi and hi - lo < MAX_PARSED_LEVELS:
                return cls(lo, hi)
        raise ValueError(
            "a scale is written low-high with integers low < high, as 1-5 or 1-10, "
            f"of at most {MAX_PARSED_LEVELS} levels"
        )

    def span(self, others: Iterable[Scale]) -> Scale:
        """The smallest scale holding this one and ``others`` (a report over judges whose
        protocols score on different scales shows them on one axis)."""
        lows, highs = [self.low], [self.high]
        for other in others:
            lows.append(other.low)
            highs.append(other.high)
        return Scale(min(lows), max(highs))


#: FLASK's, Prometheus's and BiGGen's scale: every built-in protocol's
FIVE_POINT = Scale(1, 5)


def levels_text(levels: Iterable[int]) -> str:
    """How a message names a rubric's levels: ``"1-5"`` when they run without a gap (a
    scale's text), else the levels one by one (``"1, 2, 4"``)."""
    ordered = sorted(set(levels))
    if len(ordered) > 1 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{ordered[0]}-{ordered[-1]}"
    return ", ".join(str(n) for n in ordered) or "none"
