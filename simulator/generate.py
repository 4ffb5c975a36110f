"""Simulated models under test: deterministic responses of a chosen quality (pure, no I/O).

A model named in ``SimConfig.generators`` is a model under test: every request to it is
answered by :func:`answer`, never by the judge (``simulator.answer.make_answer`` asks
here first). The response is a function of the seed, the model and the prompt only, so
a rerun generates the same texts, live or batched. It reuses words of the prompt (the
instruction, and the system prompt when there is one) so that it reads as an answer to
that instruction, and runs to about ``SimConfig.generation_tokens`` tokens (0.8 to 1.2
times that, by a hash: responses differ in length, as real ones do).

**The signature.** A generated response opens with :func:`signature`, the sentence
``(simulated answer, level N of 5)``, N being its quality. The simulated judges read it
(:func:`level_of`, in ``simulator.quality.quality_of``) and grade the response at that
level instead of by reference recall: so a generation run followed by a judgment run
against the simulator ranks the models under test as configured. A response cut off by
its token limit keeps its opening, hence its level.

**Per skill levels.** A model with levels of its own on some criteria
(``SimConfig.skill_levels``) signs them too, after its level:
``(simulated answer, level 4 of 5; Logical Correctness at 3.8)``. The judges score such a
criterion from that level (:func:`skill_levels_of`) and every other one from the
response's level. A model with a family (``SimConfig.model_families``) signs it last,
``(simulated answer, level 4 of 5; by acme)``; a judge of the same family reads it
(:func:`family_of`) and adds its ``self_preference``.

The instance's level on a criterion is the configured one plus the
instance's departure from the model's configured level (the rounding and the jitter
below, before clamping, so its mean is the configured level), clamped to 1..5: a drop
planted on one criterion moves that criterion's scores of that model only, instance by
instance.

**Quality per instance.** A model configured at level L (a float from 1 to 5) answers
each instance at L's floor or ceiling (the ceiling with probability L's fractional part,
so 4.5 is half 4s and half 5s), plus a jitter of -1, 0 or +1 (weights 1, 2, 1), clamped
to 1..5; both are drawn from a hash of the seed, the model and the prompt. Models thus
rank as configured on average over instances, not on every one of them: two models a
level apart swap places on some instances, as real models do.

**Conversations.** A request whose messages hold assistant turns is a turn of a
conversation: the response says so right after its signature, with the turn's number (the
user messages sent) and a digest of the assistant turns it was sent
(:func:`conversation_note`, :func:`answers_digest`): ``(turn 2 of a conversation, after
answers 3f2a9c01b2d4)``. A test reads it back (:func:`conversation_of`) to see that a
model's turn-2 request carried that model's own turn-1 answer. The response is drawn from
the whole conversation sent, so it depends on every earlier turn.

The simulator's other behaviours apply to a model under test as to a judge (latency,
errors, rate limits, refusals, ``max_tokens`` cut-offs) except ``garbage_rate``: a
generated answer has no format to break, so it is generated whole.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence

from .config import SimConfig

#: the opening sentence of a generated response, with its quality level
SIGNATURE = "(simulated answer, level {level} of 5)"
_SIGNATURE_RE = re.compile(
    r"\A\s*\(simulated answer, level ([1-5]) of 5((?:; [^;():\n\r]+ at [0-9.]+)*)"
    r"(?:; by ([A-Za-z0-9._-]+))?\)"
)
#: how the model's family ends a signature
_FAMILY = "; by {family}"
#: how a criterion's own level follows the level in a signature
_SKILL_LEVEL = "; {criterion} at {level}"
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*")
#: per-instance jitter of the level: -1, 0, +1 with these weights
_JITTER_WEIGHTS = (1, 2, 1)
#: the spread of a response's length around ``SimConfig.generation_tokens``
_LENGTH_SPREAD = 0.2
_FALLBACK_WORDS = ("question", "answer", "detail")
_STOPWORDS = frozenset(
    (
        "about",
        "also",
        "been",
        "does",
        "each",
        "from",
        "have",
        "into",
        "just",
        "more",
        "most",
        "much",
        "only",
        "other",
        "over",
        "some",
        "such",
        "than",
        "that",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "very",
        "what",
        "when",
        "where",
        "which",
        "while",
        "with",
        "would",
        "your",
    )
)
#: each level's tone: a response at a higher level commits more firmly
_OPENINGS = {
    1: "I am not sure about {topic}, but here is a guess.",
    2: "On {topic}, a partial answer follows.",
    3: "Here is an answer on {topic}.",
    4: "Here is a careful answer on {topic}.",
    5: "Here is a thorough, well-checked answer on {topic}.",
}
_SENTENCES = (
    "The main point about {a} is how it relates to {b}.",
    "Considering {a}, one should also weigh {b} and {c}.",
    "In practice, {a} depends on {b}.",
    "A concrete example of {a} shows why {b} matters.",
    "It helps to separate {a} from {b} before comparing them with {c}.",
    "A common mistake is to treat {a} as if it were {b}.",
    "To sum up {a}: {b} and {c} go together.",
)


def _hash(*parts: str) -> int:
    digest = hashlib.blake2b("\x1f".join(parts).encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "big")


def _unit(*parts: str) -> float:
    """A deterministic number in [0, 1) drawn from ``parts``."""
    return _hash(*parts) % 1_000_000 / 1_000_000


def _number(level: float) -> str:
    """``level`` as a signature writes it: at most three decimals, no trailing zeros."""
    return f"{round(level, 3):g}"


def signature(
    level: int, skills: Mapping[str, float] | None = None, family: str | None = None
) -> str:
    """The opening of a generated response of quality ``level`` (1..5), with the
    response's own levels on some criteria (``skills``) when it has any and its model's
    ``family`` when it has one."""
    if level not in range(1, 6):
        raise ValueError(f"level must be 1..5, got {level}")
    plain = SIGNATURE.format(level=level)
    if not skills and family is None:
        return plain
    extra = "".join(
        _SKILL_LEVEL.format(criterion=c, level=_number(v)) for c, v in (skills or {}).items()
    )
    if family is not None:
        extra += _FAMILY.format(family=family)
    return f"{plain[:-1]}{extra})"


def level_of(response: str) -> int | None:
    """The quality level a response's :func:`signature` gives, None when it opens with
    none (any response not generated here)."""
    found = _SIGNATURE_RE.match(response)
    return int(found.group(1)) if found else None


def skill_levels_of(response: str) -> dict[str, float]:
    """The response's own levels on criteria, by name, as its :func:`signature` gives
    them (empty when it gives none)."""
    found = _SIGNATURE_RE.match(response)
    if not found or not found.group(2):
        return {}
    levels: dict[str, float] = {}
    for item in found.group(2).split("; ")[1:]:
        criterion, _, value = item.rpartition(" at ")
        levels[criterion] = float(value)
    return levels


def family_of(response: str) -> str | None:
    """The model family a response's :func:`signature` names, None when it names none."""
    found = _SIGNATURE_RE.match(response)
    return found.group(3) if found else None


