"""The judge interface every provider implements: one async ``generate`` (:class:`Judge`),
its settings (:class:`GenerateConfig`) and answer (:class:`JudgeOutput`), and how an answer
ended (:data:`FINISHED` and the others). ``workers.judge`` re-exports it with the registry
of providers, which are built on it (``workers/providers/``).
"""

from __future__ import annotations

import os
import random
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from flask_eval.core.errors import FailureReason, JudgeError
from flask_eval.core.redact import secret_variable
from flask_eval.core.types import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_TEMPERATURE,
    JudgeSpec,
)
from flask_eval.rubrics.messages import Message as Message  # re-exported: the judges' type
from flask_eval.workers.errors import classify_common


@dataclass(frozen=True)
class GenerateConfig:
    """Sampling and transport settings of one call. ``temperature`` None: the provider's
    default (and the only choice where the SDK takes none)."""

    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float | None = DEFAULT_TEMPERATURE
    timeout: float = 120.0
    #: a JSON schema the answer must follow (structured outputs), or None for free text
    schema: Mapping[str, Any] | None = None
    #: the request's sampling seed (a repeated judgment's sample index, 2..K; None: sent
    #: without one), where the provider takes one (OpenAI, Gemini; Anthropic: resent)
    seed: int | None = None


#: why a provider stopped writing, as the executor reads it: it finished (``stop``); it hit
#: ``max_tokens`` (``length``: never read; asked again with ``retry_max_tokens`` if the
#: judge has one); it hit the model's context window (``context``: never read, and a
#: larger budget would not help); it refused (``refusal``); or it stopped short for
#: another reason (``incomplete``: a tool call, a paused turn, a malformed function call;
#: never read, failed as ``provider_error``). Each provider maps every stop reason of
#: its SDK to one of these in a table of its own (``STOP_REASONS``), tested against the
#: SDK's own list.
FINISHED, CUT_OFF, CONTEXT_FULL, REFUSAL, INCOMPLETE = (
    "stop",
    "length",
    "context",
    "refusal",
    "incomplete",
)


#: why an answer that is not whole fails unread, by its finish (the executor fails it so)
_NOT_READ = {
    CUT_OFF: (
        FailureReason.TRUNCATED,
        "the answer was cut off by its token limit (max_tokens){} and was not read",
    ),
    CONTEXT_FULL: (
        FailureReason.TRUNCATED,
        "the answer was cut off by the model's context window{} and was not read",
    ),
    INCOMPLETE: (
        FailureReason.PROVIDER_ERROR,
        "the judge stopped short of a whole answer{}; it was not read",
    ),
}


def not_read(finish: str, stop_reason: str) -> JudgeError:
    """The failure of an answer that is neither whole nor a refusal, unread: its reason,
    and a detail naming the provider's ``stop_reason``."""
    reason, detail = _NOT_READ.get(finish, _NOT_READ[INCOMPLETE])
    return JudgeError(reason, detail.format(f" (stop reason {stop_reason})" if stop_reason else ""))


@dataclass(frozen=True)
class JudgeOutput:
    """A billed answer. ``finish`` says whether it is whole (``stop``) or not (see
    :data:`FINISHED` and the others); ``stop_reason`` is the provider's own word for it
    (``end_turn``, ``pause_turn``, ``MAX_TOKENS``, ...), named in a failure's detail."""

    text: str
    #: every prompt token, cached and cache-written ones included
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish: str = FINISHED
    stop_reason: str = ""
    #: of ``prompt_tokens``: read from the provider's prompt cache / written to it
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    #: the provider's usage as it gave it (JSON): kept where it cannot be trusted
    #: (``workers.usage``, which checks the counts above before they are stored)
    usage: Any = None


def finish_of(
    reason: str | None, table: Mapping[str, str], completion_tokens: int, max_tokens: int
) -> str:
    """How a provider's stop ``reason`` reads, by its ``table``.

    An unknown reason is :data:`INCOMPLETE` (never read as whole). An unstated one (JSON
    null, which some OpenAI-compatible servers send, or Gemini's unspecified) is read
    from the usage: an answer that spent its whole ``max_tokens`` is cut off, a shorter
    one is whole (so is one without usage: nothing says otherwise).
    """
    if reason is None:
        return CUT_OFF if completion_tokens >= max_tokens else FINISHED
    return table.get(reason, INCOMPLETE)


