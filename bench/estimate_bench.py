"""Benchmark ``estimate``: the sampled dry-run estimate (producer/sampling.py) against the
exact one (producer/estimate.py, every prompt rendered) on a 1M-judgment plan.

Synthetic FLASK-format inputs (producer/synthetic.py): ``--instances`` instances x 2
models, 3 skills each, instance mode (a call covers 3 judgments), responses of 3 to
``--max-words`` words (varied prompt lengths), one judge at a list price. The plan is
loaded in memory as ``run --dry-run`` loads it (``app.pipeline.prepare``); every planned
call is fed to a ``CallSampler`` (with the ``Estimator``'s texts), and the sampled summary
is compared with ``Estimator.summarize``: tokens and cost, the relative error against the
stated 95% margin, and the time of each (the sampler's per call). A 10M-judgment dry run's
sampler time is projected from the per-call time and the fixed renders.

    python -m bench.estimate_bench                  # 1M judgments (166,667 instances)
    python -m bench.estimate_bench --instances 20000 --seeds 5
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import write_result
from flask_eval.app import pipeline
from flask_eval.core.spec import run_spec
from flask_eval.producer.estimate import Estimate
from flask_eval.producer.estimate_format import format_estimates
from flask_eval.producer.sampling import CallSampler
from flask_eval.producer.synthetic import write_inputs

JUDGE = "openai/gpt-4.1"


def figures(e: Estimate) -> dict[str, Any]:
    return {
        "calls": e.calls,
        "jobs": e.jobs,
        "prompt_tokens": e.prompt_tokens,
        "completion_tokens": e.completion_tokens,
        "cost": round(e.cost, 6),
        "batch_cost": round(e.batch_cost, 6),
        "cache_cost": round(e.cache_cost, 6),
        "cache_read_tokens": e.cache_read_tokens,
        "rendered": e.rendered,
        "prompt_margin": e.prompt_margin,
        "cost_margin": e.cost_margin,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--instances", type=int, default=166_667)  # x 2 models x 3 skills
    parser.add_argument("--max-words", type=int, default=300)
    parser.add_argument("--seeds", type=int, default=3, help="sampler seeds to compare")
    parser.add_argument("--size", type=int, default=None)
    parser.add_argument("--budget", type=int, default=None)
    parser.add_argument("--no-exact", action="store_true")
    args = parser.parse_args()
    options = {k: v for k, v in (("size", args.size), ("budget", args.budget)) if v}
    with tempfile.TemporaryDirectory() as tmp:
        instances, responses = write_inputs(Path(tmp), args.instances, words=(3, args.max_words))
        t0 = time.perf_counter()
        plan = pipeline.prepare(
            run_spec(instances=str(instances), responses=responses, judges=[JUDGE])
        )
        t1 = time.perf_counter()
        calls = plan.planned_calls()
        t2 = time.perf_counter()
        estimator = plan.estimator()  # reads the responses: before their folder goes
    gc.freeze()  # the plan is long-lived: no collection walks it again
    judgments = sum(len(c.criteria) for c in calls)
    print(
        f"{judgments:,} judgments, {len(calls):,} calls; prepare {t1 - t0:.1f} s, "
        f"planned_calls {t2 - t1:.1f} s",
        flush=True,
    )
    runs: list[dict[str, Any]] = []
    for seed in range(args.seeds):
        t3 = time.perf_counter()
        texts = [estimator.texts(c) for c in calls]
        t4 = time.perf_counter()
        sampler = CallSampler(estimator.context, seed=seed, **options)
        for call, text in zip(calls, texts, strict=True):
            sampler.add(call, text)
        t5 = time.perf_counter()
        (sampled,) = sampler.summarize()
        t6 = time.perf_counter()
        del texts
        runs.append(
            {
                "seed": seed,
                "texts_us_per_call": (t4 - t3) / len(calls) * 1e6,
                "add_us_per_call": (t5 - t4) / len(calls) * 1e6,
                "summarize_s": t6 - t5,
                "sampled": figures(sampled),
            }
        )
        print(
            f"seed {seed}: texts {runs[-1]['texts_us_per_call']:.2f} us/call, add "
            f"{runs[-1]['add_us_per_call']:.2f} us/call, summarize {t6 - t5:.1f} s "
            f"({sampled.rendered:,} renders)",
            flush=True,
        )
    print(format_estimates([sampled]))
    exact: dict[str, Any] | None = None
    if not args.no_exact:
        t7 = time.perf_counter()
        (whole,) = estimator.summarize(calls)
        exact = {**figures(whole), "seconds": time.perf_counter() - t7}
        print(f"exact: {exact['seconds']:.1f} s", flush=True)
        print(format_estimates([whole]))
        for run in runs:
            s = run["sampled"]
            for what, margin in (("prompt_tokens", "prompt_margin"), ("cost", "cost_margin")):
                error = s[what] - exact[what]
                run[f"{what}_error"] = error / exact[what]
                run[f"{what}_error_over_margin"] = abs(error) / s[margin] if s[margin] else None
            run["cache_cost_error"] = s["cache_cost"] / exact["cache_cost"] - 1
    per_call = min(r["texts_us_per_call"] + r["add_us_per_call"] for r in runs)
    fixed = min(r["summarize_s"] for r in runs)
    ten_m = 10_000_000 / (judgments / len(calls))
    result = {
        "judgments": judgments,
        "calls": len(calls),
        "prepare_s": t1 - t0,
        "planned_calls_s": t2 - t1,
        "exact": exact,
        "runs": runs,
        "projected_10m_sampler_s": ten_m * per_call / 1e6 + fixed,
    }
    worst = max((r.get("prompt_tokens_error_over_margin") or 0 for r in runs), default=0)
    summary = (
        f"{judgments:,} judgments: sampler {per_call:.2f} us/call + {fixed:.1f} s of renders"
        + (f" vs exact {exact['seconds']:.1f} s; |error| <= {worst:.2f} x margin" if exact else "")
        + f"; 10M projected {result['projected_10m_sampler_s']:.1f} s"
    )
    write_result("estimate", result, summary)


if __name__ == "__main__":
    main()
