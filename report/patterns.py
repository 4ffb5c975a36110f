"""Judges whose scores follow the criterion's position in the prompt (pure).

A judge asked for several criteria in one call (FLASK's one call per instance) should
score each on the response; a judge too small for the task may instead write a pattern:
SmolLM2 gave each criterion the score of its position (the 1st criterion 1 in 20 of 20
calls, the 2nd 2 in 20 of 20). Such scores parse, so nothing fails; this check finds them.

For one judge, take every scored judgment read from a call that asked for two or more
criteria, with its criterion's *position* in that call (1 = asked first). For each
position, its most common score; the *share* is the fraction of judgments whose score is
their position's most common one: 1.0 when the score is a function of the position,
near the largest score frequency for a judge whose scores do not depend on it. A judge is
flagged when

- it has at least :data:`MIN_JUDGMENTS` such judgments,
- the share is at least :data:`THRESHOLD` (0.9), and
- two positions have different most common scores (a judge giving every criterion the
  same score is not following the position: its scores are constant, which is another
  matter).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: the fewest judgments in multi-criterion calls a judge is checked on
MIN_JUDGMENTS = 10
#: the share of judgments at their position's most common score that flags a judge
THRESHOLD = 0.9


@dataclass(frozen=True)
class PositionScore:
    """At one position: the most common score, how many judgments have it, of ``n``."""

    position: int
    score: float
    count: int
    n: int


@dataclass(frozen=True)
class PositionPattern:
    """How far one judge's scores are a function of the criterion's position."""

    judge: str
    n: int  # scored judgments from calls asking for 2 or more criteria
    share: float | None  # at their position's most common score (None: n is 0)
    positions: tuple[PositionScore, ...]
    flagged: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "judge": self.judge,
            "n": self.n,
            "share": self.share,
            "flagged": self.flagged,
            "positions": [vars(p) for p in self.positions],
        }

    def note(self) -> str:
        """The report's warning for a flagged judge."""
        parts = ", ".join(
            f"{_ordinal(p.position)} criterion {_number(p.score)} in {p.count}/{p.n}"
            for p in self.positions
        )
        matched = sum(p.count for p in self.positions)
        share = f"{100 * (self.share or 0):.0f}%"
        return (
            f"judge {self.judge}: {matched} of its {self.n} scores ({share}) "
            "are a function of the criterion's position in the prompt, not of the response "
            f"({parts}); its scores say little about the models"
        )


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _number(score: float) -> str:
    return str(int(score)) if float(score).is_integer() else f"{score:g}"


def pattern(judge: str, judged: Iterable[tuple[int, float]]) -> PositionPattern:
    """The pattern of one judge's ``(position, score)`` judgments (from calls with two or
    more criteria)."""
    by_position: dict[int, Counter[float]] = {}
    for position, score in judged:
        by_position.setdefault(position, Counter())[score] += 1
    return _pattern(judge, by_position)


def _pattern(judge: str, by_position: Mapping[int, Counter[float]]) -> PositionPattern:
    positions = []
    for position in sorted(by_position):
        counts = by_position[position]
        score, count = min(counts.items(), key=lambda item: (-item[1], item[0]))
        positions.append(PositionScore(position, score, count, sum(counts.values())))
    n = sum(p.n for p in positions)
    share = sum(p.count for p in positions) / n if n else None
    distinct = len({p.score for p in positions}) > 1
    flagged = n >= MIN_JUDGMENTS and share is not None and share >= THRESHOLD and distinct
    return PositionPattern(judge, n, share, tuple(positions), flagged)


def patterns(
    rows: Iterable[tuple[str, str, float | None]], judges: Sequence[str] = ()
) -> list[PositionPattern]:
    """Every judge's pattern from ``(judge, call, score)`` rows, a call's rows in the
    order it asked for their criteria: a criterion's position is its rank among its
    call's rows (``score`` None: N/A or failed, which takes its position but is not
    counted). Calls asking for one criterion are left out. Judges in the order of
    ``judges``, then of the rows."""
    calls: dict[tuple[str, str], list[float | None]] = {}
    for judge, call, score in rows:
        calls.setdefault((judge, call), []).append(score)
    judged: dict[str, list[tuple[int, float]]] = {j: [] for j in judges}
    for (judge, _), scores in calls.items():
        mine = judged.setdefault(judge, [])
        if len(scores) > 1:
            mine += [(at, s) for at, s in enumerate(scores, start=1) if s is not None]
    return [pattern(judge, items) for judge, items in judged.items()]


def patterns_of_counts(
    counts: Iterable[tuple[str, int, float, int]], judges: Sequence[str] = ()
) -> list[PositionPattern]:
    """:func:`patterns` from judgments already counted (the ledger's SQL does it):
    ``(judge, position, score, judgments)`` of the scored judgments read from calls that
    asked for two or more criteria. Judges in the order of ``judges``, then of the rows."""
    judged: dict[str, dict[int, Counter[float]]] = {j: {} for j in judges}
    for judge, position, score, n in counts:
        by_position = judged.setdefault(judge, {})
        by_position.setdefault(position, Counter())[score] += n
    return [_pattern(judge, by_position) for judge, by_position in judged.items()]
