"""Read a judge's scores from the final ``[SCORES] {...}`` line of its output (pure).

Scores come ONLY from the last non-empty line of the output (after dropping trailing
markdown code-fence lines such as a bare fence). That line must be the marker ``[SCORES]``
followed by a JSON object; the only decorations tolerated are markdown emphasis and code
marks around the marker or the object (``**[SCORES]** {...}``, a line wrapped in single
backticks, ``[SCORES]: {...}``) and a final period. Nothing is ever guessed: no search for
"Score: N" and no fallback to earlier lines, because earlier text may quote the
(untrusted) response.

:class:`MarkerLine` is that grammar for any marker: our pairwise ``[VERDICT] {...}`` line
(rubrics/pairwise.py) is read by the same code, and each neutralizes untrusted text with
the marker pattern its reader matches (:meth:`MarkerLine.neutralize`), so a quoted
response can never end an answer with a line the reader accepts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

from flask_eval.rubrics.protocol import SCORES_MARKER
from flask_eval.rubrics.scale import FIVE_POINT, Scale
from flask_eval.rubrics.untrusted import defuse

V = TypeVar("V")
#: longest rationale kept per criterion (characters)
RATIONALE_LIMIT = 8_000

_NA_STRINGS = frozenset({"n/a", "na"})
_FENCE_RE = re.compile(r"^\s*(```+|~~~+)\s*$")
_INT_STRING_RE = re.compile(r"^[0-9]+(\.0+)?$")


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
    ``values`` holds what a kind of work other than judgment reads from an answer, per
    criterion it read (a generated response, an annotation's labels as JSON text): the
    ledger keeps it beside the row (``judgment.value``); a judgment's readers leave it
    empty, except MT-Bench's (``rubrics.mtbench``), which keeps a fractional rating as
    written beside its rounded score. A criterion of another kind read with a value has
    score None.
    """

    scores: Mapping[str, int | None]
    problems: Mapping[str, str]
    rationales: Mapping[str, str]
    extra: tuple[str, ...] = ()
    values: Mapping[str, str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not self.problems


def read(
    output: str,
    skills: Sequence[str],
    allow_na: Collection[str] | None = None,
    scale: Scale = FIVE_POINT,
) -> Reading:
    """Read ``output``'s final line into a score or a problem for each of ``skills``.

    ``allow_na`` names the skills that may be scored "N/A" (None, the default: all of them).
    Keys are matched case-insensitively and mapped back to the names in ``skills``. A
    criterion whose value is missing, off ``scale``, fractional or given twice is a problem
    of that criterion only: the others are kept, as FLASK's own scripts keep them. So is a
    criterion whose own rationale only echoes the prompt's example (``Readability: ...``,
    :meth:`MarkerLine.read`).
    """
    canonical = _canonical_names(skills)
    na_ok = (
        set(canonical.values())
        if allow_na is None
        else {canonical[k] for k in (n.strip().casefold() for n in allow_na) if k in canonical}
    )

    def value(name: str, raw: Any) -> tuple[int | None, str | None]:
        return _score(name, raw, name in na_ok, scale)

    return SCORES_LINE.read(output, list(canonical.values()), value, "skill")


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


# --- helpers ---------------------------------------------------------------------------


class Pairs(list[tuple[str, Any]]):
    """A JSON object as its key/value pairs, in order, duplicates kept."""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def reject_constant(name: str) -> Any:
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


def _own_words(section: str, name: str) -> str:
    """A rationale section without its opening ``Name:``."""
    first, _, rest = section.partition("\n")
    head = _SKILL_PREFIX.sub("", first.strip().lstrip(_SECTION_MARKS))
    if head.casefold().startswith(name.casefold()):
        first = head[len(name) :].lstrip("*_` ").removeprefix(":").removeprefix("-")
    return f"{first}\n{rest}".strip()


#: what a rationale that only echoes a template is: nothing but dots, or one placeholder
_ECHO_RE = re.compile(r"\A[\s.\u2026]*\Z|\A\s*+<[^<>\n]*>\s*+\Z")


def template_echo(rationale: str, placeholders: Sequence[str] = ()) -> str | None:
    """Why ``rationale`` echoes the prompt's template instead of judging, or None: it is
    empty of words (``...``), a lone placeholder (``<two to four sentences>``), or holds
    one of the prompt's own ``placeholders``. Such a criterion is unreadable: asked once
    more, then failed ``unparseable`` with the answer kept."""
    folded = " ".join(rationale.casefold().split())
    for placeholder in placeholders:
        if " ".join(placeholder.casefold().split()) in folded:
            return f"the rationale repeats the prompt's placeholder {placeholder!r}"
    if _ECHO_RE.match(rationale):
        shown = _clip(" ".join(rationale.split()), 40) or "(empty)"
        return f"the rationale only echoes the template: {shown!r}"
    return None


def split_keys(
    pairs: Sequence[tuple[Any, V]], name_of: Callable[[Any], str | None]
) -> tuple[dict[str, V], set[str], list[str]]:
    """An answer's key/value ``pairs`` sorted by ``name_of(key)`` (the criterion a key
    names, None for none): each named criterion's first value, the criteria named twice,
    and the keys that name none (clipped to 40 characters), in order."""
    found: dict[str, V] = {}
    twice: set[str] = set()
    extra: list[str] = []
    for key, value in pairs:
        name = name_of(key)
        if name is None:
            extra.append(str(key)[:40])
        elif name in found:
            twice.add(name)
        else:
            found[name] = value
    return found, twice, extra


class MarkerLine:
    """The final-line grammar ``MARKER {json object}`` for one marker, read and
    neutralized from the same pattern.

    The line is: emphasis/code marks (``*``, ``_``, backticks) and spaces, the marker (any
    case, spaces allowed inside its brackets), marks, an optional colon, marks, the JSON
    object, marks and at most one period. :attr:`pattern` is the marker alone: the
    reader requires it, :meth:`neutralize` rewrites every match of it in untrusted text.
    """

    def __init__(self, marker: str) -> None:
        word = re.escape(marker.strip("[]"))
        self.marker = marker
        self.pattern = re.compile(rf"\[\s*+{word}\s*+\]", re.IGNORECASE | re.ASCII)
        marks = r"[*_`]*+"
        self._head = re.compile(
            rf"\A\s*+{marks}\s*+(?:{self.pattern.pattern}){marks}\s*+:?\s*+{marks}\s*+",
            re.IGNORECASE | re.ASCII,
        )
        self._after = re.compile(rf"\s*+{marks}\s*+\.?\s*+{marks}\s*+")
        self.no_line = f'no final "{marker} {{...}}" line'

    def neutralize(self, text: str) -> str:
        """``text`` without any match of the marker: ``[SCORES]`` becomes ``［SCORES］``."""
        return defuse(text, (self.pattern,))

    def body(self, line: str) -> str | None:
        """The JSON text of a marker line, "" for a marker without an object, None for a
        line that is not a marker line."""
        head = self._head.match(line)
        if head is None:
            return None
        rest = line[head.end() :]
        end = rest.rfind("}")  # the object runs to the last brace (linear, no backtracking)
        if rest.startswith("{") and self._after.fullmatch(rest, end + 1):
            return rest[: end + 1]
        return None if "{" in rest and "}" in rest else ""

    def read(
        self,
        output: str,
        names: Sequence[str],
        value: Callable[[str, Any], tuple[int | None, str | None]],
        noun: str,
    ) -> Reading:
        """Each of ``names`` (canonical, no two alike ignoring case) read from the final
        line by ``value(name, raw) -> (value, problem)``; ``noun`` names a criterion in
        problems ("missing skill: X", "criterion given twice: Y"). A criterion whose
        rationale only echoes the prompt's example (``Readability: ...``,
        :func:`template_echo`) is a problem too; an answer that is only the final line
        (what a reminder asks for) has no rationale and is read."""
        canonical = {n.strip().casefold(): n for n in names}

        def every(problem: str) -> Reading:
            return Reading({}, dict.fromkeys(names, problem), {})

        lines = output.rstrip().splitlines()
        while lines and (not lines[-1].strip() or _FENCE_RE.match(lines[-1])):
            lines.pop()
        if not lines:
            return every("empty output")
        body = self.body(lines[-1].strip())
        if body is None:
            if any(self.body(line.strip()) is not None for line in lines[:-1]):
                return every(self.no_line + f" (a {self.marker} line is followed by other text)")
            return every(self.no_line)
        if not body:
            return every(f"no JSON object after {self.marker}")
        try:
            pairs = json.loads(body, object_pairs_hook=Pairs, parse_constant=reject_constant)
        except (ValueError, RecursionError) as exc:
            if isinstance(exc, json.JSONDecodeError):
                detail = exc.msg
            elif isinstance(exc, RecursionError):
                detail = "nested too deeply"
            else:
                detail = str(exc)
            return every(f"invalid JSON after {self.marker}: {detail}")
        if not isinstance(pairs, Pairs):
            return every(f"{self.marker} must be followed by a JSON object")
        found, twice, extra = split_keys(pairs, lambda key: canonical.get(key.strip().casefold()))
        values: dict[str, int | None] = {}
        problems: dict[str, str] = {}
        for name in names:
            if name in twice:
                problems[name] = f"{noun} given twice: {name}"
            elif name not in found:
                problems[name] = f"missing {noun}: {name}"
            else:
                read, problem = value(name, found[name])
                if problem is not None:
                    problems[name] = problem
                else:
                    values[name] = read
        rationale = "\n".join(lines[:-1]).strip()[:RATIONALE_LIMIT]
        sections = rationale_sections(rationale, list(names))
        rationales: dict[str, str] = {}
        for name in list(values):
            own = sections.get(name, rationale)
            echo = template_echo(_own_words(own, name)) if own.strip() else None
            if echo is None:  # (a reply of only the final line is no echo)
                rationales[name] = own
            else:
                del values[name]
                problems[name] = f"{echo} for {name}"
        return Reading(values, problems, rationales, tuple(extra))


SCORES_LINE = MarkerLine(SCORES_MARKER)


def _score(name: str, value: Any, na_ok: bool, scale: Scale) -> tuple[int | None, str | None]:
    shown = "{...}" if isinstance(value, Pairs) else json.dumps(value, ensure_ascii=False)
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
    if value not in scale:
        return None, f"score out of range for {name}: {value}"
    return value, None