#: what :func:`usage_count` reads where a usage field holds no integer (never a count:
#: ``workers.usage`` does not trust it)
NOT_A_COUNT = -1


def usage_count(usage: object, key: str) -> int:
    """A token count of an answer's JSON ``usage`` object, as given (checked later, by
    ``workers.usage``): 0 where the field is absent, :data:`NOT_A_COUNT` where it holds
    anything but an integer."""
    value = usage.get(key) if isinstance(usage, dict) else None
    if value is None:
        return 0
    return value if isinstance(value, int) and not isinstance(value, bool) else NOT_A_COUNT


@dataclass(frozen=True)
class RetryDecision:
    retry: bool
    delay: float = 0.0


RETRYABLE = frozenset(
    {FailureReason.PROVIDER_ERROR, FailureReason.RATE_LIMITED, FailureReason.TIMEOUT}
)


class Judge(ABC):
    """A judge model behind one provider endpoint."""

    #: the environment variable that holds this provider's API key
    key_env: ClassVar[str | None] = None
    #: the environment variable naming this provider's default base URL, if one is read
    base_url_env: ClassVar[str | None] = None
    #: whether the provider's call takes a sampling temperature (else its default applies)
    takes_temperature: ClassVar[bool] = True
    #: whether the provider can hold an answer to a JSON schema (``GenerateConfig.schema``)
    takes_schema: ClassVar[bool] = False
    #: the media types of the images it reads (empty: none; a prompt with an image fails
    #: as ``config``, never sent without it: ``workers.providers.images``)
    image_types: ClassVar[tuple[str, ...]] = ()
    #: calls this judge allows in flight at once in one process (a default; workers may lower it)
    max_connections: int = 256
    #: attempts before a retryable error becomes a recorded failure
    max_attempts: int = 6

    def __init__(self, spec: JudgeSpec, max_connections: int | None = None) -> None:
        self.spec = spec
        if max_connections is not None:
            self.max_connections = max_connections
        if self.key_env:  # its value is hidden from every message, log line and answer
            secret_variable(self.key_env)

    @property
    def name(self) -> str:
        return self.spec.name

    @classmethod
    def check_spec(cls, spec: JudgeSpec) -> None:
        """Raise ConfigError if ``spec`` cannot work with this provider (e.g. a base URL
        of the wrong shape), before anything is written."""
        return None

    def api_key(self) -> str | None:
        """This judge's API key, from the provider's environment variable."""
        return os.environ.get(self.key_env) or None if self.key_env else None

    def budget_key(self) -> str:
        """The endpoint whose rate limits this judge shares: provider, model, base URL and
        a one-way tag of the API key (never the key)."""
        from flask_eval.workers.limiter import endpoint_key

        spec = self.spec
        return endpoint_key(spec.provider, spec.model, spec.base_url, self.api_key())

    @abstractmethod
    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> JudgeOutput:
        """Send ``messages``; raise JudgeError (classified by :meth:`classify`) on failure."""

    def classify(self, exc: BaseException) -> JudgeError:
        """This provider's exceptions as a JudgeError with a fixed reason (its table
        lives in its own file; the default knows only timeouts and our own errors)."""
        return classify_common(exc)

    def should_retry(self, error: JudgeError, attempt: int) -> RetryDecision:
        """Exponential backoff with full jitter, honouring the provider's Retry-After."""
        if error.reason not in RETRYABLE or attempt >= self.max_attempts:
            return RetryDecision(False)
        backoff = random.uniform(0, min(60.0, 1.0 * 2 ** (attempt - 1)))
        if error.retry_after is not None:
            return RetryDecision(True, error.retry_after + random.uniform(0, 0.25))
        return RetryDecision(True, backoff)

    async def aclose(self) -> None:  # noqa: B027  (a default hook: nothing to release)
        """Release the HTTP client."""
