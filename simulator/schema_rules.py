"""The JSON schemas the real structured-output APIs refuse, refused here too (pure, no
I/O): a schema regression then fails a test against the simulator, as it would fail
every call against the real API.

- OpenAI, ``response_format`` ``json_schema`` with ``strict: true``
  (https://platform.openai.com/docs/guides/structured-outputs, "Supported schemas"): the
  root is an object (not ``anyOf``); every object says ``additionalProperties: false``
  and lists every property in ``required``; no keyword outside the supported subset
  (``minLength``, ``maxLength``, ``patternProperties``, ``allOf``, ``not``, ``if``,
  ``default``, ... are refused); at most 10 levels of nesting, 5,000 properties and
  1,000 enum values. A schema sent with ``strict: false`` is best effort: never refused.
- Anthropic, ``output_config.format``
  (https://docs.anthropic.com/en/docs/build-with-claude/structured-outputs, "JSON Schema
  limitations"): every object says ``additionalProperties: false``; no numerical
  (``minimum``, ``maximum``, ``multipleOf``, ...) or string-length constraints, no
  ``maxItems``/``uniqueItems`` and ``minItems`` only 0 or 1; no recursive ``$ref``; at
  most 16 optional properties in a schema. A forced tool without ``strict`` is not
  checked (its input is best effort).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

#: OpenAI strict mode: keywords outside its subset
OPENAI_UNSUPPORTED = frozenset(
    {
        "minLength",
        "maxLength",
        "patternProperties",
        "unevaluatedProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "unevaluatedItems",
        "contains",
        "minContains",
        "maxContains",
        "uniqueItems",
        "allOf",
        "not",
        "if",
        "then",
        "else",
        "dependentRequired",
        "dependentSchemas",
        "default",
    }
)
OPENAI_MAX_DEPTH, OPENAI_MAX_PROPERTIES, OPENAI_MAX_ENUM = 10, 5000, 1000
#: Anthropic: keywords its grammar compiler refuses
ANTHROPIC_UNSUPPORTED = frozenset(
    {
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
    }
)
ANTHROPIC_MAX_OPTIONAL = 16

#: the keywords that hold one subschema / a list of them / a mapping of them
_ONE = ("items", "additionalItems", "not", "if", "then", "else", "contains")
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
_NAMED = ("properties", "$defs", "definitions", "patternProperties")


def _walk(
    schema: Any, path: tuple[str, ...] = (), depth: int = 0
) -> Iterator[tuple[Mapping[str, Any], tuple[str, ...], int]]:
    """Every subschema of ``schema`` with its path and its object-nesting depth."""
    if not isinstance(schema, Mapping):
        return
    yield schema, path, depth
    inner = depth + 1 if _is_object(schema) else depth
    for key in _ONE:
        yield from _walk(schema.get(key), (*path, key), inner)
    for key in _MANY:
        subs = schema.get(key)
        for i, sub in enumerate(subs if isinstance(subs, list) else []):
            yield from _walk(sub, (*path, key, str(i)), inner)
    for key in _NAMED:
        named = schema.get(key)
        for name, sub in named.items() if isinstance(named, Mapping) else ():
            yield from _walk(sub, (*path, key, str(name)), inner)


def _is_object(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    return "object" in kinds or isinstance(schema.get("properties"), Mapping)


def _where(path: tuple[str, ...]) -> str:
    return "(root)" if not path else "/".join(path)


def _closed(node: Mapping[str, Any], path: tuple[str, ...], what: str) -> None:
    if _is_object(node) and node.get("additionalProperties") is not False:
        raise ValueError(
            f"{what}: In context={_where(path)}, 'additionalProperties' is "
            "required to be supplied and to be false"
        )


def check_openai_strict(schema: Mapping[str, Any], name: str = "judgment") -> None:
    """ValueError where OpenAI refuses ``schema`` as a strict ``json_schema``."""
    what = f"Invalid schema for response_format '{name}'"
    if not _is_object(schema) or "anyOf" in schema:
        raise ValueError(
            f"{what}: schema must be a JSON Schema of 'type: \"object\"', "
            "got a root that is not an object"
        )
    properties = 0
    for node, path, depth in _walk(schema):
        if depth > OPENAI_MAX_DEPTH:
            raise ValueError(f"{what}: more than {OPENAI_MAX_DEPTH} levels of nesting")
        bad = sorted(OPENAI_UNSUPPORTED & set(node))
        if bad:
            raise ValueError(f"{what}: In context={_where(path)}, '{bad[0]}' is not permitted")
        enum = node.get("enum")
        if isinstance(enum, list) and len(enum) > OPENAI_MAX_ENUM:
            raise ValueError(f"{what}: an enum of more than {OPENAI_MAX_ENUM} values")
        _closed(node, path, what)
        fields = node.get("properties")
        if _is_object(node) and isinstance(fields, Mapping):
            properties += len(fields)
            required = node.get("required")
            missing = [k for k in fields if not isinstance(required, list) or k not in required]
            if missing:
                raise ValueError(
                    f"{what}: In context={_where(path)}, 'required' is required to be "
                    "supplied and to be an array including every key in properties. "
                    f"Missing '{missing[0]}'"
                )
    if properties > OPENAI_MAX_PROPERTIES:
        raise ValueError(f"{what}: more than {OPENAI_MAX_PROPERTIES} object properties")


def check_anthropic(schema: Mapping[str, Any]) -> None:
    """ValueError where Anthropic refuses ``schema`` in ``output_config.format``."""
    what = "output_config.format.schema"
    optional = 0
    for node, path, _ in _walk(schema):
        bad = sorted(ANTHROPIC_UNSUPPORTED & set(node))
        if bad:
            kind = node.get("type", "schema")
            raise ValueError(
                f"{what}: For '{kind}' type, property '{bad[0]}' is not supported ({_where(path)})"
            )
        low = node.get("minItems")
        if low is not None and low not in (0, 1):
            raise ValueError(
                f"{what}: minItems values other than 0 or 1 are not supported ({_where(path)})"
            )
        ref = node.get("$ref")
        if isinstance(ref, str) and (ref == "#" or _in_own_definition(ref, path)):
            raise ValueError(f"{what}: recursive schemas are not supported ({_where(path)})")
        _closed(node, path, what)
        fields = node.get("properties")
        if isinstance(fields, Mapping):
            required = node.get("required")
            listed = set(required) if isinstance(required, list) else set()
            optional += sum(1 for k in fields if k not in listed)
    if optional > ANTHROPIC_MAX_OPTIONAL:
        raise ValueError(
            f"{what}: {optional} optional properties; a schema may have at most "
            f"{ANTHROPIC_MAX_OPTIONAL}"
        )


def _in_own_definition(ref: str, path: tuple[str, ...]) -> bool:
    """Whether ``ref`` (``#/$defs/X``) points at a definition that holds it."""
    parts = tuple(ref.removeprefix("#/").split("/"))
    return ref.startswith("#/") and path[: len(parts)] == parts
