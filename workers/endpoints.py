"""A judge as a run configures it: its spec plus budgets, concurrency and price. Pure."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from workers.judge import JudgeSpec


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens."""

    input: float = 0.0
    output: float = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1_000_000


@dataclass(frozen=True)
class JudgeConfig:
    """``name`` identifies the judge in the ledger and reports; ``spec`` says how to call it."""

    name: str
    spec: str
    rpm: float | None = None
    tpm: float | None = None
    max_in_flight: int | None = None
    price: Price = Price()
    #: completion budget per call (None: the default, ``DEFAULT_MAX_TOKENS``)
    max_tokens: int | None = None
    #: sampling temperature (None: ours, 0.0, where the provider's SDK takes one)
    temperature: float | None = None
    #: a larger completion budget for one more try after an answer was cut off by
    #: ``max_tokens`` (None: a cut-off answer fails with reason ``truncated``)
    retry_max_tokens: int | None = None

    @classmethod
    def simple(cls, spec: str) -> JudgeConfig:
        """A judge with no budgets, named ``provider/model`` (reports and file names
        carry the name, so it leaves the base URL out)."""
        parsed = JudgeSpec.parse(spec)
        return cls(name=parsed.default_name, spec=parsed.name)

    def to_data(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> JudgeConfig:
        price = Price(**data.get("price") or {})
        return cls(**{**data, "price": price})
