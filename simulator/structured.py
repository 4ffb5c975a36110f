"""Structured outputs in the simulator: the schema a request asks for, and an answer that
follows it (pure, no I/O).

Each dialect asks in its API's own way, and only that way (a request that puts the
schema anywhere else gets free text, as the real API would give):

- OpenAI: ``response_format`` ``{"type": "json_schema", "json_schema": {"schema": ...}}``,
  or llama.cpp's ``{"type": "json_object", "schema": ...}``;
- Anthropic: ``output_config.format`` ``{"type": "json_schema", "schema": ...}``, or a
  forced tool call (``tool_choice`` ``{"type": "tool", "name": N}`` naming one of
  ``tools``, whose ``input_schema`` is the schema; the answer is then a ``tool_use``);
- Gemini: ``generationConfig.responseJsonSchema`` (JSON Schema) or ``responseSchema``
  (the API's OpenAPI subset, upper-case types), with ``responseMimeType``
  ``application/json`` (the API refuses a schema without it).

A schema the real API refuses is refused (``simulator.schema_rules``).

The answer is an instance of the schema built from the simulator's deterministic scores
(``simulator.answer.judge_scores``): the same request gets the same scores in free text
and in JSON. Inside a property named after a requested skill, an integer (or an enum
holding scores) is that skill's score, "N/A" where its score is N/A and the schema has
it, and a string is a rationale.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flask_eval.rubrics.protocol import NA, requested_skills

from .answer import judge_scores, quality
from .config import SimConfig
from .schema_rules import check_anthropic, check_openai_strict

JSON_MIME = "application/json"
#: how deep the answer builder follows a schema (a recursive ``$ref`` stops there)
MAX_DEPTH = 32

_RATIONALE = {
    None: "This criterion does not apply to the given instruction.",
    1: "The response fails on this criterion: it is largely wrong or unusable.",
    2: "The response only partly meets this criterion, with significant problems.",
    3: "The response is acceptable on this criterion, though several points need work.",
    4: "The response handles this criterion well, with only minor lapses.",
    5: "The response is excellent on this criterion; nothing material is missing.",
}


@dataclass(frozen=True)
class Wanted:
    """What a request asks for: the schema of its answer, and the tool to answer with
    (Anthropic's forced tool call; None: a JSON text)."""

    schema: Mapping[str, Any]
    tool: str | None = None


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{where} must be an object")
    return value


def _openai(body: Mapping[str, Any]) -> Wanted | None:
    form = body.get("response_format")
    if form is None:
        return None
    form = _mapping(form, "response_format")
    kind = form.get("type")
    if kind == "json_schema":
        spec = _mapping(form.get("json_schema"), "response_format.json_schema")
        schema = _mapping(spec.get("schema"), "response_format.json_schema.schema")
        if spec.get("strict") is True:  # best effort otherwise: never refused
            check_openai_strict(schema, str(spec.get("name", "")))
        return Wanted(schema)
    if kind == "json_object" and "schema" in form:
        return Wanted(_mapping(form["schema"], "response_format.schema"))
    if kind in ("text", "json_object"):
        return None
    raise ValueError(f"response_format.type must be text, json_object or json_schema: {kind!r}")


def _anthropic(body: Mapping[str, Any]) -> Wanted | None:
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") == "tool":
        name = choice.get("name")
        tools = body.get("tools")
        for tool in tools if isinstance(tools, list) else []:
            if isinstance(tool, Mapping) and tool.get("name") == name:
                schema = _mapping(tool.get("input_schema"), f"tools[{name}].input_schema")
                if tool.get("strict") is True:
                    check_anthropic(schema)
                return Wanted(schema, str(name))
        raise ValueError(f"tool_choice names a tool not in tools: {str(name)[:40]!r}")
    config = body.get("output_config")
    if config is None:
        return None
    form = _mapping(config, "output_config").get("format")
    if form is None:
        return None
    form = _mapping(form, "output_config.format")
    if form.get("type") != "json_schema":
        raise ValueError("output_config.format.type must be json_schema")
    schema = _mapping(form.get("schema"), "output_config.format.schema")
    check_anthropic(schema)
    return Wanted(schema)


def _gemini(body: Mapping[str, Any]) -> Wanted | None:
    config = body.get("generationConfig") or body.get("generation_config") or {}
    config = _mapping(config, "generationConfig")
    schema = None
    for camel, snake in (
        ("responseJsonSchema", "response_json_schema"),
        ("responseSchema", "response_schema"),
    ):
        value = config.get(camel, config.get(snake))
        if value is not None:
            schema = _mapping(value, f"generationConfig.{camel}")
            break
    if schema is None:
        return None
    mime = config.get("responseMimeType", config.get("response_mime_type"))
    if mime != JSON_MIME:
        raise ValueError(f"a response schema needs responseMimeType {JSON_MIME}")
    return Wanted(schema)


def wanted(dialect: str, body: Mapping[str, Any]) -> Wanted | None:
    """The structured answer ``body`` asks for in ``dialect``'s way, or None (free text).
    ValueError: the request asks for one in a shape the real API refuses."""
    readers = {"openai": _openai, "anthropic": _anthropic, "gemini": _gemini}
    return readers[dialect](body)


# -- the answer -------------------------------------------------------------------------


def _types(schema: Mapping[str, Any]) -> list[str]:
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if isinstance(kind, str) else []
    found = [str(k).lower() for k in kinds]
    if not found and isinstance(schema.get("properties"), Mapping):
        found = ["object"]
    return found


def _fits(schema: Mapping[str, Any], value: object) -> bool:
    """Whether ``value`` (a score, or "N/A") is allowed by ``schema``'s own keywords."""
    if "const" in schema:
        return bool(schema["const"] == value)
    if isinstance(schema.get("enum"), list):
        return value in schema["enum"]
    kinds = _types(schema)
    if isinstance(value, str):
        return "string" in kinds
    return "integer" in kinds or "number" in kinds


class _Builder:
    def __init__(self, root: Mapping[str, Any], scores: Mapping[str, int | None], level: int):
        self.root = root
        self.scores = {k.casefold(): (k, v) for k, v in scores.items()}
        self.level = level

    def resolve(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        ref = schema.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return schema
        node: Any = self.root
        for part in ref[2:].split("/"):
            node = node.get(part) if isinstance(node, Mapping) else None
        return node if isinstance(node, Mapping) else {}

    def build(self, schema: Mapping[str, Any], skill: str | None, depth: int = 0) -> Any:
        schema = self.resolve(schema)
        score = self.scores[skill.casefold()][1] if skill else self.level
        wanted: object = NA if score is None else score
        if depth > MAX_DEPTH:
            return None
        branches = schema.get("anyOf") or schema.get("oneOf")
        if isinstance(branches, list) and branches:
            options = [self.resolve(b) for b in branches if isinstance(b, Mapping)]
            fitting = [b for b in options if _fits(b, wanted)]
            return self.build((fitting or options)[0], skill, depth + 1)
        if "const" in schema:
            return schema["const"]
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            fallback = self.level if self.level in enum else enum[0]
            return wanted if wanted in enum else fallback
        kinds = _types(schema) or ["string"]
        if "object" in kinds:
            return self.members(schema, skill, depth)
        if "array" in kinds:
            items = schema.get("items")
            count = max(1, int(schema.get("minItems") or 0))
            return [
                self.build(items if isinstance(items, Mapping) else {}, skill, depth + 1)
                for _ in range(count)
            ]
        numeric = "integer" in kinds or "number" in kinds
        if numeric and not (wanted == NA and "string" in kinds):
            value = score if score is not None else self.level
            low, high = schema.get("minimum"), schema.get("maximum")
            value = max(value, low) if isinstance(low, int) else value
            return min(value, high) if isinstance(high, int) else value
        if "string" in kinds:
            return _RATIONALE[score] if skill else "The simulated judge's assessment."
        if "boolean" in kinds:
            return False
        return None

    def members(self, schema: Mapping[str, Any], skill: str | None, depth: int) -> Any:
        properties = schema.get("properties")
        out: dict[str, Any] = {}
        for name, sub in (properties if isinstance(properties, Mapping) else {}).items():
            named = self.scores.get(str(name).casefold())
            inner = named[0] if named else skill
            out[name] = self.build(sub if isinstance(sub, Mapping) else {}, inner, depth + 1)
        return out


def structured_answer(prompt: str, model: str, schema: Mapping[str, Any], config: SimConfig) -> str:
    """The JSON text of an answer to ``prompt`` that follows ``schema``: the requested
    skills' scores (``judge_scores``), or the response's level where the prompt names
    no skills."""
    skills: Sequence[str] = requested_skills(prompt) or []
    scores = judge_scores(prompt, model, skills, config) if skills else {}
    level = config.score if config.score is not None else quality(prompt, config)
    answer = _Builder(schema, scores, level).build(schema, None)
    return json.dumps(answer, ensure_ascii=False)
