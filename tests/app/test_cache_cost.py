"""Cached and cache-written prompt tokens, metered at the judge's cache prices, end to
end in-process: the memory judge reports them as a provider's usage would, and `status`,
`runs` and the report show them with the cost."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from flask_eval.cli import main
from flask_eval.core.types import Price
from flask_eval.workers.judge import JudgeOutput, Message
from flask_eval.workers.providers.memory_judge import MemoryJudge, default_answer
from tests.app.test_cost import INPUTS

CALLS = 27 + 25  # instance mode, one judge
PRICE = Price(1000.0, 2000.0, cached_input=100.0, cache_write=1250.0, batch=0.5)


@pytest.fixture
def caching_judge() -> Iterator[None]:
    """The memory judge, answering as a provider whose cache served 600 of each call's
    1,000 prompt tokens and wrote 300 more."""
    script = MemoryJudge.script

    def answer(messages: Sequence[Message]) -> JudgeOutput:
        return JudgeOutput(
            default_answer(messages),
            prompt_tokens=1000,
            completion_tokens=100,
            cached_tokens=600,
            cache_write_tokens=300,
        )

    MemoryJudge.script = staticmethod(answer)  # type: ignore[assignment]
    yield
    MemoryJudge.script = script  # type: ignore[method-assign]


def invoke(args: Sequence[str], db: Path) -> Result:
    env = {"FLASK_EVAL_DATABASE_URL": f"sqlite:///{db}", "FLASK_EVAL_BROKER_URL": ""}
    result = CliRunner().invoke(main, list(args), env=env)
    assert result.exit_code == 0, result.output
    return result


def test_cached_and_cache_written_tokens_are_metered_at_their_prices(
    tmp_path: Path, caching_judge: None
) -> None:
    judges = tmp_path / "judges.yaml"
    judges.write_text(
        "- spec: memory/j\n  price: {input: 1000, output: 2000, cached_input: 100, "
        "cache_write: 1250, batch: 0.5}\n"
    )
    db = tmp_path / "c.db"
    invoke(["run", *INPUTS, "--judges", str(judges), "--run", "cached", "--quiet"], db)
    # each call: 100 plain prompt tokens, 600 read, 300 written, 100 completion tokens
    per_call = (100 * 1000 + 600 * 100 + 300 * 1250 + 100 * 2000) / 1e6
    assert per_call == pytest.approx(
        PRICE.cost(1000, 100, cached_tokens=600, cache_write_tokens=300)
    )
    status = json.loads(invoke(["status", "cached", "--json"], db).stdout)
    assert status["done"] == status["total"] and status["calls"] == CALLS
    assert (status["cached_tokens"], status["cache_write_tokens"]) == (600 * CALLS, 300 * CALLS)
    assert status["cost"] == pytest.approx(per_call * CALLS)
    assert status["cost"] < PRICE.cost(1000, 100) * CALLS  # cheaper than uncached tokens
    text = invoke(["status", "cached"], db).stdout
    assert f"{600 * CALLS} read from the providers' prompt caches and {300 * CALLS} " in text
    assert f"(${per_call * CALLS:.4f})" in text
    listing = invoke(["runs"], db).stdout
    assert f"{600 * CALLS}/{300 * CALLS}" in listing and f"{per_call * CALLS:.4f}" in listing
    report = invoke(["report", "cached"], db).stdout
    assert "Cost (paid calls, USD at each judge's price):" in report
    assert (
        f"memory/j: {CALLS} calls, ${per_call * CALLS:.4f}; {1000 * CALLS:,} prompt tokens "
        f"({600 * CALLS:,} read from the prompt cache, {300 * CALLS:,} written to it), "
        f"{100 * CALLS:,} completion"
    ) in report
    (cost,) = json.loads(invoke(["report", "cached", "--format", "json"], db).stdout)["cost"]
    assert cost == {
        "judge": "memory/j",
        "calls": CALLS,
        "batch_calls": 0,
        "prompt_tokens": 1000 * CALLS,
        "cached_tokens": 600 * CALLS,
        "cache_write_tokens": 300 * CALLS,
        "completion_tokens": 100 * CALLS,
        "cost": pytest.approx(per_call * CALLS),
        "untrusted": 0,
        "unpriced": "",
    }
