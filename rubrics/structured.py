"""Structured answers: the JSON schema a judge is held to, and its strict reader (pure).

A structured judgment is one JSON object with a key per criterion (its exact name), each
value an object ``{"rationale": str, "score": 1..5 | "N/A"}`` ("N/A" only where the
criterion allows it), every object closed (``additionalProperties: false``) and every
property required: the form OpenAI's strict mode takes, and that Anthropic's, Gemini's
and llama.cpp's constrained decoding hold an answer to. ``rationale`` comes before
``score`` so a model decoding in order reasons before it scores.

:func:`read_structured` reads such an answer with ``json.loads`` and nothing else: no
search inside the text, no code fences stripped. A score is only ever the ``score``
member of its criterion's object, never a number found in a rationale (which may quote
the untrusted response). As with the free-text reader (``rubrics.parse``), a problem
with one criterion is that criterion's only; the others are kept.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from flask_eval.rubrics.layout import HOW_TO_ANSWER as HOW_TO_ANSWER  # re-exported
from flask_eval.rubrics.parse import (
    RATIONALE_LIMIT,
    Pairs,
    Reading,
    reject_constant,
    split_keys,
    template_echo,
)
from flask_eval.rubrics.prompt import placeholder
from flask_eval.rubrics.protocol import NA
from flask_eval.rubrics.scale import FIVE_POINT, Scale
from flask_eval.rubrics.skills import Skill

#: the member of a criterion's object that holds its score, and the one with its reasons
SCORE, RATIONALE = "score", "rationale"
#: the rationale's placeholder in the shape the prompt shows: a rationale holding it
#: echoes the template (a tiny judge under a grammar writes it back) and is refused
RATIONALE_PLACEHOLDER = "<two to four sentences>"


def score_schema(allow_na: bool, scale: Scale = FIVE_POINT) -> dict[str, Any]:
    """The schema of one score: an integer on ``scale``, or also the string "N/A"."""
    scores: dict[str, Any] = {"type": "integer", "enum": list(scale.levels)}
    if not allow_na:
        return scores
    return {"anyOf": [scores, {"type": "string", "enum": [NA]}]}


def schema_for(criteria: Sequence[Skill], scale: Scale = FIVE_POINT) -> dict[str, Any]:
    """The JSON schema of a structured judgment of ``criteria`` (in their order)."""
    names = [c.name for c in criteria]
    if not names:
        raise ValueError("at least one criterion is required")
    if len({n.casefold() for n in names}) != len(names):
        raise ValueError(f"duplicate criteria: {names}")
    properties = {
        c.name: {
            "type": "object",
            "properties": {
                RATIONALE: {"type": "string"},
                SCORE: score_schema(c.allow_na, scale),
            },
            "required": [RATIONALE, SCORE],
            "additionalProperties": False,
        }
        for c in criteria
    }
    return {
        "type": "object",
        "properties": properties,
        "required": names,
        "additionalProperties": False,
    }


def instructions(criteria: Sequence[Skill], scale: Scale = FIVE_POINT) -> list[str]:
    """The lines telling the judge to answer with the JSON object of :func:`schema_for`."""
    names = [c.name for c in criteria]
    several = len(names) > 1
    shape = ", ".join(
        f'{json.dumps(c.name, ensure_ascii=False)}: {{"{RATIONALE}": "{RATIONALE_PLACEHOLDER}", '
        f'"{SCORE}": {placeholder(c.allow_na, scale)}}}'
        for c in criteria
    )
    no_na = [c.name for c in criteria if not c.allow_na]
    rule = (
        f'Each "{SCORE}" is an integer from {scale.low} to {scale.high}, or the string '
        f'"{NA}" only when a skill cannot apply at all.'
    )
    if no_na:
        rule += f' "{NA}" is not allowed for: {", ".join(no_na)}.'
    return [
        (
            "Judge each skill independently of the others: do not let your view of one "
            "skill raise or lower your score for another. "
            if several
            else ""
        )
        + "Use the rubric levels literally, and compare the response with the reference "
        "answer where one is given.",
        "",
        "Answer with one JSON object and nothing else: no text before or after it and no "
        "code fence. It has one key per skill, the skill's exact name, whose value is an "
        f'object with "{RATIONALE}" (a short rationale that cites concrete evidence from '
        f'the response, written before you decide) and "{SCORE}". Its shape:',
        "",
        "{" + shape + "}",
        "",
        rule,
    ]


def _shown(value: Any) -> str:
    text = "{...}" if isinstance(value, Pairs) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def _score(name: str, value: Any, na_ok: bool, scale: Scale) -> tuple[int | None, str | None]:
    """A score as the schema allows it: an integer on ``scale`` (an integral float is the
    same JSON number), or "N/A" where allowed; never a numeric string or a boolean."""
    if isinstance(value, str) and value == NA:
        return (None, None) if na_ok else (None, f"N/A not allowed for {name}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return None, f"invalid score for {name}: {_shown(value)}"
    if value not in scale:
        return None, f"score out of range for {name}: {value}"
    return value, None


def _judgment(
    name: str, value: Any, na_ok: bool, scale: Scale
) -> tuple[int | None, str, str | None]:
    """(score, rationale, problem) of one criterion's object; a rationale that echoes the
    template (empty, a lone ``<...>``, the prompt's placeholder) is a problem."""
    if not isinstance(value, Pairs):
        return None, "", f"{name} must be an object with {RATIONALE} and {SCORE}"
    members: dict[str, Any] = {}
    for key, member in value:
        if key in members:
            return None, "", f"{key} given twice for {name}"
        members[key] = member
    if SCORE not in members:
        return None, "", f"missing {SCORE} for {name}"
    rationale = members.get(RATIONALE)
    if not isinstance(rationale, str):
        return None, "", f"missing {RATIONALE} for {name}"
    echo = template_echo(rationale, (RATIONALE_PLACEHOLDER,))
    if echo is not None:
        return None, "", f"{echo} for {name}"
    score, problem = _score(name, members[SCORE], na_ok, scale)
    return score, rationale.strip()[:RATIONALE_LIMIT], problem


def opens_object(text: str) -> bool:
    """Whether ``text`` opens with a whole JSON object (whatever follows it): the form of
    a structured answer, as opposed to free text that merely starts with a brace."""
    stripped = text.lstrip()
    if not stripped.startswith("{"):
        return False
    try:
        json.JSONDecoder(strict=False, parse_constant=reject_constant).raw_decode(stripped)
    except (ValueError, RecursionError):
        return False
    return True


def read_structured(text: str, criteria: Sequence[Skill], scale: Scale = FIVE_POINT) -> Reading:
    """Every criterion's score or problem from ``text``, a structured judgment.

    ``text`` must be exactly one JSON object (surrounding whitespace aside). Keys match
    the criteria's names case-insensitively; a key naming no criterion is listed in
    ``extra`` and ignored. The one leniency: a raw control character (a newline) inside
    a string is taken as it is, as llama.cpp's grammar lets a model write one into a
    rationale; it can only ever be part of that string.
    """
    names_of = {c.name.strip().casefold(): c.name for c in criteria}
    if not names_of:
        raise ValueError("no criteria requested")
    names = [c.name for c in criteria]

    def every(problem: str) -> Reading:
        return Reading({}, dict.fromkeys(names, problem), {})

    if not text.strip():
        return every("empty output")
    try:
        answer = json.loads(
            text, object_pairs_hook=Pairs, parse_constant=reject_constant, strict=False
        )
    except json.JSONDecodeError as exc:
        return every(f"invalid JSON: {exc.msg}")
    except RecursionError:
        return every("invalid JSON: nested too deeply")
    except ValueError as exc:  # NaN, Infinity
        return every(f"invalid JSON: {exc}")
    if not isinstance(answer, Pairs):
        return every("the answer must be one JSON object")
    found, twice, extra = split_keys(answer, lambda key: names_of.get(key.strip().casefold()))
    scores: dict[str, int | None] = {}
    problems: dict[str, str] = {}
    rationales: dict[str, str] = {}
    for criterion in criteria:
        name = criterion.name
        if name in twice:
            problems[name] = f"skill given twice: {name}"
            continue
        if name not in found:
            problems[name] = f"missing skill: {name}"
            continue
        score, rationale, problem = _judgment(name, found[name], criterion.allow_na, scale)
        if problem is not None:
            problems[name] = problem
        else:
            scores[name], rationales[name] = score, rationale
    return Reading(scores, problems, rationales, tuple(extra))
