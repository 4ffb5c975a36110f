"""Every error flask-eval raises on purpose.

::

    FlaskEvalError                 base; carries a one-line message that says what to do next
    ├── InputError                 bad user input (files, flags); the CLI exits with code 2
    │   └── (path, line) naming where the problem is, when it comes from a file
    ├── ConfigError                bad settings or judge specs; exit code 2
    │   └── CredentialsError       a judge's API key is missing
    ├── RunConflictError           a run name reused with different inputs; exit code 2
    └── JudgeError                 a judge call that did not produce a judgment
        (carries ``reason``, a :class:`FailureReason`, and the raw output)

Provider SDK exceptions never escape the workers: each provider (``workers/providers/``)
maps its SDK's errors to ``JudgeError`` reasons, through one table of HTTP statuses
(``workers/errors.py``).
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    #: a person's row (``human/RATER``): it waits for the rater, never for a provider
    WAITING = "waiting"


class FailureReason(StrEnum):
    """Why a judgment failed; a fixed set so `status` can count by reason."""

    PROVIDER_ERROR = "provider_error"  # 5xx, connection errors, non-JSON bodies, after retries
    RATE_LIMITED = "rate_limited"  # 429s until the retry budget ran out
    TIMEOUT = "timeout"  # no answer before the client gave up
    TRUNCATED = "truncated"  # the answer was cut off by its token limit (never parsed)
    UNPARSEABLE = "unparseable"  # no valid score for this criterion, also after a reminder
    REFUSED = "refused"  # the provider refused the request (content filter, 400, 404)
    AUTH = "auth"  # bad or missing credentials
    CONFIG = "config"  # the judge could not be set up from the run's configuration
    HALTED = "halted"  # not sent: the judge's first calls in the run all failed alike
    INTERNAL = "internal"  # a bug or an unexpected exception in flask-eval
    FLAGGED = "flagged"  # a rater said they cannot judge the item (their reason in detail)


class FlaskEvalError(Exception):
    """Base of all flask-eval errors."""

    exit_code = 1


class InputError(FlaskEvalError):
    """Invalid input data or flags; nothing has been written or enqueued."""

    exit_code = 2

    def __init__(self, message: str, path: str | None = None, line: int | None = None) -> None:
        self.message = message
        self.path = path
        self.line = line
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.path is None:
            return self.message
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.message}"


class ConfigError(FlaskEvalError):
    """Invalid settings, judge specs or environment."""

    exit_code = 2


class CredentialsError(ConfigError):
    """A judge's API key is missing from the environment."""


class RunConflictError(FlaskEvalError):
    """A run name is reused with inputs that differ from the stored run."""

    exit_code = 2


class JudgeError(FlaskEvalError):
    """A judge call failed; ``reason`` is a FailureReason value, ``raw`` the raw output."""

    def __init__(
        self, reason: str, detail: str, raw: str = "", retry_after: float | None = None
    ) -> None:
        self.reason = reason
        self.detail = detail
        self.raw = raw
        self.retry_after = retry_after
        super().__init__(f"{reason}: {detail}")
