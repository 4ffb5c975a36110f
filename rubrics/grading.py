"""The grading-protocol seam: how one kind of judgment is asked for and read (pure).

A protocol answers four questions, and nothing else in flask-eval assumes how judging
works:

- ``calls``: the open criteria of one subject (a response to an instance, judged by one
  judge): which judge calls to make, each covering some of them;
- ``render``: the chat messages of one call;
- ``read``: the judge's answer, criterion by criterion (a score, or why there is none);
- ``reminder``: the messages that ask once more for the criteria an answer missed.

The planner (``producer``), the executor (``workers``) and the ledger ask the protocol;
the ledger keys what is judged generically (a criterion, and a second model for
pairwise comparisons). FLASK's per-skill absolute grading in our own prompt format,
``flask-eval``, is the first protocol, in both of its modes: one call per instance (all
of its skills at once, FLASK's own protocol) or one call per skill.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from flask_eval.core.conversations import Turn
from flask_eval.core.images import Image
from flask_eval.rubrics.conversation import exchanges
from flask_eval.rubrics.parse import Reading, read
from flask_eval.rubrics.prompt import Message, reminder, render
from flask_eval.rubrics.scale import FIVE_POINT, Scale
from flask_eval.rubrics.skills import Skill
from flask_eval.rubrics.structured import instructions, opens_object, read_structured, schema_for

#: what a protocol judges: a FLASK skill, a custom criterion or an instance's own rubric
Criterion = Skill

MODES = ("instance", "skill")
#: the values of ``Protocol.rubric_rule``
RUBRIC_LEVELS = "levels"
RUBRIC_ANY = "any"
RUBRIC_RULES = (RUBRIC_LEVELS, RUBRIC_ANY)

#: a rationale of two to four sentences per criterion plus the final line, in tokens
COMPLETION_TOKENS_PER_SKILL = 120
COMPLETION_TOKENS_PER_CALL = 30


@dataclass(frozen=True)
class Subject:
    """What one judge call is about (untrusted texts: the protocol delimits them).

    ``system_prompt`` is what the model under test was told, if anything; ``reference`` is
    empty when there is none or the run is reference-free; ``response_b`` is the second
    response of a pairwise comparison (None for absolute grading).
    """

    instruction: str
    reference: str
    response: str
    system_prompt: str = ""
    response_b: str | None = None
    #: show the criteria in the reverse of the protocol's order (a judge probe's ``order``
    #: twin, ``core.probes``): the same judgment asked with its criteria the other way round
    reverse_criteria: bool = False
    #: a conversation's earlier turns (``core.conversations``): the user's (with their
    #: references), the judged model's answers to them and, pairwise, the second model's;
    #: empty for a one-shot instruction. The judged turn is ``len(history) + 1``.
    history: tuple[Turn, ...] = ()
    answers: tuple[str, ...] = ()
    answers_b: tuple[str, ...] = ()
    #: the images the instruction carries, bytes included (``core.images``)
    images: tuple[Image, ...] = ()

    @property
    def turn(self) -> int:
        """The number of the judged turn (1 for a one-shot instruction)."""
        return len(self.history) + 1


def shown(subject: Subject, criteria: Sequence[Criterion]) -> list[Criterion]:
    """``criteria`` in the order ``subject``'s prompt presents them."""
    return list(reversed(criteria)) if subject.reverse_criteria else list(criteria)


class Protocol(ABC):
    """One way of asking a judge for judgments and reading its answers.

    ``scale`` is the protocol's scores as data (``rubrics.scale``): its prompts name it,
    its reader refuses scores off it and the report draws its axes on it, so a protocol on
    another scale is a subclass that sets this attribute.
    """

    name: ClassVar[str]
    scale: ClassVar[Scale] = FIVE_POINT
    #: how its prompt uses a criterion's rubric, checked against ``scale`` before a run
    #: starts (``rubrics.coverage``): ``"levels"`` shows each level's description under
    #: the scale's name, so every criterion's rubric must describe exactly the scale's
    #: levels; ``"any"`` never puts a rubric's levels under the scale's name (only what
    #: a criterion judges, as MT-Bench's single 1-10 rating does, or levels as plain
    #: descriptions of quality, as a pairwise comparison does), so any rubric is taken
    rubric_rule: ClassVar[str] = RUBRIC_LEVELS
    #: the kind of work it does (docs/design/job-kinds.md): ``judgment`` (scores),
    #: ``generation`` (a model's response) or ``annotation`` (an instance's metadata);
    #: a kind other than judgment reads ``Reading.values``, not scores
    kind: ClassVar[str] = "judgment"
    #: whether an answer cut off by its token limit is read all the same (a generated
    #: response is kept and marked as cut off; a judgment never reads a partial answer)
    keeps_cut_off: ClassVar[bool] = False
    #: what the protocol's calls share, the prefix its messages mark as such
    #: (``rubrics.messages``): every call with the same criteria repeats it byte for byte,
    #: so a provider's prompt cache can serve it (docs/design/protocols.md lists each)
    shares: ClassVar[str]

    def __init__(self, mode: str = "instance") -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; choose one of: {', '.join(MODES)}")
        self.mode = mode

    def calls(self, criteria: Sequence[str]) -> list[list[str]]:
        """The judge calls that cover one subject's open ``criteria`` (in their order)."""
        if self.mode == "skill":
            return [[c] for c in criteria]
        return [list(criteria)] if criteria else []

    @abstractmethod
    def render(self, subject: Subject, criteria: Sequence[Criterion]) -> list[Message]:
        """The messages asking the judge to judge ``subject`` on ``criteria``."""

    @abstractmethod
    def read(self, text: str, criteria: Sequence[Criterion]) -> Reading:
        """Every criterion's score or problem, from the judge's answer ``text``."""

    @abstractmethod
    def reminder(
        self,
        previous: str,
        missing: Sequence[Criterion],
        problems: Mapping[str, str],
        read: Sequence[str] = (),
    ) -> list[Message]:
        """Messages appended to the call's to ask once more for ``missing`` only."""

    def response_schema(self, criteria: Sequence[Criterion]) -> dict[str, Any] | None:
        """The JSON schema of a structured answer for ``criteria`` (None: this protocol has
        no structured form); :meth:`read` reads such an answer too."""
        return None

    def render_structured(self, subject: Subject, criteria: Sequence[Criterion]) -> list[Message]:
        """The messages asking for an answer that follows :meth:`response_schema` (for a
        judge with ``structured`` on); only a protocol with a schema has them."""
        raise NotImplementedError(f"protocol {self.name} has no structured form")

    def completion_tokens(self, criteria: Sequence[Criterion]) -> int:
        """The expected length of an answer, for cost estimates before anything is spent."""
        return COMPLETION_TOKENS_PER_CALL + COMPLETION_TOKENS_PER_SKILL * len(criteria)


