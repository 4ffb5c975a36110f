"""`--judges FILE`: a YAML list of judges with budgets and prices; errors name file:line."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from flask_eval.exceptions import ConfigError, InputError
from workers.endpoints import JudgeConfig, Price
from workers.judge import JudgeSpec

KEYS = {"spec", "name", "rpm", "tpm", "max_in_flight", "price"}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$")


def load_judges_file(path: str) -> list[JudgeConfig]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("judges file not found", path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read judges file: {exc}", path) from None
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise InputError(
            f"invalid YAML: {getattr(exc, 'problem', exc)}",
            path,
            None if line is None else line + 1,
        ) from None
    if not isinstance(root, yaml.SequenceNode) or not root.value:
        raise InputError(
            "expected a non-empty YAML list of judges (- spec: provider/model ...)", path, 1
        )
    judges = [_entry(node, path) for node in root.value]
    seen: dict[str, int] = {}
    for node, judge in zip(root.value, judges, strict=True):
        line = node.start_mark.line + 1
        if judge.name in seen:
            raise InputError(
                f"judge name {judge.name!r} is used twice (first on line {seen[judge.name]})",
                path,
                line,
            )
        seen[judge.name] = line
    return judges


def _entry(node: yaml.Node, path: str) -> JudgeConfig:
    line = node.start_mark.line + 1
    data: Any = yaml.safe_load(yaml.serialize(node))
    if not isinstance(data, dict):
        raise InputError("each judge must be a mapping with at least `spec`", path, line)
    unknown = sorted(set(map(str, data)) - KEYS)
    if unknown:
        raise InputError(
            f"unknown key {unknown[0]!r}; allowed: {', '.join(sorted(KEYS))}", path, line
        )
    if not isinstance(data.get("spec"), str):
        raise InputError("missing `spec` (provider/model[@BASE_URL])", path, line)
    try:
        spec = JudgeSpec.parse(data["spec"]).name
    except ConfigError as exc:
        raise InputError(str(exc), path, line) from None
    name = data.get("name", spec)
    if not isinstance(name, str) or not _NAME.match(name):
        raise InputError(f"invalid judge name {name!r}", path, line)
    return JudgeConfig(
        name=name,
        spec=spec,
        rpm=_positive(data, "rpm", path, line),
        tpm=_positive(data, "tpm", path, line),
        max_in_flight=_int(data, "max_in_flight", path, line),
        price=_price(data.get("price"), path, line),
    )


def _positive(data: dict[str, Any], key: str, path: str, line: int) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise InputError(f"`{key}` must be a positive number, got {value!r}", path, line)
    return float(value)


def _int(data: dict[str, Any], key: str, path: str, line: int) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"`{key}` must be a whole number >= 1, got {value!r}", path, line)
    return value


def _price(value: Any, path: str, line: int) -> Price:
    if value is None:
        return Price()
    if not isinstance(value, dict) or set(value) - {"input", "output"}:
        raise InputError(
            "`price` must be {input: USD per 1M tokens, output: USD per 1M tokens}", path, line
        )
    for k in ("input", "output"):
        v = value.get(k, 0)
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 0 or not math.isfinite(v):
            raise InputError(f"`price.{k}` must be a number >= 0, got {v!r}", path, line)
    return Price(float(value.get("input", 0)), float(value.get("output", 0)))


def combine(specs: Sequence[str], files: Sequence[str]) -> list[JudgeConfig]:
    """Judges from `--judge SPEC` flags and `--judges FILE` files, names unique."""
    judges = [JudgeConfig.simple(s) for s in specs]
    for f in files:
        judges += load_judges_file(f)
    names = [j.name for j in judges]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError(f"judge given twice: {', '.join(dupes)}")
    return judges
