"""Benchmark ``cost``: USD per judged skill at list prices, live vs cache-friendly vs batch.

1,000 FLASK instances x 2 models (FLASK's own responses), one call per instance (its 3
skills), judged in-process against the simulator, once per provider with a model of the
price table: the simulator meters cached and cache-written prompt tokens by the provider's
documented rules (minimum cacheable prefix, increments, Anthropic's breakpoints), and the
ledger holds every call's tokens. From the same calls:

- **live, today's layout**: every prompt token at the input price. Before the
  cache-friendly layout a prompt began with the instance, so two prompts shared only the
  system prompt, shorter than every provider's minimum cacheable prefix (checked below);
- **live, cache-friendly layout**: as metered (cached tokens at the cached price, written
  ones at the cache-write price);
- **batch + cache**: the same at the batch price (the providers apply both discounts).

Completions: the simulator's rationales are a sentence per skill, far shorter than a real
judge's, which would flatter every discount on the prompt. The headline therefore prices
completions at the planner's expected length (``rubrics.grading``: 30 + 120 per skill, the
length `--dry-run` assumes); the simulator's own completions are reported beside it.

    python -m bench.cost            # needs ../shared/flask-data
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.harness import REPO, env_for, run_cli, write_result
from flask_eval.core.types import Price
from flask_eval.producer.prices import known_price
from flask_eval.rubrics.grading import COMPLETION_TOKENS_PER_CALL, COMPLETION_TOKENS_PER_SKILL
from flask_eval.rubrics.prompt import SYSTEM_PROMPT
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator

FLASK = Path(os.environ.get("FLASK_EVAL_FLASK_DATA", REPO.parent / "shared" / "flask-data"))
INSTANCES = 1_000
MODELS = ("gpt4", "alpaca_13b")
PROMETHEUS = Path(
    os.environ.get("FLASK_EVAL_PROMETHEUS_DATA", REPO.parent / "shared" / "prometheus-data")
)
#: GPT-4's own feedback on one criterion each (MT-Bench and Vicuna Bench, 3 per record):
#: a real judge's rationale length, the one measurement of it this machine can make
FEEDBACK_SETS = ("mt_bench_eval.json", "vicuna_eval.json")
#: provider -> (model of the price table, base-URL attribute of the simulator handle)
JUDGES = {
    "openai": ("gpt-4.1", "openai_base_url"),
    "anthropic": ("claude-sonnet-4-5", "anthropic_base_url"),
    "gemini": ("gemini-2.5-flash", "gemini_base_url"),
}
#: the issue's goals: batch + cache against today's live calls
GOALS = {"anthropic": 0.35, "openai": 0.45}
#: the smallest prefix any provider caches (OpenAI, Anthropic's Sonnet and Opus, Gemini Flash)
MIN_CACHEABLE = 1024


def price_line(price: Price) -> str:
    fields = {"input": price.input, "output": price.output, "batch": price.batch}
    if price.cached_input is not None:
        fields["cached_input"] = price.cached_input
    if price.cache_write is not None:
        fields["cache_write"] = price.cache_write
    return "{" + ", ".join(f"{k}: {v}" for k, v in fields.items()) + "}"


def real_feedback_tokens() -> float | None:
    """Mean length of GPT-4's feedback per criterion in the Prometheus evaluation sets, in
    the planner's tokens (``rubrics.prompt.estimate_tokens``: 4 characters a token), or
    None without the data."""
    lengths = []
    for name in FEEDBACK_SETS:
        path = PROMETHEUS / "eval" / "benchmark" / "data" / name
        if not path.exists():
            return None
        for record in json.loads(path.read_text()):
            lengths += [(len(text) + 3) // 4 for text in record["gpt4_feedback"]]
    return sum(lengths) / len(lengths)


def ledger_sums(db: Path) -> dict[str, float]:
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT COUNT(*), SUM(prompt_tokens), SUM(cached_tokens), SUM(cache_write_tokens),"
            " SUM(completion_tokens), SUM(cost) FROM call"
        ).fetchone()
        judged = conn.execute("SELECT COUNT(*) FROM judgment WHERE status = 'done'").fetchone()
    keys = ("calls", "prompt", "cached", "written", "completion", "cost")
    return {**{k: float(v or 0) for k, v in zip(keys, row, strict=True)}, "judged": judged[0]}


def measure(provider: str, tmp: Path) -> dict[str, Any]:
    model, base_attr = JUDGES[provider]
    price = known_price(f"{provider}/{model}")
    if price is None:
        raise SystemExit(f"{provider}/{model} is not in the price table")
    db = tmp / f"{provider}.db"
    with running_simulator(SimConfig(seed=7)) as sim:
        judges = tmp / f"{provider}.yaml"
        judges.write_text(
            f"- spec: {provider}/{model}@{getattr(sim, base_attr)}\n  price: {price_line(price)}\n"
        )
        args = [
            "run",
            "--run",
            f"cost-{provider}",
            "--quiet",
            "--judges",
            str(judges),
            "--instances",
            str(FLASK / "evaluation_set" / "flask_evaluation.jsonl"),
            "--limit",
            str(INSTANCES),
            "--in-flight",
            "64",
        ]
        for name in MODELS:
            args += ["--responses", f"{name}={FLASK / 'model_output' / 'outputs' / name}.jsonl"]
        run_cli(args, env_for(f"sqlite:///{db}", broker=False))
    sums = ledger_sums(db)
    skills = sums["judged"]
    expected = sums["calls"] * COMPLETION_TOKENS_PER_CALL + skills * COMPLETION_TOKENS_PER_SKILL

    def usd(completion: float, *, cache: bool, batch: bool) -> float:
        return price.cost(
            int(sums["prompt"]),
            int(completion),
            cached_tokens=int(sums["cached"]) if cache else 0,
            cache_write_tokens=int(sums["written"]) if cache else 0,
            batch=batch,
        )

    out: dict[str, Any] = {"model": model, "price": price.__dict__, **sums}
    goal = GOALS.get(provider)
    if goal is not None:  # the longest rationale per skill at which the goal still holds
        low, high = 0.0, 2_000.0
        for _ in range(50):
            mid = (low + high) / 2
            completion = sums["calls"] * COMPLETION_TOKENS_PER_CALL + skills * mid
            ratio = usd(completion, cache=True, batch=True) / usd(
                completion, cache=False, batch=False
            )
            low, high = (mid, high) if ratio <= goal else (low, mid)
        out["goal_holds_up_to_tokens_per_skill"] = low
    variants = [("expected", expected), ("simulator", sums["completion"])]
    feedback = real_feedback_tokens()
    if feedback is not None:  # rationales as long as GPT-4's on one criterion
        variants.append(
            ("gpt4_length", sums["calls"] * COMPLETION_TOKENS_PER_CALL + skills * feedback)
        )
        out["gpt4_feedback_tokens_per_criterion"] = feedback
    # the floor: every prompt token read from the cache, at the batch price; what is left
    # is the completions' half price
    out["floor_batch_all_cached"] = price.cost(
        int(sums["prompt"]), int(expected), cached_tokens=int(sums["prompt"]), batch=True
    ) / usd(expected, cache=False, batch=False)
    for label, completion in variants:
        today = usd(completion, cache=False, batch=False)
        cached = usd(completion, cache=True, batch=False)
        both = usd(completion, cache=True, batch=True)
        out[label] = {
            "completion_tokens": completion,
            "usd_per_skill": {
                "live_today": today / skills,
                "live_cache_layout": cached / skills,
                "batch_cache": both / skills,
            },
            "ratio_cache": cached / today,
            "ratio_batch_cache": both / today,
        }
    return out


def main() -> None:
    if not (FLASK / "evaluation_set" / "flask_evaluation.jsonl").exists():
        print(f"skipped: FLASK's data is not in {FLASK}", file=sys.stderr)
        return
    system_tokens = (len(SYSTEM_PROMPT) + 3) // 4
    assert system_tokens < MIN_CACHEABLE, "today's shared prefix would be cacheable"
    results: dict[str, Any] = {
        "instances": INSTANCES,
        "models": list(MODELS),
        "todays_shared_prefix_tokens": system_tokens,
    }
    with tempfile.TemporaryDirectory() as tmp:
        for provider in JUDGES:
            results[provider] = measure(provider, Path(tmp))
    lines = []
    for provider in JUDGES:
        r = results[provider]
        e = r["expected"]
        goal = GOALS.get(provider)
        mark = ""
        if goal is not None:
            verdict = "met" if e["ratio_batch_cache"] <= goal else "NOT met"
            mark = f" (goal <= {goal:.2f}: {verdict})"
        lines.append(
            f"{provider}/{r['model']}: cached {r['cached'] / r['prompt']:.0%} of prompt tokens; "
            f"USD/skill live {e['usd_per_skill']['live_today']:.6f}, cache "
            f"{e['usd_per_skill']['live_cache_layout']:.6f} ({e['ratio_cache']:.3f}x), batch+cache "
            f"{e['usd_per_skill']['batch_cache']:.6f} ({e['ratio_batch_cache']:.3f}x){mark}; "
            f"with the simulator's short completions {r['simulator']['ratio_batch_cache']:.3f}x"
            + (
                f"; with GPT-4's feedback length ({r['gpt4_feedback_tokens_per_criterion']:.0f} "
                f"tokens per criterion) {r['gpt4_length']['ratio_batch_cache']:.3f}x"
                if "gpt4_length" in r
                else ""
            )
            + f"; floor (every prompt token cached, batch) {r['floor_batch_all_cached']:.3f}x"
            + (
                f"; the goal holds up to {r['goal_holds_up_to_tokens_per_skill']:.0f} "
                "completion tokens per skill"
                if goal is not None
                else ""
            )
        )
    write_result("cost", results, "\n  " + "\n  ".join(lines))
    print(json.dumps({p: results[p]["expected"]["ratio_batch_cache"] for p in JUDGES}))


if __name__ == "__main__":
    main()
