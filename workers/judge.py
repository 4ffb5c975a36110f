"""One judge interface (``workers.judge_base``: a single async ``generate`` plus what each
provider knows, re-exported here) and the providers that implement it.

A provider is one file in ``workers/providers/`` (its SDK call, its error mapping, the
environment variable of its key, its base-URL rules, its budget key) plus one line in
:data:`PROVIDERS`; an OpenAI-compatible one (Mistral, Together, vLLM, ...) is one row of
data in ``workers.providers.compatible.COMPATIBLE`` (base URL and key variable). Providers
import their SDK lazily, so a worker that only talks to OpenAI-compatible servers never
imports the Anthropic SDK (and vice versa).
"""

from __future__ import annotations

import logging
from importlib import import_module

from flask_eval.core.errors import ConfigError
from flask_eval.core.models import retirement
from flask_eval.core.text import clip
from flask_eval.core.types import CredentialInUrl, JudgeSpec
from flask_eval.workers.judge_base import (
    CONTEXT_FULL,
    CUT_OFF,
    FINISHED,
    INCOMPLETE,
    NOT_A_COUNT,
    REFUSAL,
    RETRYABLE,
    GenerateConfig,
    Judge,
    JudgeOutput,
    Message,
    RetryDecision,
    finish_of,
    not_read,
    usage_count,
)
from flask_eval.workers.providers.compatible import COMPATIBLE

__all__ = [  # the judge interface (re-exported from workers.judge_base) and the providers
    "CONTEXT_FULL",
    "CUT_OFF",
    "FINISHED",
    "INCOMPLETE",
    "NOT_A_COUNT",
    "PROVIDERS",
    "REFUSAL",
    "RETRYABLE",
    "GenerateConfig",
    "Judge",
    "JudgeOutput",
    "Message",
    "RetryDecision",
    "check_retirement",
    "check_spec",
    "create_judge",
    "finish_of",
    "judge_class",
    "known_providers",
    "not_read",
    "register_provider",
    "spec_of",
    "usage_count",
]

#: provider name -> "module:attribute" of its Judge class (imported on first use)
PROVIDERS: dict[str, str] = {
    "openai": "flask_eval.workers.providers.openai_judge:OpenAIJudge",
    "anthropic": "flask_eval.workers.providers.anthropic_judge:AnthropicJudge",
    "gemini": "flask_eval.workers.providers.gemini_judge:GeminiJudge",
}


def register_provider(name: str, target: str) -> None:
    """Add a provider (``"module:Class"``) at run time: plug-ins, and the tests' in-memory
    judge, which is not offered to users."""
    PROVIDERS[name] = target


def known_providers() -> list[str]:
    """Every provider a spec may name: the code providers and the OpenAI-compatible ones."""
    return sorted({*PROVIDERS, *COMPATIBLE})


def judge_class(provider: str) -> type[Judge]:
    if provider not in PROVIDERS and provider in COMPATIBLE:  # data: the OpenAI judge
        from flask_eval.workers.providers.openai_judge import compatible_judge

        return compatible_judge(provider)
    module, _, attr = PROVIDERS[provider].partition(":")
    cls: type[Judge] = getattr(import_module(module), attr)
    return cls


def spec_of(text: str) -> JudgeSpec:
    """``text`` parsed (``core.types.JudgeSpec.parse``) and checked by its provider: the
    one way user input becomes a judge spec. A credential in the base URL is refused with
    the name of the provider's key variable."""
    try:
        spec = JudgeSpec.parse(text)
    except CredentialInUrl as exc:
        known = exc.provider in known_providers()
        key_env = judge_class(exc.provider).key_env if known else None
        if key_env:
            raise ConfigError(f"{exc} ({key_env})") from None
        raise
    check_spec(spec)
    check_retirement(spec)
    return spec


log = logging.getLogger(__name__)
#: the specs warned of their model's retirement (once per process)
_WARNED: set[str] = set()


def check_retirement(spec: JudgeSpec) -> None:
    """ConfigError for a judge on its provider's own API (no base URL: a server elsewhere
    serves models of its own) whose model has retired, before anything is sent; a warning
    (once) when it retires soon (``core.models.retirement``)."""
    if spec.base_url is not None:
        return
    said = retirement(spec.default_name)
    if said is None:
        return
    retired, line = said
    if retired:
        raise ConfigError(f"judge {spec.name}: {line}")
    if spec.name not in _WARNED:
        _WARNED.add(spec.name)
        log.warning("judge %s: %s", spec.name, line)


def check_spec(spec: JudgeSpec) -> None:
    """ConfigError unless ``spec``'s provider exists and accepts it (its base-URL rules),
    checked before anything is written."""
    known = known_providers()
    if spec.provider not in known:
        raise ConfigError(
            f"unknown judge provider {clip(spec.provider)} in {clip(spec.name)}; "
            f"known providers: {', '.join(known)}"
        )
    judge_class(spec.provider).check_spec(spec)


def create_judge(spec: JudgeSpec | str, max_connections: int | None = None) -> Judge:
    """The judge for ``spec``, its HTTP pool sized for ``max_connections`` calls at once."""
    parsed = JudgeSpec.parse(spec) if isinstance(spec, str) else spec
    check_spec(parsed)
    return judge_class(parsed.provider)(parsed, max_connections)
