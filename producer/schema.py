"""Data objects of the evaluation inputs (no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, field

#: FLASK's difficulty labels, in order: level 1..5.
DIFFICULTY_LABELS: tuple[str, ...] = (
    "simple lifestyle knowledge",
    "advanced lifestyle knowledge",
    "formal education knowledge",
    "major level knowledge",
    "expert level knowledge",
)

#: FLASK's ten domains.
DOMAINS: tuple[str, ...] = (
    "Humanities",
    "Language",
    "Culture",
    "Health",
    "History",
    "Natural Science",
    "Math",
    "Social Science",
    "Technology",
    "Coding",
)


@dataclass(frozen=True)
class Instance:
    """One evaluation instance.

    ``domains`` holds only known domains (FLASK's ``-1`` is dropped, so the tuple may be
    empty); ``difficulty`` is a level 1-5, or None when unknown.
    """

    id: str
    instruction: str
    answer: str
    skills: tuple[str, ...]
    domains: tuple[str, ...] = ()
    difficulty: int | None = None
    line: int = 0


@dataclass(frozen=True)
class Response:
    """One model's response to one instance (may be empty: empty responses are judged)."""

    model: str
    instance_id: str
    text: str
    line: int = 0


@dataclass(frozen=True)
class ResponseSet:
    """All responses of one model, as loaded from one file."""

    model: str
    path: str
    responses: tuple[Response, ...] = field(default_factory=tuple)
