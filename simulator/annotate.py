"""What the simulated annotator says to an annotation prompt (pure, no I/O).

A prompt is an annotation request when ``rubrics.annotation.parse_request`` recognises it
(it opens with our annotation system prompt); the answer gives the requested facets of
the instruction found between the prompt's instruction delimiters, in the protocol's
format: a rationale per facet, then the final ``[LABELS] {...}`` line.

The labels come from the instruction itself, deterministically:

- skills: ranked by how many word stems the instruction shares with each skill's
  description (plus a few hint words for FLASK's skills), ties broken by a hash of the
  seed, the instruction and the skill;
- domains: ranked the same way against each domain's hint words; a second domain when
  it matches about as well as the first;
- difficulty: from the instruction's length, long words and technical signs.

Annotator models share that choice, and each one perturbs it now and then (a hash of the
seed, the model and the instruction): the last skill swapped for the next in line, the
second domain added or dropped, the difficulty nudged by one. So two annotator models
agree on most instructions, not on all, as real annotators do; the agreement statistics
of annotation runs have something to measure.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence

from flask_eval.rubrics.annotation import parse_request
from flask_eval.rubrics.labels import LabelSpace
from flask_eval.rubrics.protocol import INSTRUCTION_END, INSTRUCTION_START, labels_line

from .config import SimConfig

#: how often one annotator model departs from the shared choice, per facet
PERTURB_RATE = 0.15
GARBAGE_KINDS = ("prose", "off_space")
QUOTE_OPENING = "The instruction reads, in full:"

_WORD = re.compile(r"[a-z0-9]+")
_TECHNICAL = re.compile(r"[0-9=^{}$%<>]|\b(?:def|return|select|proof|theorem)\b")
_STOP = frozenset(
    {
        "all",
        "and",
        "any",
        "are",
        "but",
        "can",
        "did",
        "for",
        "get",
        "had",
        "has",
        "how",
        "its",
        "may",
        "new",
        "not",
        "now",
        "one",
        "our",
        "out",
        "see",
        "the",
        "two",
        "use",
        "was",
        "way",
        "who",
        "why",
        "you",
        "about",
        "also",
        "answer",
        "because",
        "being",
        "could",
        "does",
        "each",
        "from",
        "give",
        "have",
        "into",
        "instruction",
        "like",
        "more",
        "most",
        "only",
        "other",
        "over",
        "reader",
        "response",
        "should",
        "some",
        "such",
        "than",
        "that",
        "their",
        "them",
        "there",
        "these",
        "they",
        "this",
        "those",
        "user",
        "very",
        "what",
        "when",
        "where",
        "whether",
        "which",
        "while",
        "will",
        "with",
        "without",
        "would",
        "your",
    }
)

#: a few words each FLASK skill is asked for with (our own, simulator-only hints)
_SKILL_HINTS: Mapping[str, str] = {
    "logical robustness": "prove proof reasoning step edge case algorithm",
    "logical correctness": "calculate compute solve result equation number total correct",
    "logical efficiency": "efficient optimize faster complexity simplify",
    "factuality": "fact facts history date who where when explain",
    "commonsense understanding": "happen everyday situation imagine would",
    "comprehension": "list follow format steps rewrite summarize requirements",
    "insightfulness": "creative story poem idea novel opinion invent",
    "completeness": "explain detail describe compare discuss overview",
    "metacognition": "uncertain predict future guess unknown possible",
    "conciseness": "brief short summarize sentence concise",
    "readability": "write essay letter email article",
    "harmlessness": "safe harm danger illegal weapon risk",
}
#: words each FLASK domain is recognised by (our own, simulator-only hints)
_DOMAIN_HINTS: Mapping[str, str] = {
    "humanities": "philosophy ethics religion psychology education moral communication",
    "language": "poem poetry grammar word sentence translate literature novel story",
    "culture": "music film movie sport food recipe painting game festival",
    "health": "health medical doctor disease symptom diet exercise nutrition sleep",
    "history": "history historical war century ancient empire revolution king",
    "natural science": "physics chemistry biology planet energy cell atom climate species",
    "math": "math equation number calculate solve integral probability geometry prove root",
    "social science": "economy business market law politics finance company government country",
    "technology": "technology computer engineering device internet software machine",
    "coding": "code python function program javascript algorithm sql bug",
}


def _hash(*parts: str) -> int:
    digest = hashlib.blake2b("\x1f".join(parts).encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "big")


def _unit(*parts: str) -> float:
    """A number in [0, 1) drawn from ``parts``."""
    return _hash(*parts) % 1_000_000 / 1_000_000


def _stems(text: str) -> set[str]:
    """The word stems of ``text`` (a word's first five letters: "creative" and
    "creativity" meet), without short and common words."""
    return {w[:5] for w in _WORD.findall(text.casefold()) if len(w) > 2 and w not in _STOP}


def instruction_of(prompt: str) -> str:
    """The instruction between the first delimiter lines of ``prompt`` ("" if absent)."""
    lines = prompt.splitlines()
    try:
        start = lines.index(INSTRUCTION_START)
        end = lines.index(INSTRUCTION_END, start + 1)
    except ValueError:
        return ""
    return "\n".join(lines[start + 1 : end])


def _ranked(
    labels: Sequence[str], words: Mapping[str, set[str]], instruction: str, seed: str
) -> tuple[list[str], dict[str, int]]:
    have = _stems(instruction)
    overlap = {label: len(have & words[label]) for label in labels}
    order = sorted(labels, key=lambda c: (-overlap[c], _hash("tie", seed, instruction, c)))
    return order, overlap


def choose_skills(instruction: str, model: str, space: LabelSpace, seed: str) -> list[str]:
    """The skills the annotator ``model`` names, most important first."""
    words = {
        name: _stems(f"{name} {text} {_SKILL_HINTS.get(name.casefold(), '')}")
        for name, text in space.skills
    }
    ranked, _ = _ranked(space.skill_names, words, instruction, seed)
    n = space.skill_count
    chosen = ranked[:n]
    if len(ranked) > n and _unit("skills", seed, model, instruction) < PERTURB_RATE:
        chosen[-1] = ranked[n]
    return chosen


def choose_domains(instruction: str, model: str, space: LabelSpace, seed: str) -> list[str]:
    """The one or two domains the annotator ``model`` names."""
    words = {d: _stems(f"{d} {_DOMAIN_HINTS.get(d.casefold(), '')}") for d in space.domains}
    ranked, overlap = _ranked(space.domains, words, instruction, seed)
    chosen = ranked[:1]
    if space.domain_count > 1 and len(ranked) > 1:
        second = overlap[ranked[1]]
        if second > 0 and 2 * second >= overlap[ranked[0]]:
            chosen.append(ranked[1])
        if _unit("domains", seed, model, instruction) < PERTURB_RATE:
            chosen = ranked[:1] if len(chosen) > 1 else ranked[:2]
    return chosen


def choose_difficulty(instruction: str, model: str, space: LabelSpace, seed: str) -> int:
    """The level the annotator ``model`` gives: longer instructions, long words and
    technical signs (digits, formulas, code) take more knowledge."""
    words = _WORD.findall(instruction.casefold())
    long_share = sum(len(w) >= 9 for w in words) / max(len(words), 1)
    raw = (
        (len(words) > 12)
        + (len(words) > 40)
        + (long_share > 0.12)
        + (_TECHNICAL.search(instruction) is not None)
    )
    u = _unit("difficulty", seed, model, instruction)
    nudge = -1 if u < PERTURB_RATE / 2 else 1 if u > 1 - PERTURB_RATE / 2 else 0
    levels = sorted(space.level_numbers)
    index = round(raw * (len(levels) - 1) / 4) + nudge
    return levels[min(len(levels) - 1, max(0, index))]


def labels_for(
    instruction: str, model: str, facets: Sequence[str], space: LabelSpace, config: SimConfig
) -> dict[str, object]:
    """Each requested facet's labels (the final line's object), in ``facets`` order."""
    seed = str(config.seed)
    choose = {
        "skills": choose_skills,
        "domains": choose_domains,
        "difficulty": choose_difficulty,
    }
    return {f: choose[f](instruction, model, space, seed) for f in facets}


def _rationales(labels: Mapping[str, object], space: LabelSpace) -> list[str]:
    paragraphs = ["Labels for the instruction, facet by facet."]
    skills = labels.get("skills")
    if isinstance(skills, list):
        rest = f", then {', '.join(skills[1:])}" if len(skills) > 1 else ""
        paragraphs.append(f"Skills: the instruction mostly calls for {skills[0]}{rest}.")
    domains = labels.get("domains")
    if isinstance(domains, list):
        paragraphs.append(f"Domains: it belongs to {' and '.join(domains)}.")
    level = labels.get("difficulty")
    if isinstance(level, int):
        name = next(n for lv, n, _ in space.levels if lv == level)
        paragraphs.append(f"Difficulty: level {level} ({name}) fits what it takes to answer.")
    return paragraphs


def _garbage(
    paragraphs: list[str], facets: Sequence[str], space: LabelSpace, kind: str
) -> list[str]:
    """An answer whose labels cannot be read: prose only, or labels off the space."""
    if kind == "prose":
        return [*paragraphs, "I would rather not commit to final labels for this one."]
    wrong: dict[str, object] = {
        "skills": ["Guesswork"] * space.skill_count,
        "domains": ["Everything"],
        "difficulty": max(space.level_numbers) + 1,
    }
    return [*paragraphs, labels_line({f: wrong[f] for f in facets})]


def answer(prompt: str, model: str, config: SimConfig, *, garbage: bool = False) -> str | None:
    """The annotator's answer to ``prompt`` (its messages' texts concatenated), or None
    when it is no annotation prompt, or the simulator answers every prompt in one
    format (``answer_format`` other than ``auto``). ``garbage=True``: an answer the
    protocol cannot read (prose only, or labels off the space; chosen per request)."""
    if config.answer_format != "auto":
        return None
    request = parse_request(prompt)
    if request is None:
        return None
    facets, space = request
    instruction = instruction_of(prompt)
    labels = labels_for(instruction, model, facets, space, config)
    paragraphs = _rationales(labels, space)
    if garbage:
        kind = GARBAGE_KINDS[_hash("garbage", str(config.seed), model, prompt) % 2]
        return "\n\n".join(_garbage(paragraphs, facets, space, kind))
    if config.quote_response:
        paragraphs.append(f"{QUOTE_OPENING}\n{instruction}")
    paragraphs.append(labels_line(labels))
    return "\n\n".join(paragraphs)
