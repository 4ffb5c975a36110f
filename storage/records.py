"""Plain records the store returns and takes (no I/O), and how an instance's rubrics are
kept in the ledger (:func:`rubrics_text`, :func:`rubrics_of`)."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, NamedTuple

from flask_eval.core.conversations import Turn
from flask_eval.core.errors import Status
from flask_eval.core.images import Image, ImageRef
from flask_eval.core.redact import redact_known, secret_values
from flask_eval.core.stored import StoredConfig
from flask_eval.core.text import storable
from flask_eval.core.types import Instance, InstanceRubric


def rubrics_text(rubrics: Mapping[str, InstanceRubric]) -> str:
    """An instance's own rubrics as the ledger keeps them: a JSON object, criterion ->
    ``InstanceRubric.to_data()`` (``{}``: none), keys sorted (equal rubrics, equal text)."""
    return json.dumps(
        {name: rubric.to_data() for name, rubric in rubrics.items()},
        sort_keys=True,
        ensure_ascii=False,
    )


@functools.lru_cache(maxsize=4096)
def rubrics_of(text: str | None) -> Mapping[str, InstanceRubric]:
    """The rubrics :func:`rubrics_text` wrote (read-only; cached: the rows of one instance
    share one mapping). NULL or ``{}``: none."""
    if not text:
        return MappingProxyType({})
    data = json.loads(text)
    return MappingProxyType({str(k): InstanceRubric.from_data(v) for k, v in data.items()})


def history_text(history: Sequence[Turn]) -> str:
    """A conversation's earlier user turns as the ledger keeps them (JSON list)."""
    return json.dumps([t.to_data() for t in history], ensure_ascii=False)


@functools.lru_cache(maxsize=4096)
def history_of(text: str | None) -> tuple[Turn, ...]:
    """The turns :func:`history_text` wrote (NULL or ``[]``: none)."""
    if not text or text == "[]":
        return ()
    return tuple(Turn(str(t["user"]), str(t.get("reference") or "")) for t in json.loads(text))


def answers_text(answers: Sequence[str]) -> str:
    """A model's answers to a conversation's earlier turns as the ledger keeps them."""
    return json.dumps(list(answers), ensure_ascii=False)


@functools.lru_cache(maxsize=4096)
def answers_of(text: str | None) -> tuple[str, ...]:
    """The answers :func:`answers_text` wrote (NULL or ``[]``: none)."""
    if not text or text == "[]":
        return ()
    return tuple(str(a) for a in json.loads(text))


def images_text(images: Sequence[ImageRef]) -> str:
    """An instance's images as the ledger keeps them (JSON list of digests and sizes)."""
    return json.dumps([i.to_data() for i in images])


@functools.lru_cache(maxsize=4096)
def images_of(text: str | None) -> tuple[ImageRef, ...]:
    """The images :func:`images_text` wrote (NULL or ``[]``: none)."""
    if not text or text == "[]":
        return ()
    return tuple(ImageRef.from_data(i) for i in json.loads(text))


#: the columns of an ``image`` row, in :func:`image_values` order
IMAGE_COLUMNS = ("run_id", "sha256", "media_type", "width", "height", "size", "data")


def image_values(run_id: int, image: Image) -> tuple[Any, ...]:
    """The ``image`` row of ``image`` (:data:`IMAGE_COLUMNS`)."""
    ref = image.ref
    return (run_id, ref.sha256, ref.media_type, ref.width, ref.height, ref.size, image.data)


def instance_values(run_id: int, instance: Instance) -> dict[str, Any]:
    """The ``instance`` row of ``instance`` (its domains go to ``instance_domain``)."""
    return {
        "run_id": run_id,
        "instance_id": instance.id,
        "instruction": instance.instruction,
        "answer": instance.answer,
        "skills": json.dumps(list(instance.skills)),
        "difficulty": instance.difficulty,
        "system_prompt": instance.system_prompt,
        "rubrics": rubrics_text(instance.rubrics),
        "capability": instance.capability,
        "task": instance.task,
        "turn": instance.turn,
        "conversation": instance.conversation,
        "history": history_text(instance.history),
        "images": images_text(instance.images),
    }


