"""What each simulated model takes and how it spends its budget, from the model table
(``core/models.toml``): the simulator refuses what the real API refuses for that model,
in the API's own error shape, so a request a real model would refuse fails a test here
too (pure, no I/O).

- OpenAI's reasoning models (o-series, gpt-5 and later: the table's ``reasoning`` models
  that take only their default temperature) refuse ``max_tokens`` (400
  ``unsupported_parameter``, param ``max_tokens``: "Use 'max_completion_tokens'
  instead") and any ``temperature`` but their default, 1 (400 ``unsupported_value``,
  param ``temperature``), as the real API answers them.
- A temperature outside what a model takes (OpenAI 0-2, Anthropic 0-1) is refused.
- An Anthropic model without structured outputs refuses ``output_config.format``.
- A reasoning model thinks before it answers: its thinking tokens
  (:func:`thinking_tokens`) come out of the completion budget first and are billed as
  completion tokens (OpenAI's ``completion_tokens_details.reasoning_tokens``); a budget
  they use up leaves an empty answer cut off by its limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask_eval.core.models import ModelInfo, model_info

#: the table's provider of each wire dialect
PROVIDER = {"openai": "openai", "anthropic": "anthropic", "gemini": "gemini"}
#: a reasoning model's thinking, as a multiple of its answer's tokens (deterministic)
THINKING_PER_ANSWER_TOKEN = 2
#: the thinking of the shortest answer
MIN_THINKING = 64


class Unsupported(ValueError):
    """A request the real API refuses for this model: 400 with ``code`` and ``param``."""

    def __init__(self, message: str, param: str, code: str) -> None:
        super().__init__(message)
        self.param = param
        self.code = code


def info(dialect: str, model: str) -> ModelInfo:
    """The table's word on ``model`` served in ``dialect``."""
    return model_info(f"{PROVIDER.get(dialect, dialect)}/{model.removeprefix('models/')}")


def check(dialect: str, body: Mapping[str, Any], model: str) -> None:
    """Unsupported where the real API refuses ``body`` for ``model``."""
    if dialect == "gemini":
        return
    known = info(dialect, model)
    temperature = body.get("temperature")
    if dialect == "openai":
        if known.reasoning and known.temperature is None and body.get("max_tokens") is not None:
            raise Unsupported(
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.",
                "max_tokens",
                "unsupported_parameter",
            )
        if known.temperature is None and temperature is not None and temperature != 1:
            raise Unsupported(
                f"Unsupported value: 'temperature' does not support {temperature} with this "
                "model. Only the default (1) value is supported.",
                "temperature",
                "unsupported_value",
            )
    if known.temperature is not None and isinstance(temperature, int | float):
        low, high = known.temperature
        if not low <= temperature <= high:
            raise Unsupported(
                f"temperature: must be between {low:g} and {high:g}, got {temperature}",
                "temperature",
                "invalid_value" if dialect == "openai" else "invalid_request_error",
            )
    config = body.get("output_config")
    asks = dialect == "anthropic" and isinstance(config, Mapping) and "format" in config
    if asks and not known.structured:
        raise Unsupported(
            f"output_config.format: structured outputs are not supported by {model}",
            "output_config.format",
            "invalid_request_error",
        )


def thinking_tokens(dialect: str, model: str, answer_tokens: int) -> int:
    """The tokens ``model`` thinks before an answer of ``answer_tokens`` (0: it does not
    think, or the simulator does not meter its thinking in this dialect)."""
    if dialect != "openai" or not info(dialect, model).reasoning:
        return 0
    return max(MIN_THINKING, THINKING_PER_ANSWER_TOKEN * answer_tokens)
