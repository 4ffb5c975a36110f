"""One judge interface: a single async ``generate`` plus what each provider knows.

A provider is one file in ``workers/providers/`` (its SDK call, its error mapping, the
environment variable of its key, its base-URL rules, its budget key) plus one line in
:data:`PROVIDERS`. Providers import their SDK lazily, so a worker that only talks to
OpenAI-compatible servers never imports the Anthropic SDK (and vice versa).
"""

from __future__ import annotations

import os
import random
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import import_module
from typing import ClassVar
from urllib.parse import parse_qsl, urlsplit

from core.limits import MAX_JUDGE_SPEC
from core.text import clip, control_problem
from flask_eval.exceptions import ConfigError, JudgeError
from flask_eval.redact import looks_like_credential
from storage.models import FailureReason
from workers.errors import classify_common

Message = dict[str, str]

#: provider name -> "module:attribute" of its Judge class (imported on first use)
PROVIDERS: dict[str, str] = {
    "openai": "workers.providers.openai_judge:OpenAIJudge",
    "anthropic": "workers.providers.anthropic_judge:AnthropicJudge",
    "gemini": "workers.providers.gemini_judge:GeminiJudge",
}


def register_provider(name: str, target: str) -> None:
    """Add a provider (``"module:Class"``) at run time: plug-ins, and the tests' in-memory
    judge, which is not offered to users."""
    PROVIDERS[name] = target


_MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/+-]{0,199}$")


@dataclass(frozen=True)
class JudgeSpec:
    """``provider/model`` or ``provider/model@BASE_URL``.

    ``name`` is the canonical spec (what a worker needs to call the judge);
    ``default_name`` (provider/model) is what reports call a judge that was not named.
    A base URL carries no credential, neither in its userinfo nor in its query string:
    it is stored with the run and printed in reports, so keys belong in the provider's
    environment variable.
    """

    provider: str
    model: str
    base_url: str | None = None

    @property
    def name(self) -> str:
        base = f"{self.provider}/{self.model}"
        return f"{base}@{self.base_url}" if self.base_url else base

    @property
    def default_name(self) -> str:
        """``provider/model``: a judge's name unless one is given (no base URL)."""
        return f"{self.provider}/{self.model}"

    @classmethod
    def parse(cls, spec: str) -> JudgeSpec:
        if len(spec) > MAX_JUDGE_SPEC:
            raise ConfigError(
                f"judge spec is longer than {MAX_JUDGE_SPEC} characters: {clip(spec)}"
            )
        text = spec.strip()
        problem = control_problem(text)
        if problem is not None:
            raise ConfigError(f"judge {clip(text)} {problem}")
        head, sep, base_url = text.partition("@")
        provider, slash, model = head.partition("/")
        if not slash or not provider or not model:
            raise ConfigError(
                f"invalid judge {clip(spec)}: expected provider/model[@BASE_URL], "
                "e.g. openai/gpt-4o or openai/my-model@http://127.0.0.1:8000/v1"
            )
        if provider not in PROVIDERS:
            raise ConfigError(
                f"unknown judge provider {clip(provider)} in {clip(spec)}; "
                f"known providers: {', '.join(sorted(PROVIDERS))}"
            )
        if not _MODEL_RE.match(model):
            raise ConfigError(f"invalid model name {clip(model)} in judge {clip(spec)}")
        if sep:
            return cls(provider, model, cls._base_url(base_url, provider, model))
        return cls(provider, model, None)

    @classmethod
    def _base_url(cls, url: str, provider: str, model: str) -> str:
        """``url`` without a trailing slash, or ConfigError saying what is wrong with it."""
        judge = f"judge {provider}/{model}"
        expected = "expected http(s)://host[:port][/path]"
        if any(char.isspace() for char in url):
            raise ConfigError(f"invalid base URL {clip(url)} of {judge}: it contains a space")
        try:
            parts = urlsplit(url)
            host, port = parts.hostname, parts.port
        except ValueError as exc:
            what = "an unclosed or invalid [IPv6] address" if "IPv6" in str(exc) else None
            if what is None:
                raise ConfigError(f"invalid port in base URL {clip(url)} of {judge}") from None
            raise ConfigError(
                f"invalid base URL {clip(url)} of {judge}: {what}; {expected}"
            ) from None
        if parts.scheme not in ("http", "https") or not host:
            raise ConfigError(f"invalid base URL {clip(url)} of {judge}: {expected}")
        if port == 0:
            raise ConfigError(f"invalid port in base URL {clip(url)} of {judge}")
        key_env = getattr(judge_class(provider), "key_env", None)
        where = "the provider's environment variable" + (f" ({key_env})" if key_env else "")
        if parts.username or parts.password:
            raise ConfigError(
                f"{judge}: credentials in the base URL are not allowed; put the key in {where}"
            )
        for name, _ in parse_qsl(parts.query, keep_blank_values=True):
            if looks_like_credential(name):
                raise ConfigError(
                    f"{judge}: the base URL's query string carries a credential "
                    f"({clip(name)}=...); credentials in the base URL are not allowed: "
                    f"put the key in {where}"
                )
        return url.rstrip("/")


#: a judge's completion budget and temperature unless its configuration says otherwise
DEFAULT_MAX_TOKENS = 1024
DEFAULT_TEMPERATURE = 0.0


@dataclass(frozen=True)
class GenerateConfig:
    """Sampling and transport settings of one call. ``temperature`` None: the provider's
    default (and the only choice where the SDK takes none)."""

    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float | None = DEFAULT_TEMPERATURE
    timeout: float = 120.0


#: why a provider stopped writing: it finished, hit ``max_tokens``, or refused
FINISHED, CUT_OFF, REFUSAL = "stop", "length", "refusal"


@dataclass(frozen=True)
class JudgeOutput:
    """A billed answer. ``finish`` says whether it is whole (``stop``), was cut off by its
    token limit (``length``: never to be read as final) or is a refusal (``refusal``:
    ``text`` holds the refusal, if the provider gave one)."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish: str = FINISHED


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
        from workers.limiter import endpoint_key

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


def judge_class(provider: str) -> type[Judge]:
    module, _, attr = PROVIDERS[provider].partition(":")
    cls: type[Judge] = getattr(import_module(module), attr)
    return cls


def create_judge(spec: JudgeSpec | str, max_connections: int | None = None) -> Judge:
    """The judge for ``spec``, its HTTP pool sized for ``max_connections`` calls at once."""
    parsed = JudgeSpec.parse(spec) if isinstance(spec, str) else spec
    return judge_class(parsed.provider)(parsed, max_connections)
