"""What each judge sends for its model, by the model table (core/models.toml): OpenAI's
reasoning models get ``max_completion_tokens`` and no temperature, OpenAI-compatible
servers keep ``max_tokens``, and the defaults a judge without settings is sent are its
model's (room to think, Gemini 3's temperature 1.0)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flask_eval.core.types import JudgeConfig
from flask_eval.simulator.wire_bodies import error_body
from flask_eval.workers.context import generate_config
from tests.workers.test_judges import _capture_openai, _generate

LOCAL = "http://127.0.0.1:9/v1"


@pytest.mark.parametrize(
    ("spec", "limit", "temperature"),
    [
        ("openai/gpt-5.5", "max_completion_tokens", None),  # api.openai.com
        ("openai/gpt-4o", "max_completion_tokens", 0.0),  # every OpenAI model takes it
        (f"openai/gpt-5.4-mini@{LOCAL}", "max_completion_tokens", None),  # wherever served
        (f"openai/o3@{LOCAL}", "max_completion_tokens", None),
        (f"openai/gpt-6-sol@{LOCAL}", "max_completion_tokens", None),  # its family's
        (f"openai/qwen@{LOCAL}", "max_tokens", 0.0),  # a local server's own model
        (f"vllm/gpt-5.4-mini@{LOCAL}", "max_tokens", 0.0),  # OpenAI-compatible: as it was
    ],
)
def test_openai_sends_the_token_limit_and_temperature_its_model_takes(
    monkeypatch: pytest.MonkeyPatch, spec: str, limit: str, temperature: float | None
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    seen = _capture_openai(monkeypatch, [])
    _generate(spec, max_tokens=300, temperature=0.0)
    (body,) = seen
    assert body[limit] == 300
    assert {"max_tokens", "max_completion_tokens"} & set(body) == {limit}
    assert body.get("temperature") == temperature


def test_a_judge_without_settings_gets_its_models_defaults() -> None:
    mini = generate_config(JudgeConfig("m", "openai/gpt-5.4-mini"), 60)
    gemini3 = generate_config(JudgeConfig("g", "gemini/gemini-3-pro-preview"), 60)
    gpt4o = generate_config(JudgeConfig("o", "openai/gpt-4o@http://x:1/v1"), 60)
    own = generate_config(JudgeConfig("o", "openai/gpt-5.5", max_tokens=77, temperature=1), 60)
    assert mini.temperature is None and mini.max_tokens > 1024  # room to think
    assert gemini3.temperature == 1.0  # Google's guidance for Gemini 3
    assert (gpt4o.temperature, gpt4o.max_tokens) == (0.0, 1024)
    assert (own.temperature, own.max_tokens) == (1, 77)


def test_the_simulator_refuses_a_reasoning_model_what_openai_refuses() -> None:
    from flask_eval.simulator.wire import BadRequest, parse_request

    body: dict[str, Any] = {"model": "gpt-5.5", "messages": [{"role": "user", "content": "Q"}]}
    parse_request("openai", {**body, "max_completion_tokens": 9})  # accepted
    parse_request("openai", {**body, "max_completion_tokens": 9, "temperature": 1})
    with pytest.raises(BadRequest) as limit:
        parse_request("openai", {**body, "max_tokens": 9})
    with pytest.raises(BadRequest) as temperature:
        parse_request("openai", {**body, "max_completion_tokens": 9, "temperature": 0})
    assert (limit.value.param, limit.value.code) == ("max_tokens", "unsupported_parameter")
    assert (temperature.value.param, temperature.value.code) == ("temperature", "unsupported_value")
    error = error_body(
        "openai",
        "invalid_request",
        str(limit.value),
        400,
        param=limit.value.param,
        code=limit.value.code,
    )["error"]
    assert error == {
        "message": str(limit.value),
        "type": "invalid_request_error",
        "param": "max_tokens",
        "code": "unsupported_parameter",
    }
    assert "max_completion_tokens" in error["message"]
    # a chat model takes both fields and any temperature in 0..2, not more
    older = {**body, "model": "gpt-4o", "max_tokens": 9}
    parse_request("openai", {**older, "temperature": 0})
    with pytest.raises(BadRequest, match="temperature"):
        parse_request("openai", {**older, "temperature": 2.5})
    # an Anthropic model without structured outputs refuses them
    claude = {
        "model": "claude-3-5-haiku",
        "max_tokens": 9,
        "messages": body["messages"],
        "output_config": {"format": {"type": "json_schema", "schema": {}}},
    }
    with pytest.raises(BadRequest, match="structured outputs"):
        parse_request("anthropic", claude)
    parse_request("anthropic", {**claude, "model": "claude-sonnet-4-5"})


def test_a_family_is_matched_by_its_pattern_not_by_any_common_prefix() -> None:
    from flask_eval.core.models import model_info

    assert model_info("openai/o4-mini-2099-01-01").reasoning  # an o-series id not listed
    assert model_info("openai/gpt-5.6-sol").reasoning and model_info("openai/gpt-6").reasoning
    for local in ("openai/olmo-2", "openai/opt-125m", "openai/gpt-50", "openai/gpt-4o"):
        assert not model_info(local).reasoning, local
        assert model_info(local).temperature == (0.0, 2.0), local
    assert model_info("gemini/gemini-3.1-pro").default_temperature == 1.0
    assert model_info("gemini/gemini-30").default_temperature is None
    assert not model_info("anthropic/claude-3-7-sonnet").structured
    assert model_info("anthropic/claude-opus-5").structured
    assert model_info("vllm/gpt-5.4").family is None  # a compatible server's own model


def test_a_retry_budget_must_exceed_the_models_own_default(tmp_path: Path) -> None:
    from flask_eval.core.errors import InputError
    from flask_eval.producer.judges_file import load_judges_file

    path = tmp_path / "judges.yaml"
    path.write_text("- spec: openai/gpt-5.4-mini\n  retry_max_tokens: 4096\n")
    with pytest.raises(InputError, match=r"larger than the default max_tokens \(8192\)"):
        load_judges_file(str(path))
    path.write_text("- spec: openai/gpt-4o@http://127.0.0.1:9/v1\n  retry_max_tokens: 4096\n")
    (judge,) = load_judges_file(str(path))
    assert judge.retry_max_tokens == 4096
