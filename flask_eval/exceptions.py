"""Every error flask-eval raises on purpose.

::

    FlaskEvalError                 base; carries a one-line message that says what to do next
    ├── InputError                 bad user input (files, flags); the CLI exits with code 2
    │   └── (path, line) naming where the problem is, when it comes from a file
    ├── ConfigError                bad settings or judge specs; exit code 2
    │   └── CredentialsError       a judge's API key is missing
    ├── RunConflictError           a run name reused with different inputs; exit code 2
    └── JudgeError                 a judge call that did not produce a judgment
        (carries ``reason``, one of ``storage.models.FailureReason``, and the raw output)

Provider SDK exceptions never escape the workers: ``workers/errors.py`` classifies
them into ``JudgeError`` reasons in one place.
"""

from __future__ import annotations


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