#: how a turn of a conversation follows the signature (:func:`conversation_note`)
CONVERSATION_NOTE = " (turn {turn} of a conversation, after answers {digest})"
_NOTE_RE = re.compile(r"\(turn ([0-9]+) of a conversation, after answers ([0-9a-f]{12})\)")


def answers_digest(answers: Sequence[str]) -> str:
    """A digest of the assistant turns a request carried, in order (12 hex digits)."""
    joined = "\x1e".join(answers).encode("utf-8", "surrogatepass")
    return hashlib.sha256(joined).hexdigest()[:12]


def conversation_note(turns: Sequence[tuple[str, str]]) -> str:
    """What a response to a turn of a conversation says after its signature: the turn (the
    user messages of ``turns``) and the digest of its assistant turns; "" for a request
    without assistant turns."""
    answers = [text for role, text in turns if role == "assistant"]
    if not answers:
        return ""
    turn = sum(role == "user" for role, _ in turns)
    return CONVERSATION_NOTE.format(turn=turn, digest=answers_digest(answers))


def conversation_of(response: str) -> tuple[int, str] | None:
    """(turn, digest of the earlier answers) a generated response says it answered,
    None for a response to a one-shot request."""
    found = _NOTE_RE.search(response[:400])
    return (int(found.group(1)), found.group(2)) if found else None