def canonical(criteria: Sequence[Criterion]) -> list[Criterion]:
    """``criteria`` by name (case-folded): FLASK lists an instance's skills by relevance,
    so the same three skills come in up to six orders, and each order would be a prompt
    prefix of its own (344 orders against 117 sets on FLASK's first 1,000 instances). The
    answer is read by name, so the order changes nothing else."""
    return sorted(criteria, key=lambda c: (c.name.casefold(), c.name))


class FlaskEvalProtocol(Protocol):
    """Ours: a rationale per skill, then a final ``[SCORES] {...}`` line (rubrics/prompt.py,
    rubrics/parse.py)."""

    name = "flask-eval"
    shares = (
        "the system prompt, the request, every criterion with its rubric and the output "
        "instructions (all before the instance)"
    )

    def render(self, subject: Subject, criteria: Sequence[Criterion]) -> list[Message]:
        """The criteria in one canonical order (:func:`canonical`), so that every call
        on the same set shares its prefix whatever order its instance lists them in."""
        return self._render(subject, shown(subject, canonical(criteria)), structured=False)

    def render_structured(self, subject: Subject, criteria: Sequence[Criterion]) -> list[Message]:
        """:meth:`render`'s messages with the JSON object's instructions in the section
        "How to answer" (part of the shared prefix: the structured form shares it too)."""
        return self._render(subject, shown(subject, canonical(criteria)), structured=True)

    def _render(
        self, subject: Subject, criteria: Sequence[Criterion], structured: bool
    ) -> list[Message]:
        return render(
            instruction=subject.instruction,
            reference=subject.reference,
            response=subject.response,
            skills=criteria,
            system_prompt=subject.system_prompt,
            scale=self.scale,
            answer=instructions(criteria, self.scale) if structured else None,
            history=exchanges(subject.history, subject.answers),
        )

    def response_schema(self, criteria: Sequence[Criterion]) -> dict[str, Any] | None:
        return schema_for(canonical(criteria), self.scale)

    def read(self, text: str, criteria: Sequence[Criterion]) -> Reading:
        """An answer that opens with a JSON object is a structured judgment and nothing else
        (rubrics/structured.py: exactly one object, so a ``[SCORES]`` line after it makes
        it unreadable rather than winning); any other answer is read from its final
        ``[SCORES]`` line, and one that starts with a brace but holds no readable line is
        reported as a broken object. One answer, one form (docs/design/protocols.md)."""
        if opens_object(text):
            return read_structured(text, criteria, self.scale)
        names = [c.name for c in criteria]
        free = read(text, names, [c.name for c in criteria if c.allow_na], self.scale)
        if free.scores or not text.lstrip().startswith("{"):
            return free
        return read_structured(text, criteria, self.scale)  # a broken object: say why

    def reminder(
        self,
        previous: str,
        missing: Sequence[Criterion],
        problems: Mapping[str, str],
        read: Sequence[str] = (),
    ) -> list[Message]:
        error = "; ".join(dict.fromkeys(problems[c.name] for c in missing if c.name in problems))
        return reminder(previous, missing, error=error or None, read=read, scale=self.scale)


PROTOCOLS: dict[str, type[Protocol]] = {FlaskEvalProtocol.name: FlaskEvalProtocol}
DEFAULT_PROTOCOL = FlaskEvalProtocol.name


def protocol(name: str = DEFAULT_PROTOCOL, mode: str = "instance") -> Protocol:
    """The protocol called ``name`` in ``mode``; KeyError naming the known ones."""
    try:
        cls = PROTOCOLS[name]
    except KeyError:
        raise KeyError(
            f"unknown protocol {name!r}; known protocols: {', '.join(PROTOCOLS)}"
        ) from None
    return cls(mode)


def protocols_scale(names: Iterable[object]) -> Scale:
    """The one scale a report draws the judges' scores on: the span of the scales of the
    protocols ``names`` (a judge's ``protocol``; None or "" is ours; unknown names, from an
    older or newer version, are skipped)."""
    scales = [
        PROTOCOLS[n].scale for n in (str(n or DEFAULT_PROTOCOL) for n in names) if n in PROTOCOLS
    ]
    return scales[0].span(scales[1:]) if scales else FIVE_POINT
