"""One judge interface: a single async ``generate`` plus default hooks.

Providers register by name and import their SDK lazily, so a worker that only talks
to OpenAI-compatible servers never imports the Anthropic SDK (and vice versa).
"""

from __future__ import annotations

import random
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import import_module
from urllib.parse import urlsplit

from flask_eval.exceptions import ConfigError, JudgeError
from storage.models import FailureReason

Message = dict[str, str]

#: provider name -> "module:attribute" of its Judge class (imported on first use)
PROVIDERS: dict[str, str] = {
    "openai": "workers.providers.openai_judge:OpenAIJudge",
    "anthropic": "workers.providers.anthropic_judge:AnthropicJudge",
    "memory": "workers.providers.memory_judge:MemoryJudge",
}

_MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/+-]{0,199}$")


@dataclass(frozen=True)
class JudgeSpec:
    """``provider/model`` or ``provider/model@BASE_URL``."""

    provider: str
    model: str
    base_url: str | None = None

    @property
    def name(self) -> str:
        base = f"{self.provider}/{self.model}"
        return f"{base}@{self.base_url}" if self.base_url else base

    @classmethod
    def parse(cls, spec: str) -> JudgeSpec:
        text = spec.strip()
        head, sep, base_url = text.partition("@")
        provider, slash, model = head.partition("/")
        if not slash or not provider or not model:
            raise ConfigError(
                f"invalid judge {spec!r}: expected provider/model[@BASE_URL], "
                "e.g. openai/gpt-4o or openai/my-model@http://127.0.0.1:8000/v1"
            )
        if provider not in PROVIDERS:
            raise ConfigError(
                f"unknown judge provider {provider!r} in {spec!r}; "
                f"known providers: {', '.join(sorted(PROVIDERS))}"
            )
        if not _MODEL_RE.match(model):
            raise ConfigError(f"invalid model name {model!r} in judge {spec!r}")
        if sep:
            parts = urlsplit(base_url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigError(
                    f"invalid base URL {base_url!r} in judge {spec!r}: expected http(s)://host[:port][/path]"
                )
            if parts.username or parts.password:
                raise ConfigError(
                    f"judge {provider}/{model}: credentials in the base URL are not allowed; "
                    "put the key in the provider's environment variable"
                )
            try:
                parts.port  # noqa: B018  (raises on an invalid port)
            except ValueError:
                raise ConfigError(f"invalid port in base URL of judge {spec!r}") from None
            return cls(provider, model, base_url.rstrip("/"))
        return cls(provider, model, None)


@dataclass(frozen=True)
class GenerateConfig:
    max_tokens: int = 1024
    temperature: float = 0.0
    timeout: float = 120.0


@dataclass(frozen=True)
class JudgeOutput:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class RetryDecision:
    retry: bool
    delay: float = 0.0


RETRYABLE = frozenset(
    {FailureReason.PROVIDER_ERROR, FailureReason.RATE_LIMITED, FailureReason.TIMEOUT}
)


class Judge(ABC):
    """A judge model behind one provider endpoint."""

    #: calls this judge allows in flight at once in one process (a default; workers may lower it)
    max_connections: int = 256
    #: attempts before a retryable error becomes a recorded failure
    max_attempts: int = 6

    def __init__(self, spec: JudgeSpec, max_connections: int | None = None) -> None:
        self.spec = spec
        if max_connections is not None:
            self.max_connections = max_connections

    @property
    def name(self) -> str:
        return self.spec.name

    @abstractmethod
    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> JudgeOutput:
        """Send ``messages``; raise JudgeError (classified) on failure."""

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


def judge_class(provider: str) -> type[Judge]:
    module, _, attr = PROVIDERS[provider].partition(":")
    cls: type[Judge] = getattr(import_module(module), attr)
    return cls


def create_judge(spec: JudgeSpec | str, max_connections: int | None = None) -> Judge:
    """The judge for ``spec``, its HTTP pool sized for ``max_connections`` calls at once."""
    parsed = JudgeSpec.parse(spec) if isinstance(spec, str) else spec
    return judge_class(parsed.provider)(parsed, max_connections)


def check_not_refused(text: str | None, detail: str) -> str:
    """Raise a REFUSED JudgeError when a provider returned no text at all."""
    if text is None:
        raise JudgeError(FailureReason.REFUSED, detail)
    return text