def _departure(prompt: str, model: str, configured: float, config: SimConfig) -> int:
    """The instance's level before clamping, as an integer (the module docstring)."""
    seed = str(config.seed)
    base = math.floor(configured)
    if _unit("level", seed, model, prompt) < configured - base:
        base += 1
    x = _hash("jitter", seed, model, prompt) % sum(_JITTER_WEIGHTS)
    jitter = -1 if x < _JITTER_WEIGHTS[0] else 0 if x < sum(_JITTER_WEIGHTS[:2]) else 1
    return base + jitter


def instance_level(prompt: str, model: str, config: SimConfig) -> int | None:
    """The quality of ``model``'s response to ``prompt`` (the module docstring), None when
    ``model`` is not a model under test."""
    configured = config.generators.get(model)
    if configured is None:
        return None
    return min(5, max(1, _departure(prompt, model, configured, config)))


def instance_skill_levels(prompt: str, model: str, config: SimConfig) -> dict[str, float]:
    """``model``'s levels on the criteria it has its own level on
    (``SimConfig.skill_levels``), for its response to ``prompt``: each one moved by the
    instance's departure from the model's level, clamped to 1..5 (empty: none)."""
    levels = config.skill_levels.get(model)
    configured = config.generators.get(model)
    if not levels or configured is None:
        return {}
    shift = _departure(prompt, model, configured, config) - configured
    return {c: min(5.0, max(1.0, float(v) + shift)) for c, v in levels.items()}


def _keywords(prompt: str) -> list[str]:
    """The prompt's distinct content words, in order (lower case)."""
    seen: dict[str, None] = {}
    for word in _WORD_RE.findall(prompt):
        low = word.lower()
        if len(low) > 3 and low not in _STOPWORDS:
            seen.setdefault(low)
    return list(seen)


def _pick(words: Sequence[str], *parts: str) -> tuple[str, str, str]:
    """Three words of ``words`` drawn from ``parts``, distinct when there are three."""
    h = _hash(*parts)
    pool, picked = list(words), []
    for _ in range(3):
        word = pool[h % len(pool)]
        h //= len(pool)
        picked.append(word)
        if len(pool) > 1:
            pool.remove(word)
    return picked[0], picked[1], picked[2]


def answer(
    prompt: str, model: str, config: SimConfig, turns: Sequence[tuple[str, str]] = ()
) -> str | None:
    """``model``'s generated response to ``prompt`` (the request's messages joined), or
    None when ``model`` is not in ``config.generators`` (the judge answers); ``turns``
    (the messages as (role, text)) makes it a turn of a conversation when it holds
    assistant turns (the module docstring)."""
    level = instance_level(prompt, model, config)
    if level is None:
        return None
    seed = str(config.seed)
    words = _keywords(prompt) or list(_FALLBACK_WORDS)
    spread = 1 + _LENGTH_SPREAD * (2 * _unit("length", seed, model, prompt) - 1)
    target_chars = round(4 * config.generation_tokens * spread)  # ~4 characters a token
    # the topic from the prompt's last line: the instruction's (a system prompt is first)
    last = next((line for line in reversed(prompt.splitlines()) if line.strip()), "")
    topic = " ".join((_keywords(last) or words)[:4])
    skills = instance_skill_levels(prompt, model, config)
    family = config.model_families.get(model)
    pieces = [
        signature(level, skills, family),
        conversation_note(turns),
        " ",
        _OPENINGS[level].format(topic=topic),
    ]
    length = sum(map(len, pieces))
    i = 0
    while length < target_chars:
        key = (seed, model, prompt, str(i))
        template = _SENTENCES[_hash("sentence", *key) % len(_SENTENCES)]
        a, b, c = _pick(words, "words", *key)
        sentence = ("\n\n" if i % 4 == 3 else " ") + template.format(a=a, b=b, c=c)
        pieces.append(sentence)
        length += len(sentence)
        i += 1
    return "".join(pieces)
