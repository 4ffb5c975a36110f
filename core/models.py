"""The judge models flask-eval knows, as data (``core/models.toml``): per model its dated,
sourced price, what its API takes (the completion budget's field, the temperatures,
structured outputs, the prompt cache's minimum prefix, context and output limits, default
sampling) and the day it retires. Pure: the table is read once, from the package.

:func:`model_info` answers for a ``provider/model`` (a dated snapshot id the table names
resolves to its model); an id the table does not name gets its family's capabilities
(the ``[families]`` pattern with the longest match), never a price or a retirement date.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from importlib.resources import files
from typing import Any

from flask_eval.core.types import DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE, Price

__all__ = [
    "MAX_COMPLETION_TOKENS",
    "MAX_OUTPUT_TOKENS",
    "MAX_TOKENS",
    "RETIRING_SOON_DAYS",
    "ModelInfo",
    "Table",
    "model_info",
    "retirement",
    "table",
    "today",
]

#: the request fields of a completion budget (``token_limit``)
MAX_TOKENS, MAX_COMPLETION_TOKENS, MAX_OUTPUT_TOKENS = (
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
)
#: the shortest cached prefix of a model the table does not know (the providers' usual)
CACHE_MIN_TOKENS = 1024
#: a judge whose model retires within this many days is warned before its run
RETIRING_SOON_DAYS = 30


@dataclass(frozen=True)
class ModelInfo:
    """One model (or family) of the table; see ``core/models.toml`` for each field."""

    id: str
    known: bool = False  # a row of its own (False: a family's capabilities only)
    #: the ``[families]`` entry its capabilities come from (None: the table knows nothing
    #: of it, and these are neutral defaults)
    family: str | None = None
    price: Price | None = None
    price_as_of: str | None = None
    token_limit: str = MAX_TOKENS
    reasoning: bool = False
    #: the temperatures the API accepts; None: only the model's own default
    temperature: tuple[float, float] | None = (0.0, 2.0)
    default_temperature: float | None = None
    default_max_tokens: int | None = None
    structured: bool = False
    cache_min_tokens: int = CACHE_MIN_TOKENS
    context: int | None = None
    max_output: int | None = None
    retires: date | None = None
    successor: str | None = None

    @property
    def takes_temperature(self) -> bool:
        return self.temperature is not None

    def sampling_temperature(self, given: float | None) -> float | None:
        """The temperature a call is sent: the judge's own (``given``), else the model's
        default sampling (None: none sent, where the model takes only its own)."""
        if given is not None:
            return given
        if self.temperature is None:
            return None
        return DEFAULT_TEMPERATURE if self.default_temperature is None else self.default_temperature

    def budget(self, given: int | None) -> int:
        """The completion budget of a call: the judge's ``max_tokens``, else the model's
        default (room to think for a reasoning model), else :data:`DEFAULT_MAX_TOKENS`."""
        return given or self.default_max_tokens or DEFAULT_MAX_TOKENS


@dataclass(frozen=True)
class Table:
    """The table: models by ``provider/model``, aliases, families, sources, when checked."""

    models: Mapping[str, ModelInfo]
    aliases: Mapping[str, str]
    families: Mapping[str, ModelInfo]
    sources: Mapping[str, Mapping[str, str]]
    checked: date


def _price(data: Any) -> Price | None:
    if data is None:
        return None
    return Price(
        float(data["input"]),
        float(data["output"]),
        cached_input=float(data["cached_input"]) if "cached_input" in data else None,
        cache_write=float(data["cache_write"]) if "cache_write" in data else None,
        batch=float(data.get("batch", 1.0)),
    )


def _info(key: str, data: Mapping[str, Any], base: Mapping[str, Any], known: bool) -> ModelInfo:
    merged = {**base, **data}
    family = merged.get("family", None if known else key)
    temps = merged.get("temperature", [0.0, 2.0])
    default_t = merged.get("default_temperature")
    return ModelInfo(
        id=key,
        known=known,
        family=family,
        price=_price(merged.get("price")) if known else None,
        price_as_of=merged.get("price_as_of") if known else None,
        token_limit=str(merged.get("token_limit", MAX_TOKENS)),
        reasoning=bool(merged.get("reasoning", False)),
        temperature=None if temps == "default" else (float(temps[0]), float(temps[1])),
        default_temperature=None if default_t is None else float(default_t),
        default_max_tokens=merged.get("default_max_tokens"),
        structured=bool(merged.get("structured", False)),
        cache_min_tokens=int(merged.get("cache_min_tokens", CACHE_MIN_TOKENS)),
        context=merged.get("context"),
        max_output=merged.get("max_output"),
        retires=merged.get("retires") if known else None,
        successor=merged.get("successor") if known else None,
    )


def parse(data: Mapping[str, Any]) -> Table:
    """The table of a parsed ``models.toml``."""
    raw_families: Mapping[str, Any] = data.get("families", {})
    families = {k: _info(k, v, {}, known=False) for k, v in raw_families.items()}
    models: dict[str, ModelInfo] = {}
    aliases: dict[str, str] = {}
    for key, row in data.get("models", {}).items():
        base = raw_families.get(row.get("family", ""), {})
        models[key] = _info(key, row, base, known=True)
        provider = key.partition("/")[0]
        for alias in row.get("aliases", ()):
            aliases[f"{provider}/{alias}"] = key
    return Table(models, aliases, families, data.get("sources", {}), data["checked"])


@functools.cache
def table() -> Table:
    """The package's table (``core/models.toml``), read once."""
    text = files("flask_eval.core").joinpath("models.toml").read_text(encoding="utf-8")
    return parse(tomllib.loads(text))


@functools.lru_cache(maxsize=4096)
def model_info(name: str) -> ModelInfo:
    """What the table says of ``name`` (``provider/model``, no base URL): its row (an
    alias resolved), else its family's capabilities (the ``[families]`` pattern with the
    longest match at its start), else the provider-neutral defaults."""
    t = table()
    row = t.models.get(t.aliases.get(name, name))
    if row is not None:
        return row
    matches = [(m.end(), k) for k in t.families if (m := re.match(k, name)) is not None]
    if not matches:
        return ModelInfo(id=name)
    family = max(matches)[1]
    return ModelInfo(**{**t.families[family].__dict__, "id": name})


def today() -> date:
    """The day retirements are checked against (the local date; tests move it)."""
    return date.today()


def retirement(name: str, on: date | None = None) -> tuple[bool, str] | None:
    """Whether the hosted model ``name`` (``provider/model``, an alias resolved) has
    retired by ``on`` (default :func:`today`), with a line saying so and what replaces
    it: ``(True, line)`` retired (its requests fail), ``(False, line)`` retiring within
    :data:`RETIRING_SOON_DAYS` days, None otherwise (or not a row of the table)."""
    t = table()
    row = t.models.get(t.aliases.get(name, name))
    if row is None or row.retires is None:
        return None
    day = today() if on is None else on
    instead = f"; use a current model instead, e.g. {row.successor}" if row.successor else ""
    when = row.retires.isoformat()
    if row.retires <= day:
        return True, f"the model was retired on {when} (its provider refuses it){instead}"
    left = (row.retires - day).days
    if left <= RETIRING_SOON_DAYS:
        days = "1 day" if left == 1 else f"{left} days"
        return False, f"the model retires on {when} (in {days}){instead}"
    return None
