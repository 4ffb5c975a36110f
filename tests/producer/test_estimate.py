"""Cost estimates: the prompt prefix a provider's cache would serve, and the live, batch
and batch + cache costs `--dry-run` shows."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from flask_eval.cli import main
from flask_eval.core.types import Price
from flask_eval.producer.estimate import (
    CACHE_STEP,
    MIN_CACHED_PREFIX,
    Estimate,
    shared_prefix_tokens,
)
from flask_eval.producer.estimate_format import format_estimates

SYSTEM = {"role": "system", "content": "Be fair."}


def call(user: str) -> list[dict[str, str]]:
    return [SYSTEM, {"role": "user", "content": user}]


def test_a_shared_prefix_counts_only_what_every_call_shares_and_a_provider_caches() -> None:
    shared = "r" * (4 * 2000)  # 2,000 tokens of rubric, then the instance
    calls = [call(shared + "instance one"), call(shared + "instance two")]
    # 8 + 8,000 + "instance " characters in common: 2,004 tokens, cached in 128-token steps
    assert shared_prefix_tokens(calls) == 2004 - 2004 % CACHE_STEP == 1920
    assert shared_prefix_tokens(calls[:1]) == 0  # one call shares with no other
    assert shared_prefix_tokens([]) == 0
    # one call that starts otherwise leaves the group nothing to share
    assert shared_prefix_tokens([*calls, call("another" + shared)]) == 0
    # another system prompt: the first message differs, nothing after it counts
    assert shared_prefix_tokens([calls[0], [{"role": "system", "content": "x"}, calls[0][1]]]) == 0
    # a prefix shorter than the providers' minimum is not cached
    short = "r" * (4 * (MIN_CACHED_PREFIX - 10))
    assert shared_prefix_tokens([call(short + "a"), call(short + "b")]) == 0


def test_the_prefix_of_a_set_is_that_of_its_least_and_greatest_member() -> None:
    """The min/max shortcut (and the streaming groups built on it) agree with comparing
    every pair."""
    rng = random.Random(5)
    base = "".join(rng.choice("ab") for _ in range(6000))
    for _ in range(30):
        calls = [call(base[: rng.randint(4400, 6000)] + rng.choice("xyz")) for _ in range(5)]
        users = [c[1]["content"] for c in calls]
        common = min(
            next(
                (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)),
            )
            for a in users
            for b in users
            if a is not b
        )
        tokens = (len(SYSTEM["content"]) + common) // 4
        assert shared_prefix_tokens(calls) == tokens - tokens % CACHE_STEP


def test_the_table_shows_live_batch_and_cache_costs_per_judge_and_in_total() -> None:
    estimates = [
        Estimate("a", 3, 1, 1000, 10, 1.0, batch_cost=0.5, cache_cost=0.25, cache_read_tokens=600),
        Estimate("b", 3, 1, 1000, 10, 0.0, priced=False),
    ]
    text = format_estimates(estimates)
    rows = {line.split()[0]: line.split() for line in text.splitlines()[2:4]}
    header = text.splitlines()[0]
    assert header.split()[-6:] == ["live", "USD", "batch", "USD", "+cache", "USD"]
    assert rows["a"][5] == "600"  # the prompt tokens the cache would serve
    assert rows["a"][-3:] == ["1.0000", "0.5000", "0.2500"]
    assert rows["b"][-3:] == ["unknown"] * 3
    total = next(line for line in text.splitlines() if line.startswith("total")).split()
    assert total[-3:] == [">=1.0000", ">=0.5000", ">=0.2500"]
    assert "+cache: batched, the prompt prefix the calls of a judge and criteria share" in text


def test_the_table_names_who_does_the_work_in_the_kinds_words() -> None:
    estimates = [Estimate("c", 3, 1, 1000, 10, 0.0, priced=False)]
    judged, critiqued = format_estimates(estimates), format_estimates(estimates, "critic")
    assert judged.split()[0] == "judge" and critiqued.split()[0] == "critic"
    assert "give a judge `price: {input: USD, output: USD}`" in judged and "--judges file" in judged
    assert "give a critic `price: {input: USD, output: USD}`" in critiqued
    assert "--critics file (0 for a free local critic)" in critiqued


def test_dry_run_shows_the_cost_live_batched_and_batched_with_the_shared_prefix_cached(
    tmp_path: Path,
) -> None:
    """Two models answer one instance whose long reference answer both prompts share: the
    cache estimate reads it once, at the judge's cached price."""
    reference = "The reference answer explains it step by step. " * 120  # ~1,400 tokens
    (tmp_path / "i.jsonl").write_text(
        json.dumps(
            {
                "idx": 1,
                "instruction": "Explain it.",
                "answer": reference,
                "skill": ["Logical Correctness"],
                "domain": ["Math"],
                "difficulty": 2,
            }
        )
        + "\n"
    )
    for model in ("a", "b"):
        (tmp_path / f"{model}.jsonl").write_text(
            json.dumps({"question_id": 1, "text": f"model {model}'s answer"}) + "\n"
        )
    price = Price(3000.0, 15000.0, cached_input=300.0, cache_write=3750.0, batch=0.5)
    (tmp_path / "judges.yaml").write_text(
        "- spec: memory/j\n  price: {input: 3000, output: 15000, cached_input: 300, "
        "cache_write: 3750, batch: 0.5}\n"
    )
    db = tmp_path / "d.db"
    result = CliRunner().invoke(
        main,
        [
            "run",
            "--instances",
            str(tmp_path / "i.jsonl"),
            "--responses",
            f"a={tmp_path / 'a.jsonl'}",
            "--responses",
            f"b={tmp_path / 'b.jsonl'}",
            "--judges",
            str(tmp_path / "judges.yaml"),
            "--dry-run",
        ],
        env={"FLASK_EVAL_DATABASE_URL": f"sqlite:///{db}", "FLASK_EVAL_BROKER_URL": ""},
    )
    assert result.exit_code == 0, result.output
    assert not db.exists()
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines() if line.strip()}
    jobs, calls, _, prompt, read, completion = (int(x) for x in rows["memory/j"][1:7])
    live, batch, cached = (float(x) for x in rows["memory/j"][7:10])
    assert (jobs, calls) == (2, 2) and read >= MIN_CACHED_PREFIX and read % CACHE_STEP == 0
    assert live == pytest.approx(price.cost(prompt, completion), abs=1e-4)
    assert batch == pytest.approx(live / 2, abs=1e-4)
    # the prefix is written once (by one call) and read once (by the other)
    expected = price.cost(
        prompt, completion, cached_tokens=read, cache_write_tokens=read, batch=True
    )
    assert cached == pytest.approx(expected, abs=1e-4) and cached < batch
    assert rows["total"][7:10] == rows["memory/j"][7:10]