def instance_of(row: Mapping[Any, Any], domains: Sequence[str] = ()) -> Instance:
    """The :class:`Instance` an ``instance`` row (and its domains) holds: what
    :func:`instance_values` wrote, less the input file's line number."""
    difficulty = row["difficulty"]
    return Instance(
        id=str(row["instance_id"]),
        instruction=str(row["instruction"]),
        answer=str(row["answer"]),
        skills=tuple(str(s) for s in json.loads(row["skills"])),
        domains=tuple(domains),
        difficulty=None if difficulty is None else int(difficulty),
        system_prompt=str(row["system_prompt"] or ""),
        rubrics=dict(rubrics_of(row["rubrics"])),
        capability=None if row["capability"] is None else str(row["capability"]),
        task=None if row["task"] is None else str(row["task"]),
        turn=None if row.get("turn") is None else int(row["turn"]),
        conversation=None if row.get("conversation") is None else str(row["conversation"]),
        history=history_of(row.get("history")),
        images=images_of(row.get("images")),
    )


@dataclass(frozen=True)
class RunInfo:
    id: int
    name: str
    fingerprint: str
    mode: str
    #: what the run was planned with (its one decoder: ``StoredConfig.from_data``)
    config: StoredConfig
    #: the ids of the ledger rows this process has just written for the run, in the
    #: order of ``storage.planning.ledger_subjects`` (None: a run found, or ids not known)
    ledger: range | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class JobContext:
    """What a worker needs to judge one ledger row, as the ledger says it.

    ``system_prompt`` is what the model under test was told; ``rubrics`` are the
    instance's own rubrics (criterion -> rubric, used instead of the run's criterion of
    that name; :attr:`rubric` is this row's, if any). In a pairwise row ``response`` is
    the text of ``model`` (shown first) and ``response_b`` that of ``model_b`` (shown
    second); ``response_b`` is ``""`` for absolute grading. ``claims`` is the row's claim
    count once this claim took it: the claim's token (the row is still this claim's
    while it is running with that count, see ``Store.extend_leases``).
    """

    id: int
    run_id: int
    model: str
    model_b: str
    instance_id: str
    criterion: str
    judge: str
    instruction: str
    reference: str
    response: str
    system_prompt: str = ""
    rubrics: Mapping[str, InstanceRubric] = field(default_factory=dict, hash=False)
    response_b: str = ""
    claims: int = 0
    #: a conversation's earlier turns (``core.conversations``): the user's, and the
    #: answers of ``model`` and of ``model_b`` to them; the instruction's images
    history: tuple[Turn, ...] = ()
    answers: tuple[str, ...] = ()
    answers_b: tuple[str, ...] = ()
    images: tuple[ImageRef, ...] = ()

    @classmethod
    def of_row(cls, row: Sequence[Any], claims: int = 0) -> JobContext:
        """From a claim's columns: the ten fields above, the system prompt, the rubrics'
        JSON text, optionally the second response's text (NULL: none) and then the
        instance's history and images and the two responses' histories (JSON texts)."""
        (
            id_,
            run_id,
            model,
            model_b,
            instance_id,
            criterion,
            judge,
            instruction,
            reference,
            response,
            system_prompt,
            rubrics,
            *rest,
        ) = row
        if len(rest) not in (0, 1, 5):
            raise ValueError(f"a claim row has 12, 13 or 17 columns, got {len(row)}")
        response_b = rest[0] if rest else None
        history, images, answers, answers_b = rest[1:] if len(rest) == 5 else (None,) * 4
        return cls(
            id_,
            run_id,
            model,
            model_b,
            instance_id,
            criterion,
            judge,
            instruction,
            reference,
            response,
            str(system_prompt or ""),
            rubrics_of(rubrics),
            str(response_b or ""),
            claims,
            history_of(history),
            answers_of(answers),
            answers_of(answers_b),
            images_of(images),
        )

    @property
    def subject_key(self) -> tuple[int, str, str, str, str]:
        """What the rows of one judge call must share: run, models, instance and judge."""
        return (self.run_id, self.model, self.model_b, self.instance_id, self.judge)

    @property
    def rubric(self) -> InstanceRubric | None:
        """The instance's own rubric for this row's criterion (None: the run's applies)."""
        return self.rubrics.get(self.criterion)


