"""The judges of a run: `--judge [NAME=]SPEC` flags and `--judges FILE` YAML files.

A judges file is a YAML list of mappings::

    - spec: openai/gpt-5.4             # provider/model[@BASE_URL], required
      name: gpt                        # optional; default provider/model
      rpm: 500                         # optional budgets and concurrency
      tpm: 200000
      max_in_flight: 64
      price: {input: 2.5, output: 10}  # USD per 1M tokens; also cached_input,
                                       # cache_write and batch (a multiplier in (0, 1]);
                                       # a known model's own fill the rest (prices.py)
      max_tokens: 1024                 # optional sampling settings
      temperature: 0
      retry_max_tokens: 4096
      protocol: prometheus             # optional grading protocol: flask-eval (ours, the
                                       # default), prometheus or flask
      structured: true                 # optional: answers follow a JSON schema
      batch: true                      # optional: through the provider's batch API
      batch_max_wait: 300              #   seconds to gather calls before a batch is sent
      batch_max_size: 2000             #   calls per batch at most
      batch_max_tokens: 5000000        #   prompt tokens in open batches at most

Every problem is an InputError naming ``file:line`` (the line of the key at fault). The
file is read by the strict YAML loader (:mod:`core.strict_yaml`: no aliases, tags or
duplicate keys).

A judge is called by its name in the ledger, the reports and the figures' file names, so
names are short, unique and plain (:data:`JUDGE_NAME_PATTERN`); a judge without a name
is called ``provider/model`` (without its base URL), and two judges that end up with the
same name must be named apart.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import yaml

from flask_eval.core import strict_yaml
from flask_eval.core.errors import ConfigError, InputError
from flask_eval.core.files import MIB, read_text
from flask_eval.core.limits import MAX_JUDGE_NAME
from flask_eval.core.models import model_info
from flask_eval.core.people import PREFIX, Panel
from flask_eval.core.text import clip
from flask_eval.core.types import JudgeConfig, JudgeSpec, Price
from flask_eval.producer.people_file import check_raters_once, is_people_spec, panel_entry
from flask_eval.producer.prices import PriceError, price_of
from flask_eval.rubrics.grading import DEFAULT_PROTOCOL, PROTOCOLS

__all__ = [
    "JUDGE_NAME_PATTERN",
    "KEYS",
    "PEOPLE_ELSEWHERE",
    "check_judge_name",
    "load_judges_file",
    "load_workers_file",
]

KEYS = frozenset(
    {
        "spec",
        "name",
        "rpm",
        "tpm",
        "max_in_flight",
        "price",
        "max_tokens",
        "temperature",
        "retry_max_tokens",
        "protocol",
        "structured",
        "batch",
        "batch_max_wait",
        "batch_max_size",
        "batch_max_tokens",
    }
)
BATCH_KEYS = ("batch_max_wait", "batch_max_size", "batch_max_tokens")
#: OpenAI's and Anthropic's limit of requests per batch (the largest of the providers')
MAX_BATCH_SIZE = 100_000
#: A judge name (1..MAX_JUDGE_NAME characters): no '@', '=' or whitespace, so
#: ``--judge NAME=SPEC`` is never ambiguous and a name is one word in file names.
JUDGE_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:/+-]*"
_NAME = re.compile(JUDGE_NAME_PATTERN)
_NAME_RULE = (
    f"use 1-{MAX_JUDGE_NAME} letters, digits or . _ : / + -, starting with a letter or digit"
)
NAME_THEM = "name them apart with --judge NAME=SPEC or `name:` in the judges file"
MAX_FILE_BYTES = MIB
MAX_TOKENS_LIMIT = 1_000_000
MAX_TEMPERATURE = 2.0
PEOPLE_ELSEWHERE = (
    "people (`human/...`) rate the responses of a judgment run (`flask-eval run`), "
    "not this kind of work"
)
_SHAPE = "expected a non-empty YAML list of judges, e.g. `- spec: openai/gpt-5.4`"


def check_judge_name(name: object, path: str | None = None, line: int | None = None) -> str:
    """``name`` if it is a valid judge name; InputError otherwise."""
    if not isinstance(name, str):
        raise InputError(f"`name` must be a string, got {clip(name)}", path, line)
    if len(name) > MAX_JUDGE_NAME or _NAME.fullmatch(name) is None:
        raise InputError(f"invalid judge name {clip(name)}; {_NAME_RULE}", path, line)
    return name


#: turns a spec's text into a JudgeSpec or raises ConfigError: ``JudgeSpec.parse`` checks
#: the syntax; the application passes the workers' ``spec_of``, which also checks that the
#: provider exists and accepts the spec (providers are code the producer does not know)
SpecParser = Callable[[str], JudgeSpec]
#: raises ConfigError if a spec's provider or server has no batch API (``batch: true``);
#: the application passes the workers' ``batching.check_batch_spec``
BatchCheck = Callable[[JudgeSpec], None]


def no_batch_check(spec: JudgeSpec) -> None:
    return None


def load_judges_file(
    path: str, parse: SpecParser = JudgeSpec.parse, check_batch: BatchCheck = no_batch_check
) -> list[JudgeConfig]:
    """The judges of one judges file, in file order; InputError naming file:line (also
    for people's entries: they rate in a judgment run only)."""
    judges, panels = load_workers_file(path, parse, check_batch)
    if panels:
        raise InputError(PEOPLE_ELSEWHERE, path, panels[0][1])
    return judges


def load_workers_file(
    path: str, parse: SpecParser = JudgeSpec.parse, check_batch: BatchCheck = no_batch_check
) -> tuple[list[JudgeConfig], list[tuple[Panel, int]]]:
    """The judges and the people (each panel with its line) of one judges file, in file
    order; InputError naming file:line."""
    text = read_text(path, "a YAML judges file", MAX_FILE_BYTES)
    try:
        data, root = strict_yaml.parse(text)
    except yaml.YAMLError as exc:
        message, line = strict_yaml.describe(exc, text)
        raise InputError(message, path, line) from None
    if not isinstance(root, yaml.SequenceNode) or not isinstance(data, list) or not data:
        got = "an empty file" if root is None else f"{clip(data)}"
        if isinstance(data, dict):
            got += " (list the judges at the top level, each starting with `- spec:`)"
        line = 1 if root is None else root.start_mark.line + 1
        raise InputError(f"{_SHAPE}; got {got}", path, line)
    entries = [
        _entry(item, node, path, parse, check_batch)
        for item, node in zip(data, root.value, strict=True)
    ]
    seen: dict[str, int] = {}
    for node, entry in zip(root.value, entries, strict=True):
        line = node.start_mark.line + 1
        key = entry.name.casefold()
        if key in seen:
            raise InputError(
                f"judge name {clip(entry.name)} is used twice (first on line {seen[key]}); "
                f"{NAME_THEM}",
                path,
                line,
            )
        seen[key] = line
    judges = [e for e in entries if isinstance(e, JudgeConfig)]
    panels = [
        (e, node.start_mark.line + 1)
        for e, node in zip(entries, root.value, strict=True)
        if isinstance(e, Panel)
    ]
    check_raters_once([p for p, _ in panels], path, [line for _, line in panels])
    return judges, panels


def _key_line(node: yaml.Node, key: str) -> int:
    """The line of ``key`` in a mapping node (of the node itself when it has no such key)."""
    if isinstance(node, yaml.MappingNode):
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                return int(key_node.start_mark.line) + 1
    return int(node.start_mark.line) + 1


def _entry(
    data: Any, node: yaml.Node, path: str, parse: SpecParser, check_batch: BatchCheck
) -> JudgeConfig | Panel:
    line = node.start_mark.line + 1
    if not isinstance(data, dict):
        raise InputError(
            f"each judge must be a mapping with at least `spec`, got {clip(data)}", path, line
        )

    def at(key: str) -> int:
        return _key_line(node, key)

    if is_people_spec(data.get("spec")):
        return panel_entry(data, at, path, check_judge_name, _protocol)

    unknown = [k for k in data if k not in KEYS]
    if unknown:
        raise InputError(
            f"unknown key {clip(unknown[0])}; allowed: {', '.join(sorted(KEYS))}",
            path,
            at(unknown[0]) if isinstance(unknown[0], str) else line,
        )

    spec_text = data.get("spec")
    if not isinstance(spec_text, str):
        raise InputError("missing `spec` (provider/model[@BASE_URL])", path, at("spec"))
    try:
        spec = parse(spec_text)
    except ConfigError as exc:
        raise InputError(str(exc), path, at("spec")) from None
    name = check_judge_name(data.get("name", spec.default_name), path, at("name"))
    if name.casefold().startswith(PREFIX):  # names are told apart case-insensitively
        raise InputError(
            f"judge name {clip(name)}: names starting with {PREFIX!r} are people's",
            path,
            at("name"),
        )
    max_tokens = _whole(data, "max_tokens", path, at("max_tokens"), MAX_TOKENS_LIMIT)
    retry = _whole(data, "retry_max_tokens", path, at("retry_max_tokens"), MAX_TOKENS_LIMIT)
    floor = model_info(spec.default_name).budget(max_tokens)  # the model's default budget
    if retry is not None and retry <= floor:
        what = "`max_tokens`" if max_tokens is not None else "the default max_tokens"
        raise InputError(
            f"`retry_max_tokens` must be larger than {what} ({floor}), got {retry}",
            path,
            at("retry_max_tokens"),
        )
    batch = _flag(data, "batch", path, at("batch"))
    for key in BATCH_KEYS:
        if key in data and not batch:
            raise InputError(f"`{key}` goes with `batch: true`", path, at(key))
    batch_wait = _positive(data, "batch_max_wait", path, at("batch_max_wait"))
    batch_size = _whole(data, "batch_max_size", path, at("batch_max_size"), MAX_BATCH_SIZE)
    batch_tokens = _whole(data, "batch_max_tokens", path, at("batch_max_tokens"), None)
    if batch:
        try:
            check_batch(spec)
        except ConfigError as exc:
            raise InputError(str(exc), path, at("batch")) from None
    temperature = _temperature(data, path, at("temperature"))
    _check_model(spec, temperature, max(max_tokens or 0, retry or 0), path, at)
    return JudgeConfig(
        name=name,
        spec=spec.name,
        rpm=_positive(data, "rpm", path, at("rpm")),
        tpm=_positive(data, "tpm", path, at("tpm")),
        max_in_flight=_whole(data, "max_in_flight", path, at("max_in_flight"), None),
        price=_price(data.get("price"), spec.name, node, path),
        max_tokens=max_tokens,
        temperature=temperature,
        retry_max_tokens=retry,
        protocol=_protocol(data, path, at("protocol")),
        structured=_flag(data, "structured", path, at("structured")),
        batch=batch,
        batch_max_wait=batch_wait,
        batch_max_size=batch_size,
        batch_max_tokens=batch_tokens,
    )


def _check_model(
    spec: JudgeSpec, temperature: float | None, budget: int, path: str, at: Callable[[str], int]
) -> None:
    """InputError for a temperature or completion budget the judge's model refuses, by the
    model table (``core.models``; a model it does not describe is not checked)."""
    model = model_info(spec.default_name)
    if model.family is None:
        return
    if temperature is not None and model.temperature is None:
        raise InputError(
            f"model {model.id} takes no temperature (only its own default); remove `temperature`",
            path,
            at("temperature"),
        )
    if temperature is not None and model.temperature is not None:
        low, high = model.temperature
        if not low <= temperature <= high:
            raise InputError(
                f"model {model.id} takes a temperature from {low:g} to "
                f"{high:g}, not {temperature:g}",
                path,
                at("temperature"),
            )
    if model.max_output is not None and budget > model.max_output:
        raise InputError(
            f"a budget of {budget:,} tokens is more than model {model.id} writes "
            f"({model.max_output:,} at most)",
            path,
            at("max_tokens"),
        )


def _protocol(data: dict[str, Any], path: str, line: int) -> str | None:
    value = data.get("protocol")
    if value is None:
        return None
    if not isinstance(value, str) or value not in PROTOCOLS:
        raise InputError(
            f"unknown `protocol` {clip(value)}; choose one of: {', '.join(PROTOCOLS)}", path, line
        )
    return None if value == DEFAULT_PROTOCOL else value


def _flag(data: dict[str, Any], key: str, path: str, line: int) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise InputError(f"`{key}` must be true or false, got {clip(value)}", path, line)
    return value


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _positive(data: dict[str, Any], key: str, path: str, line: int) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if not _number(value) or not math.isfinite(value) or value <= 0:
        raise InputError(f"`{key}` must be a positive number, got {clip(value)}", path, line)
    return float(value)


def _whole(data: dict[str, Any], key: str, path: str, line: int, most: int | None) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InputError(f"`{key}` must be a whole number >= 1, got {clip(value)}", path, line)
    if most is not None and value > most:
        raise InputError(f"`{key}` must be at most {most:_}, got {clip(value)}", path, line)
    return value


def _temperature(data: dict[str, Any], path: str, line: int) -> float | None:
    value = data.get("temperature")
    if value is None:
        return None
    if not _number(value) or not math.isfinite(value) or not 0 <= value <= MAX_TEMPERATURE:
        raise InputError(
            f"`temperature` must be a number from 0 to {MAX_TEMPERATURE:g}, got {clip(value)}",
            path,
            line,
        )
    return float(value)


def _price(value: Any, spec: str, node: yaml.Node, path: str) -> Price | None:
    """The judge's ``price`` (``producer.prices.price_of``); InputError at the line of
    the field at fault."""
    try:
        return price_of(value, spec)
    except PriceError as exc:
        line = _key_line(node, "price")
        if exc.key is not None and isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.value == "price":
                    line = _key_line(value_node, exc.key)
        raise InputError(str(exc), path, line) from None
