"""Several annotators' FLASK metadata for one instance, combined into one label set (pure).

``flask-eval annotate`` asks judge models to label each instance as FLASK's authors did:
its three most relevant skills in order, one or two domains, a difficulty level 1-5.
With several annotators, :func:`combine` merges their :class:`Labels` facet by facet; an
annotator that gave nothing for a facet (empty tuple, None) does not vote on it.

**Skills: a Borda count.** Place 1 of an annotator's list earns ``top`` points, place 2
``top - 1``, ... place ``top`` 1 point (places after ``top`` earn nothing, a skill listed
twice counts at its first place); the ``top`` skills with most points are kept, most
first. Borda suits ranked ballots: a skill every annotator places second beats one that
a single annotator places first, which a plurality of first places would get wrong, and
the order of the result is a ranking like each ballot's. Equal points are broken by the
number of first places (the stronger claim of relevance), then by ``skill_order`` (the
caller's canonical order, FLASK's list; a skill not in it comes after, by name). Every
tie that decides which skills are kept, or their order, is stated in ``Combined.ties``.

**Domains: a majority per domain.** A domain named by more than half of the annotators
that gave domains is kept (at most ``max_domains``, most votes first): each domain is a
yes/no question put to every annotator. When no domain has a majority (three annotators
naming three different domains), the most-voted one is kept, because every FLASK instance
has a domain; when several share the most votes, up to ``max_domains`` of them are kept
by ``core.types.DOMAINS``' order. Both a no-majority choice among equals and a cut at
``max_domains`` through domains of equal votes are stated.

**Difficulty: the mode.** The level most annotators gave; when several levels share the
most votes, the *lower median* of all the levels given (the middle level, or the lower of
the two middle ones): levels are ordinal, so a mean has no meaning, the median is the
ordinal centre of the votes, and taking the lower middle makes the rule deterministic
without claiming an instance harder than half of its annotators found it. Stated.

One annotator: its labels as given, no ties (nothing to combine). None: empty labels.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from flask_eval.core.types import DOMAINS

#: FLASK's difficulty levels
LEVELS: tuple[int, ...] = (1, 2, 3, 4, 5)


@dataclass(frozen=True)
class Labels:
    """FLASK metadata of one instance: ``skills`` in order of relevance, ``domains``,
    ``difficulty`` 1-5. An empty tuple or None is unknown (not given, or FLASK's ``-1``)."""

    skills: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    difficulty: int | None = None

    def __post_init__(self) -> None:
        level = self.difficulty
        if level is not None and (isinstance(level, bool) or level not in LEVELS):
            raise ValueError(f"difficulty must be a level 1-5 or None, got {level!r}")


@dataclass(frozen=True)
class Combined:
    """The combined labels, and one human-readable note per tie that had to be broken."""

    labels: Labels
    ties: tuple[str, ...] = ()


def _listed(items: Sequence[str]) -> str:
    """A, A and B, A, B and C."""
    q = list(items)
    return q[0] if len(q) == 1 else f"{', '.join(q[:-1])} and {q[-1]}"


def _quoted(names: Sequence[str]) -> str:
    """'A', 'A' and 'B', 'A', 'B' and 'C'."""
    return _listed([repr(n) for n in names])


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _order_key(order: Sequence[str]) -> dict[str, int]:
    return {name: i for i, name in enumerate(order)}


def _rank_of(index: Mapping[str, int], name: str) -> tuple[int, str]:
    """Position in a canonical order; names outside it after, by name."""
    return (index.get(name, len(index)), name)


# -- skills ---------------------------------------------------------------------------------


def _skill_ties(
    ranked: Sequence[str], points: Mapping[str, int], firsts: Mapping[str, int], top: int
) -> list[str]:
    """A note per group of equal points that overlaps the kept places and holds 2 or more
    skills: which places it competed for, what was kept or how it was ordered, and by what
    (first places, the skill order, or both)."""
    notes = []
    start = 0
    while start < min(top, len(ranked)):
        end = start
        while end < len(ranked) and points[ranked[end]] == points[ranked[start]]:
            end += 1
        group = ranked[start:end]
        if len(group) > 1:
            last = min(end, top)
            deciding = range(start, min(end - 1, top))  # pairs (i, i + 1) that matter
            by_firsts = any(firsts[ranked[i]] != firsts[ranked[i + 1]] for i in deciding)
            by_order = any(firsts[ranked[i]] == firsts[ranked[i + 1]] for i in deciding)
            places = f"place {start + 1}" if last == start + 1 else f"places {start + 1}-{last}"
            counts = ", ".join(f"{s!r} {firsts[s]}" for s in group)
            reason = " and ".join(
                [f"first places ({counts})"] * by_firsts + ["the skill order"] * by_order
            )
            kept = group[: last - start]
            if end > top:
                what = f"kept {_quoted(kept)}" + (", in this order," if len(kept) > 1 else "")
            else:
                what = f"ordered them {', '.join(repr(s) for s in kept)}"
            notes.append(
                f"skills: {_quoted(group)} tied for {places} "
                f"({_plural(points[group[0]], 'point')} each); {what} by {reason}"
            )
        start = end
    return notes


def combine_skills(
    ballots: Sequence[tuple[str, ...]], skill_order: Sequence[str], top: int = 3
) -> tuple[tuple[str, ...], list[str]]:
    """The Borda count of ranked skill lists (see the module): the kept skills, the ties."""
    points: Counter[str] = Counter()
    firsts: Counter[str] = Counter()
    for ballot in ballots:
        placed = list(dict.fromkeys(ballot))[:top]
        for place, skill in enumerate(placed):
            points[skill] += top - place
        if placed:
            firsts[placed[0]] += 1
    index = _order_key(skill_order)
    ranked = sorted(points, key=lambda s: (-points[s], -firsts[s], *_rank_of(index, s)))
    return tuple(ranked[:top]), _skill_ties(ranked, points, firsts, top)


# -- domains --------------------------------------------------------------------------------


def combine_domains(
    ballots: Sequence[tuple[str, ...]], max_domains: int = 2
) -> tuple[tuple[str, ...], list[str]]:
    """Majority per domain, else the most voted (see the module): the kept domains, ties."""
    voters = len(ballots)
    votes: Counter[str] = Counter(d for ballot in ballots for d in dict.fromkeys(ballot))
    if not votes:
        return (), []
    index = _order_key(DOMAINS)
    ranked = sorted(votes, key=lambda d: (-votes[d], *_rank_of(index, d)))
    majority = [d for d in ranked if 2 * votes[d] > voters]
    of = f"of {_plural(voters, 'annotator')}"
    if majority:
        kept = majority[:max_domains]
        if len(majority) > max_domains:
            cut = votes[kept[-1]]
            tied = [d for d in majority if votes[d] == cut]
            dropped = [d for d in tied if d not in kept]
            if dropped:
                return tuple(kept), [
                    f"domains: {_quoted(tied)} each named by {cut} {of}, more than "
                    f"{max_domains} domains with a majority; kept {_quoted(kept)} by the "
                    "domain order"
                ]
        return tuple(kept), []
    best = votes[ranked[0]]
    tied = [d for d in ranked if votes[d] == best]
    kept = tied[:max_domains]
    if len(tied) == 1:
        return tuple(kept), []
    outcome = (
        f"kept {_quoted(kept)} by the domain order" if len(kept) < len(tied) else "kept them all"
    )
    return tuple(kept), [
        f"domains: no domain named by a majority {of}; {_quoted(tied)} tied with "
        f"{_plural(best, 'vote')} each; {outcome}"
    ]


# -- difficulty -----------------------------------------------------------------------------


def combine_difficulty(levels: Sequence[int]) -> tuple[int | None, list[str]]:
    """The mode, else the lower median of all the levels (see the module): level, ties."""
    if not levels:
        return None, []
    votes = Counter(levels)
    best = max(votes.values())
    modes = sorted(level for level, n in votes.items() if n == best)
    if len(modes) == 1:
        return modes[0], []
    ordered = sorted(levels)
    median = ordered[(len(ordered) - 1) // 2]
    return median, [
        f"difficulty: levels {_listed([str(m) for m in modes])} tied with "
        f"{_plural(best, 'vote')} each (of {len(levels)}); took the lower median of all the "
        f"levels given ({', '.join(map(str, ordered))}): {median}"
    ]


# -- all three ------------------------------------------------------------------------------


def combine(
    by_annotator: Mapping[str, Labels],
    skill_order: Sequence[str],
    top: int = 3,
    max_domains: int = 2,
) -> Combined:
    """Combine several annotators' labels of one instance (rules: the module docstring)."""
    if top < 1 or max_domains < 1:
        raise ValueError(f"top and max_domains must be >= 1, got {top} and {max_domains}")
    if len(by_annotator) == 1:
        return Combined(next(iter(by_annotator.values())))
    given = list(by_annotator.values())
    skills, skill_ties = combine_skills([x.skills for x in given if x.skills], skill_order, top)
    domains, domain_ties = combine_domains([x.domains for x in given if x.domains], max_domains)
    level, level_ties = combine_difficulty(
        [x.difficulty for x in given if x.difficulty is not None]
    )
    return Combined(Labels(skills, domains, level), (*skill_ties, *domain_ties, *level_ties))
