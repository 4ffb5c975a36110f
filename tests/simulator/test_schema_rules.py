"""The simulator refuses the structured-output schemas the real APIs refuse (OpenAI's
strict mode, Anthropic's output_config.format), and takes every schema flask-eval's own
protocols send: a schema regression fails here as it would fail every real call."""

from __future__ import annotations

from typing import Any

import pytest

from flask_eval.rubrics.grading import MODES, PROTOCOLS, protocol
from flask_eval.rubrics.pairwise import PAIRWISE_PROTOCOLS, pairwise_protocol
from flask_eval.rubrics.skills import load_default
from flask_eval.simulator.wire import BadRequest, parse_request
from flask_eval.workers.judge import GenerateConfig, Message

MESSAGES: list[Message] = [{"role": "user", "content": "Judge this."}]


def _closed(properties: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
        **more,
    }


def _nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer"}
    for level in range(levels):
        schema = _closed({f"level{level}": schema})
    return schema


SCORE = {"type": "integer"}
OK = _closed({"score": SCORE, "why": {"type": "string"}})

#: (a schema, the dialects that refuse it, what the refusal says)
REFUSED: list[tuple[str, dict[str, Any], tuple[str, ...], str]] = [
    (
        "open-object",
        {**OK, "additionalProperties": True},
        ("openai", "anthropic"),
        "additionalProperties",
    ),
    (
        "no-additional-properties",
        {k: v for k, v in OK.items() if k != "additionalProperties"},
        ("openai", "anthropic"),
        "additionalProperties",
    ),
    (
        "open-nested-object",
        _closed({"s": {"type": "object", "properties": {"a": SCORE}, "required": ["a"]}}),
        ("openai", "anthropic"),
        "additionalProperties",
    ),
    ("missing-required", {**OK, "required": ["score"]}, ("openai",), "Missing 'why'"),
    ("no-required", {k: v for k, v in OK.items() if k != "required"}, ("openai",), "required"),
    ("root-not-object", {"type": "array", "items": SCORE}, ("openai",), "object"),
    ("root-any-of", {"anyOf": [OK, OK]}, ("openai",), "object"),
    (
        "string-length",
        _closed({"why": {"type": "string", "maxLength": 80}}),
        ("openai", "anthropic"),
        "maxLength",
    ),
    (
        "number-bounds",
        _closed({"score": {"type": "integer", "minimum": 1, "maximum": 5}}),
        ("anthropic",),
        "maximum",
    ),
    ("all-of", _closed({"score": {"allOf": [SCORE]}}), ("openai",), "allOf"),
    ("default", _closed({"score": {"type": "integer", "default": 3}}), ("openai",), "default"),
    (
        "min-items-2",
        _closed({"s": {"type": "array", "items": SCORE, "minItems": 2}}),
        ("anthropic",),
        "minItems",
    ),
    (
        "recursive",
        {
            **_closed({"node": {"$ref": "#/$defs/node"}}),
            "$defs": {"node": _closed({"next": {"$ref": "#/$defs/node"}})},
        },
        ("anthropic",),
        "recursive",
    ),
    (
        "17-optional",
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {f"p{i}": SCORE for i in range(17)},
        },
        ("openai", "anthropic"),
        "17 optional|Missing 'p0'",
    ),
    ("too-deep", _nested(12), ("openai",), "nesting"),
]


def _asking(dialect: str, schema: dict[str, Any]) -> dict[str, Any]:
    if dialect == "openai":
        form = {
            "type": "json_schema",
            "json_schema": {"name": "j", "schema": schema, "strict": True},
        }
        return {
            "model": "gpt-5.4",
            "max_completion_tokens": 99,
            "messages": MESSAGES,
            "response_format": form,
        }
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 99,
        "messages": MESSAGES,
        "output_config": {"format": {"type": "json_schema", "schema": schema}},
    }


@pytest.mark.parametrize(
    ("case", "schema", "refusing", "says"), REFUSED, ids=[c[0] for c in REFUSED]
)
def test_the_simulator_refuses_what_the_real_api_refuses(
    case: str, schema: dict[str, Any], refusing: tuple[str, ...], says: str
) -> None:
    for dialect in ("openai", "anthropic"):
        body = _asking(dialect, schema)
        if dialect in refusing:
            with pytest.raises(BadRequest, match=says):
                parse_request(dialect, body)
        else:
            parse_request(dialect, body)  # the other API takes it
    # OpenAI without strict: best effort, never refused
    loose = _asking("openai", schema)
    loose["response_format"]["json_schema"]["strict"] = False
    parse_request("openai", loose)


def _schemas() -> list[tuple[str, dict[str, Any]]]:
    """Every structured schema flask-eval's protocols send, in every mode."""
    skills = load_default()
    criteria = [skills.get(n) for n in skills.names]
    out = []
    for make, names in ((protocol, PROTOCOLS), (pairwise_protocol, PAIRWISE_PROTOCOLS)):
        for name in names:
            for mode in MODES:
                schema = make(name, mode).response_schema(criteria)
                if schema is not None:
                    out.append((f"{name}-{mode}", dict(schema)))
    return out


@pytest.mark.parametrize(
    ("name", "schema"), _schemas(), ids=lambda x: x if isinstance(x, str) else ""
)
def test_every_schema_our_judges_send_is_taken(name: str, schema: dict[str, Any]) -> None:
    from flask_eval.core.types import JudgeSpec
    from flask_eval.workers.providers.anthropic_judge import request_of
    from flask_eval.workers.providers.openai_judge import OpenAIJudge

    config = GenerateConfig(max_tokens=99, schema=schema)
    judge = OpenAIJudge(JudgeSpec.parse("openai/gpt-5.4@http://127.0.0.1:9/v1"))
    assert parse_request("openai", judge.request_body(MESSAGES, config)).structured
    body = request_of("claude-sonnet-4-5", MESSAGES, config)
    assert parse_request("anthropic", body).structured
