"""Reading an annotator's labels from the final ``[LABELS] {...}`` line (pure).

Labels come ONLY from the last non-empty line of the answer (bare code-fence lines after
it are dropped, as rubrics/parse.py does), in the grammar of ``rubrics.parse.MarkerLine``:
the marker, a JSON object on the same line, at most a period after it. Anything else is
refused, never guessed:

- text after the marker line (the line must end the answer);
- an earlier marker line that differs from the last one (which one would the model mean?);
- per facet: a label off the label space, a label listed twice, the wrong number of
  skills (exactly ``LabelSpace.skill_count``) or domains (1 to ``domain_count``), a
  difficulty that is not a JSON integer among the space's levels (``true``, ``3.0`` and
  ``"3"`` are refused), a facet given twice or missing.

A problem of one facet leaves the others read. A read facet has score None and its labels
as JSON text in ``Reading.values`` (skills and domains a list in the space's spelling and
the answer's order, difficulty an integer), its rationale from the answer's section for
it (``Skills: ...``) or else the whole text before the final line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from flask_eval.rubrics.grading import Criterion
from flask_eval.rubrics.labels import LabelSpace
from flask_eval.rubrics.parse import (
    RATIONALE_LIMIT,
    MarkerLine,
    Pairs,
    Reading,
    rationale_sections,
    reject_constant,
    split_keys,
)
from flask_eval.rubrics.protocol import LABELS_MARKER

#: the three facets of an instance's metadata: the criteria of an annotation run
FACETS: tuple[str, ...] = ("skills", "domains", "difficulty")

#: our final labels line, read and neutralized from one pattern
LABELS_LINE = MarkerLine(LABELS_MARKER)

_FENCE_RE = re.compile(r"^\s*(```+|~~~+)\s*$")
_CLIP = 40


def facet_names(criteria: Sequence[Criterion] | Sequence[str]) -> list[str]:
    """The facets ``criteria`` name, in :data:`FACETS` order; ValueError for none, an
    unknown name or a facet named twice."""
    names = [c if isinstance(c, str) else c.name for c in criteria]
    if not names:
        raise ValueError("at least one facet is required")
    unknown = [n for n in names if n not in FACETS]
    if unknown:
        raise ValueError(f"unknown facets {unknown}; the facets are: {', '.join(FACETS)}")
    if len(set(names)) != len(names):
        raise ValueError(f"a facet is requested twice: {names}")
    return [f for f in FACETS if f in names]


def _shown(value: Any) -> str:
    text = "{...}" if isinstance(value, Pairs) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _CLIP else text[: _CLIP - 3] + "..."


def _opens_with_marker(line: str) -> bool:
    return LABELS_LINE.pattern.match(line.strip().lstrip("*_` \t")) is not None


def _names(
    raw: Any, what: str, find: Callable[[str], str | None], low: int, high: int
) -> tuple[Any, str | None]:
    """A list of ``low``..``high`` distinct labels found by ``find``, or why not."""
    count = str(low) if low == high else f"{low} to {high}"
    if not isinstance(raw, list) or isinstance(raw, Pairs):
        return None, f"{what}s must be a list of {count} names, got {_shown(raw)}"
    names: list[str] = []
    for item in raw:
        name = find(item) if isinstance(item, str) else None
        if name is None:
            return None, f"{what} not in the label space: {_shown(item)}"
        if name in names:
            return None, f"{what} listed twice: {_shown(name)}"
        names.append(name)
    if not low <= len(names) <= high:
        return None, f"expected {count} {what}s, got {len(names)}"
    return names, None


def _value(facet: str, raw: Any, space: LabelSpace) -> tuple[Any, str | None]:
    """The canonical labels of one facet, or the problem with them."""
    if facet == "skills":
        n = space.skill_count
        return _names(raw, "skill", space.skill, n, n)
    if facet == "domains":
        return _names(raw, "domain", space.domain, 1, space.domain_count)
    levels = space.level_numbers
    if isinstance(raw, bool) or not isinstance(raw, int) or raw not in levels:
        shown = ", ".join(map(str, sorted(levels)))
        return None, f"difficulty must be one level number ({shown}), got {_shown(raw)}"
    return raw, None


def read_labels(text: str, facets: Sequence[str], space: LabelSpace) -> Reading:
    """Each of ``facets``' labels (``Reading.values``) or problem, from the final
    ``[LABELS]`` line of ``text`` (the rules in the module docstring)."""
    names = facet_names(facets)
    requested = {f.casefold(): f for f in names}
    marker = LABELS_MARKER

    def every(problem: str) -> Reading:
        return Reading({}, dict.fromkeys(names, problem), {})

    lines = text.rstrip().splitlines()
    while lines and (not lines[-1].strip() or _FENCE_RE.match(lines[-1])):
        lines.pop()
    if not lines:
        return every("empty output")
    marked = [i for i, line in enumerate(lines) if _opens_with_marker(line)]
    if not marked:
        return every(LABELS_LINE.no_line)
    if marked[-1] != len(lines) - 1:
        return every(f"{LABELS_LINE.no_line} (a {marker} line is followed by other text)")
    body = LABELS_LINE.body(lines[-1].strip())
    if body is None:
        return every(f"text follows the JSON object of the {marker} line")
    if not body:
        return every(f"no complete JSON object after {marker}")
    if any(LABELS_LINE.body(lines[i].strip()) != body for i in marked[:-1]):
        return every(f"two {marker} lines that differ: the answer must have one")
    try:
        pairs = json.loads(body, object_pairs_hook=Pairs, parse_constant=reject_constant)
    except (ValueError, RecursionError) as exc:
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else "not valid JSON"
        return every(f"invalid JSON after {marker}: {detail}")
    if not isinstance(pairs, Pairs):
        return every(f"{marker} must be followed by a JSON object")
    found, twice, extra = split_keys(pairs, lambda key: requested.get(key.strip().casefold()))
    scores: dict[str, int | None] = {}
    values: dict[str, str] = {}
    problems: dict[str, str] = {}
    for name in names:
        facet = requested[name.casefold()]
        if facet in twice:
            problems[name] = f"facet given twice: {facet}"
        elif facet not in found:
            problems[name] = f"missing facet: {facet}"
        else:
            value, problem = _value(facet, found[facet], space)
            if problem is not None:
                problems[name] = problem
            else:
                scores[name] = None
                values[name] = json.dumps(value, ensure_ascii=False)
    rationale = "\n".join(lines[:-1]).strip()[:RATIONALE_LIMIT]
    sections = rationale_sections(rationale, names)
    rationales = {name: sections.get(name, rationale) for name in scores}
    return Reading(scores, problems, rationales, tuple(extra), values)
