"""What a provider's batch API offers the executor: one interface, one file per provider.

A judge whose provider has a batch API (OpenAI's Batch API, Anthropic's Message Batches,
Gemini's batch mode) implements :class:`BatchAPI` beside ``Judge.generate``; the executor
(the batch lane of the workers) owns the lifecycle in the ledger and calls only these five
methods. Each provider's file maps its SDK's objects to :class:`BatchStatus` and each
result line to a :class:`JudgeOutput` or a :class:`JudgeError`, with the same readers of
stop reasons and usage as its live calls.

Every batch carries ``tag``, our own id of it (a ledger row written *before* the batch is
submitted): the provider keeps it (OpenAI's ``metadata``, Gemini's ``display_name``,
Anthropic's ``custom_id`` prefixes), so that a batch the provider accepted but whose id we
never recorded (the process died in between) is found again (:meth:`BatchAPI.find_batch`)
instead of being submitted twice.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from importlib import import_module
from typing import Literal

from flask_eval.core.errors import ConfigError, JudgeError
from flask_eval.core.types import JudgeSpec
from flask_eval.rubrics.prompt import Message
from flask_eval.workers.judge import GenerateConfig, Judge, JudgeOutput

#: provider name -> "module:attribute" of its BatchAPI class, whose constructor takes the
#: provider's Judge (imported on first use); a provider without a line has no batch API
BATCH_APIS: dict[str, str] = {
    "openai": "flask_eval.workers.providers.openai_batch:OpenAIBatch",
    "anthropic": "flask_eval.workers.providers.anthropic_batch:AnthropicBatch",
    "gemini": "flask_eval.workers.providers.gemini_batch:GeminiBatch",
}

#: a batch's state as the executor reads it: the provider still works on it (``open``); its
#: results can be read (``ended``: every request answered, failed, expired or canceled);
#: the provider refused or lost it as a whole (``failed``: its calls are planned again)
BatchPhase = Literal["open", "ended", "failed"]


@dataclass(frozen=True)
class BatchRequest:
    """One call of a batch: ``custom_id`` names it in the provider's results."""

    custom_id: str
    messages: Sequence[Message]
    config: GenerateConfig


@dataclass(frozen=True)
class BatchStatus:
    """A provider batch as last seen: its phase, its provider's own word for its state
    (``in_progress``, ``ended``, ``JOB_STATE_SUCCEEDED``, ...), its request counts and when
    it expires (None: not said)."""

    batch_id: str
    phase: BatchPhase
    state: str
    total: int = 0
    succeeded: int = 0
    failed: int = 0
    expires_at: datetime | None = None
    #: provider file ids (OpenAI: input, output, error), kept in the ledger for inspection
    files: Mapping[str, str] | None = None


class BatchResults(dict[str, JudgeOutput | JudgeError]):
    """An ended batch's results by ``custom_id`` (:meth:`BatchAPI.batch_results`), and the
    answers a provider returned beyond one a request (``duplicates``).

    A provider may list a request twice. Whatever the provider, the first answer listed
    is the one kept (an error never replaces an answer, and an answer listed after an
    error is kept instead of it); every later answer is a duplicate: paid for, so the
    executor stores it as a call of its own (never read), counted in the cost.
    """

    def __init__(self) -> None:
        super().__init__()
        self.duplicates: list[tuple[str, JudgeOutput]] = []

    def add(self, custom_id: str, result: JudgeOutput | JudgeError) -> None:
        """One result line, in the order the provider listed them."""
        had = self.get(custom_id)
        if had is None or (isinstance(had, JudgeError) and isinstance(result, JudgeOutput)):
            self[custom_id] = result
        elif isinstance(result, JudgeOutput):
            self.duplicates.append((custom_id, result))


@dataclass(frozen=True)
class Found:
    """What :meth:`BatchAPI.find_batch` learned of a batch submitted with a tag: the
    provider holds it (``batch_id``), it surely does not (``batch_id`` None and
    ``settled``), or it cannot tell yet (``settled`` False: ask again later; never submit
    meanwhile)."""

    batch_id: str | None
    settled: bool = True


class BatchAPI(ABC):
    """A provider's batch API, as one judge (its model, endpoint and key) uses it: a
    subclass's constructor takes that :class:`Judge` (its client, key and model)."""

    #: the most requests one batch may hold (the provider's limit)
    max_batch_size: int = 50_000

    @abstractmethod
    async def submit_batch(self, tag: str, requests: Sequence[BatchRequest]) -> BatchStatus:
        """Submit ``requests`` as one batch carrying ``tag``; the provider's status of it."""

    @abstractmethod
    async def find_batch(self, tag: str, since: datetime, size: int) -> Found:
        """The batch carrying ``tag`` (of ``size`` requests, submitted after ``since``), if
        the provider holds one: how a crash between submitting and recording is healed."""

    @abstractmethod
    async def poll_batch(self, batch_id: str) -> BatchStatus:
        """The provider's status of a batch."""

    @abstractmethod
    async def batch_results(self, batch_id: str) -> BatchResults:
        """An ended batch's results by ``custom_id``: an answer, or why there is none
        (a request the provider failed, expired or canceled is a JudgeError with a reason
        the executor retries: its call is planned again, alone); the first answer of a
        request listed twice, the others in ``duplicates`` (:class:`BatchResults`)."""

    async def cancel_batch(self, batch_id: str) -> None:  # noqa: B027  (optional)
        """Ask the provider to stop a batch (a deleted run's); its results stay readable."""

    @classmethod
    def check_endpoint(cls, spec: JudgeSpec) -> None:
        """ConfigError if the server ``spec`` names has no batch API (a local
        OpenAI-compatible server behind a provider that has one): asked once, when a
        judges file says ``batch: true``, before anything is written. Only a definite
        answer refuses (404 or 405 on the batches endpoint); a server that cannot be
        reached now is judged when its calls are sent."""
        return None


def has_batch_api(provider: str) -> bool:
    """Whether ``provider`` (a code provider, not an OpenAI-compatible server) has one."""
    return provider in BATCH_APIS


def batch_api_class(provider: str) -> type[BatchAPI]:
    module, _, attr = BATCH_APIS[provider].partition(":")
    cls: type[BatchAPI] = getattr(import_module(module), attr)
    return cls


def check_batch_spec(spec: JudgeSpec) -> None:
    """ConfigError unless ``spec``'s provider, and the server it names, take batches: a
    provider without a batch API (every OpenAI-compatible one: vLLM, Mistral, ...), or a
    base URL whose server answers 404 on the batches endpoint (the judges file's
    ``batch: true``, checked before anything is written)."""
    if not has_batch_api(spec.provider):
        with_batches = ", ".join(sorted(BATCH_APIS))
        raise ConfigError(
            f"judge {spec.name}: batch: true, but provider {spec.provider} has "
            f"no batch API (providers with one: {with_batches})"
        )
    batch_api_class(spec.provider).check_endpoint(spec)


def batch_api(judge: Judge) -> BatchAPI:
    """The batch API of ``judge``'s provider (KeyError: it has none: check
    :func:`has_batch_api` when a judges file is read)."""
    return batch_api_class(judge.spec.provider)(judge)  # type: ignore[call-arg]
