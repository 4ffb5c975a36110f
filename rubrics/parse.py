"""Read a judge's scores from the final ``[SCORES] {...}`` line of its output (pure).

Scores come ONLY from the last non-empty line of the output (after dropping trailing
markdown code-fence lines such as a bare fence). That line must be the marker ``[SCORES]``
followed by a JSON object; the only decorations tolerated are markdown emphasis and code
marks around the marker or the object (``**[SCORES]** {...}``, a line wrapped in single
backticks, ``[SCORES]: {...}``). Nothing is ever guessed: no search for "Score: N" and no
fallback to earlier lines, because earlier text may quote the (untrusted) response.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from flask_eval.rubrics.protocol import SCORES_MARKER

MIN_SCORE = 1
MAX_SCORE = 5
#: longest rationale kept per criterion (characters)
RATIONALE_LIMIT = 8_000

_NA_STRINGS = frozenset({"n/a", "na"})
_FENCE_RE = re.compile(r"^\s*(```+|~~~+)\s*$")
_DECORATION = "*`"
_INT_STRING_RE = re.compile(r"^\d+(\.0+)?$")
_NO_FINAL_LINE = f'no final "{SCORES_MARKER} {{...}}" line'


@dataclass(frozen=True)
class Parsed:
    """The outcome of :func:`parse`: exactly one of ``scores`` and ``error`` is set.

    ``scores`` maps each requested skill (canonical name, request order) to 1-5, or None
    for N/A; ``error`` is a short description of what was wrong.
    """

    scores: Mapping[str, int | None] | None
    error: str | None

    def __post_init__(self) -> None:
        if (self.scores is None) == (self.error is None):
            raise ValueError("exactly one of scores and error must be set")
        if self.scores is not None:
            object.__setattr__(self, "scores", MappingProxyType(dict(self.scores)))

    @property
    def ok(self) -> bool:
        return self.scores is not None


@dataclass(frozen=True)
class Reading:
    """What one judge answer says, criterion by criterion.

    ``scores`` holds the criteria read (1-5, or None for N/A), ``problems`` why each other
    requested criterion could not be read; together they cover every requested criterion
    exactly once. ``rationales`` holds each read criterion's own rationale (its section of
    the answer when the judge marked one, else the whole text before the final line).
    ``extra`` lists keys of the final line that name no requested criterion (ignored).
    """

    scores: Mapping[str, int | None]
    problems: Mapping[str, str]
    rationales: Mapping[str, str]
    extra: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return not self.problems


def read(output: str, skills: Sequence[str], allow_na: Collection[str] | None = None) -> Reading:
    """Read ``output``'s final line into a score or a problem for each of ``skills``.

    ``allow_na`` names the skills that may be scored "N/A" (None, the default: all of them).
    Keys are matched case-insensitively and mapped back to the names in ``skills``. A
    criterion whose value is missing, out of range, fractional or given twice is a problem
    of that criterion only: the others are kept, as FLASK's own scripts keep them.
    """
    canonical = _canonical_names(skills)
    na_ok = (
        set(canonical.values())
        if allow_na is None
        else {canonical[k] for k in (n.strip().casefold() for n in allow_na) if k in canonical}
    )
    names = list(canonical.values())

    def every(problem: str) -> Reading:
        return Reading({}, dict.fromkeys(names, problem), {})

    line = _final_line(output)
    if line is None:
        return every("empty output")
    body = _scores_body(line)
    if body is None:
        hint = ""
        if any(_scores_body(earlier) is not None for earlier in output.splitlines()):
            hint = f" (a {SCORES_MARKER} line is followed by other text)"
        return every(_NO_FINAL_LINE + hint)
    if not body:
        return every(f"no JSON object after {SCORES_MARKER}")
    try:
        pairs = json.loads(body, object_pairs_hook=_Pairs, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, json.JSONDecodeError):
            detail = exc.msg
        elif isinstance(exc, RecursionError):
            detail = "nested too deeply"
        else:
            detail = str(exc)
        return every(f"invalid JSON after {SCORES_MARKER}: {detail}")
    if not isinstance(pairs, _Pairs):
        return every(f"{SCORES_MARKER} must be followed by a JSON object")

    found: dict[str, Any] = {}
    twice: set[str] = set()
    extra: list[str] = []
    for key, value in pairs:
        name = canonical.get(key.strip().casefold())
        if name is None:
            extra.append(key)
        elif name in found:
            twice.add(name)
        else:
            found[name] = value
    scores: dict[str, int | None] = {}
    problems: dict[str, str] = {}
    for name in names:
        if name in twice:
            problems[name] = f"skill given twice: {name}"
        elif name not in found:
            problems[name] = f"missing skill: {name}"
        else:
            score, error = _score(name, found[name], name in na_ok)
            if error is not None:
                problems[name] = error
            else:
                scores[name] = score
    rationale = _before_final_line(output)
    sections = rationale_sections(rationale, list(scores))
    rationales = {n: sections.get(n, rationale) for n in scores}
    return Reading(scores, problems, rationales, tuple(extra))


def parse(output: str, skills: Sequence[str], allow_na: Collection[str] | None = None) -> Parsed:
    """All or nothing: scores for exactly ``skills``, or one error describing every problem
    (including keys that name no requested skill). A strict view of :func:`read`."""
    reading = read(output, skills, allow_na)
    problems = list(dict.fromkeys(reading.problems.values()))
    missing = [n for n, p in reading.problems.items() if p.startswith("missing skill")]
    others = [p for p in problems if not p.startswith("missing skill")]
    parts = []
    if missing:
        parts.append(f"missing skills: {', '.join(missing)}")
    if reading.extra:
        shown = ", ".join(_clip(k, 40) for k in reading.extra[:5])
        parts.append(f"unexpected skills: {shown}" + (", ..." if len(reading.extra) > 5 else ""))
    parts += others
    if parts:
        return _fail("; ".join(parts))
    return Parsed(scores=dict(reading.scores), error=None)


#: a line that opens a criterion's section: optional markdown heading/list/emphasis marks
#: and a "Skill N:" prefix, the criterion's name, then a colon, a dash or the line's end
_SECTION_MARKS = "#*-_>` \t"
_SKILL_PREFIX = re.compile(r"^(?:skill|criterion)\s*\d+\s*[:.)-]\s*", re.IGNORECASE)


def rationale_sections(text: str, names: Sequence[str]) -> dict[str, str]:
    """Each criterion's own rationale: the lines from the line that opens with its name
    (``Readability: ...``, ``### Skill 2: Readability``, ``**Readability**``) to the next
    such line. Criteria without such a line get no entry."""
    folded = {n.casefold(): n for n in names}
    starts: list[tuple[int, str]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        name = _section_name(line, folded)
        if name is not None and all(name != n for _, n in starts):
            starts.append((i, name))
    sections = {}
    for k, (i, name) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(lines)
        sections[name] = "\n".join(lines[i:end]).strip()[:RATIONALE_LIMIT]
    return sections


def _section_name(line: str, folded: Mapping[str, str]) -> str | None:
    head = _SKILL_PREFIX.sub("", line.strip().lstrip(_SECTION_MARKS))
    low = head.casefold()
    for key, name in folded.items():
        if low.startswith(key):
            rest = head[len(key) :].lstrip("*_` ")
            if not rest or rest[0] in ":-(" or rest.startswith("—"):
                return name
    return None


def _before_final_line(output: str) -> str:
    lines = output.rstrip().splitlines()
    while lines and (not lines[-1].strip() or _FENCE_RE.match(lines[-1])):
        lines.pop()
    return "\n".join(lines[:-1]).strip()[:RATIONALE_LIMIT]


# --- helpers ---------------------------------------------------------------------------


class _Pairs(list[tuple[str, Any]]):
    """A JSON object as its key/value pairs, in order, duplicates kept."""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def _fail(error: str) -> Parsed:
    return Parsed(scores=None, error=error)


def _canonical_names(skills: Sequence[str]) -> dict[str, str]:
    if isinstance(skills, str):
        raise TypeError("skills must be a sequence of names, not a string")
    canonical: dict[str, str] = {}
    for name in skills:
        folded = name.strip().casefold()
        if folded in canonical:
            raise ValueError(f"duplicate skill requested: {name!r}")
        canonical[folded] = name
    if not canonical:
        raise ValueError("no skills requested")
    return canonical


def _final_line(output: str) -> str | None:
    """The last non-empty line that is not a bare code fence, stripped."""
    for line in reversed(output.splitlines()):
        if line.strip() and not _FENCE_RE.match(line):
            return line.strip()
    return None


def _scores_body(line: str) -> str | None:
    """The JSON text of a ``[SCORES] {...}`` line, or None if ``line`` is not one.

    Only emphasis/code marks (``*`` and backticks) may surround the marker and the object;
    any other text before the marker or after the object disqualifies the line.
    """
    stripped = line.strip()
    start = stripped.find("{")
    end = stripped.rfind("}")
    if start == -1 or end < start:
        # A marker without an object is reported as such ("no JSON object").
        return "" if _undecorate(stripped).upper().startswith(SCORES_MARKER) else None
    head = _undecorate(stripped[:start])
    tail = _undecorate(stripped[end + 1 :])
    if not _is_marker(head) or tail:
        return None
    return stripped[start : end + 1]


def _undecorate(text: str) -> str:
    return "".join(ch for ch in text if ch not in _DECORATION).strip()


def _is_marker(head: str) -> bool:
    head = head.removesuffix(":").rstrip()
    return head.upper() == SCORES_MARKER


def _score(name: str, value: Any, na_ok: bool) -> tuple[int | None, str | None]:
    shown = "{...}" if isinstance(value, _Pairs) else json.dumps(value, ensure_ascii=False)
    shown = _clip(shown, 40)
    if isinstance(value, bool):
        return None, f"invalid score for {name}: {shown}"
    if isinstance(value, str):
        text = value.strip()
        if text.casefold() in _NA_STRINGS:
            if na_ok:
                return None, None
            return None, f"N/A not allowed for {name}"
        if not _INT_STRING_RE.match(text):
            return None, f"invalid score for {name}: {shown}"
        value = int(text.split(".")[0])
    elif isinstance(value, float):
        if not value.is_integer():
            return None, f"score not an integer for {name}: {shown}"
        value = int(value)
    elif not isinstance(value, int):
        return None, f"invalid score for {name}: {shown}"
    if not MIN_SCORE <= value <= MAX_SCORE:
        return None, f"score out of range for {name}: {value}"
    return value, None