@dataclass(frozen=True)
class CallRecord:
    """A paid judge answer: what the provider returned for one request, kept for good.

    ``uid`` identifies this answer (a replayed write stores it once); ``cache_key``
    identifies the prompt, judge and sampling parameters it answered.
    """

    uid: str
    cache_key: str
    run_id: int
    judge: str
    raw: str
    parsed: bool
    finish: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_ms: float = 0.0
    #: of ``prompt_tokens``: read from the provider's prompt cache / written to it
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    #: made through the provider's batch API
    batch: bool = False
    #: why the provider's usage was not trusted, with the usage as given (None: trusted);
    #: the counts and cost above are then a safe estimate (workers/usage.py)
    usage_note: str | None = None


#: a call row's columns that a :class:`CallRecord` holds, in its order (the dialects'
#: inserts and cache reads name them)
CALL_FIELDS = tuple(f.name for f in fields(CallRecord))


@dataclass(frozen=True)
class Outcome:
    """The end of one ledger row: done (score None = N/A) or failed with a reason.

    ``asks`` and ``requests`` are added to the row's counters: answers asked of the
    judge for it, and HTTP requests sent for it (retries included).
    """

    id: int
    status: Status
    score: int | None = None
    rationale: str | None = None
    reason: str | None = None
    detail: str | None = None
    call_uid: str | None = None
    asks: int = 0
    requests: int = 0
    #: what a kind other than judgment read (a response, labels as JSON): ``Reading.values``
    value: str | None = None


def as_stored(
    calls: Sequence[CallRecord], outcomes: Sequence[Outcome]
) -> tuple[list[CallRecord], list[Outcome]]:
    """``calls`` and ``outcomes`` as the ledger keeps them: the environment's secret values
    (``core.redact.redact_known``: a judge's API key among them) hidden, and NUL and lone
    surrogates replaced (``core.text.storable``: PostgreSQL stores neither), in every text
    a provider's answer reaches: an answer, a usage it was not trusted with, a rationale,
    a failure's detail, a read value.

    The one cleaning of what enters the ledger (``Store.write`` applies it): a proxy or a
    provider that echoes the request's key, or answers a NUL, puts it in the answer,
    whichever way the answer came (a live call, a provider batch, the worker's spool, a
    duplicate batch result).
    """
    secrets = secret_values()

    def clean(text: str) -> str:
        return storable(redact_known(text, secrets) if secrets else text)

    def clean_or_none(text: str | None) -> str | None:
        return text if text is None else clean(text)

    kept = [
        c
        if (raw := clean(c.raw), note := clean_or_none(c.usage_note)) == (c.raw, c.usage_note)
        else replace(c, raw=raw, usage_note=note)
        for c in calls
    ]
    ended = []
    for o in outcomes:
        texts = (clean_or_none(o.rationale), clean_or_none(o.detail), clean_or_none(o.value))
        if texts == (o.rationale, o.detail, o.value):
            ended.append(o)
        else:
            ended.append(replace(o, rationale=texts[0], detail=texts[1], value=texts[2]))
    return kept, ended


class OpenRow(NamedTuple):
    """A ledger row still to judge (pending, or running on an expired lease); a named
    tuple: a large run's dispatch reads millions of them."""

    id: int
    model: str
    model_b: str
    instance_id: str
    criterion: str
    judge: str


@dataclass
class PlannedCall:
    """One judge call still to make: its ledger rows and what they are about."""

    ids: list[int]
    model: str
    instance_id: str
    judge: str
    criteria: list[str] = field(default_factory=list)
    model_b: str = ""


@dataclass(frozen=True)
class Halt:
    """A judge of a run halted after its first calls all failed alike."""

    judge: str
    reason: str
    detail: str
