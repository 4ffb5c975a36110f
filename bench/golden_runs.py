"""The fixed runs of a bench.golden capture: their inputs, judges (each on its own
simulator) and the outputs written for each (bench/golden.py's docstring)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path


def tree() -> Path:
    """The source tree whose ``flask_eval`` this process imports ($TREE)."""
    return Path(import_module("flask_eval").__path__[0]).resolve().parent


SIM_PORT = int(os.environ.get("GOLDEN_SIM_PORT", "18765"))
#: one simulator per judge, so that no judge's calls ever meet another's in a simulated
#: prompt cache (its scope is model and key already: this holds whatever it becomes)
SIM_URLS = [f"http://127.0.0.1:{SIM_PORT + k}" for k in range(4)]
#: no random faults and no latency; N/A answers only from the fourth simulator, whose
#: judge scores FLASK's skills (which allow N/A): where N/A is not allowed the answer is
#: sent back with a format reminder, and the order in which such calls are written
#: (which decides a float sum of their costs) depends on timing
SIM_FLAGS = ("--seed", "7", "--position-bias", "0.2")
NA_FLAGS = ("--na-rate", "0.1")
#: one call at a time: the rows are written in the order they were planned (the pairwise
#: report's LC and style fits read them in the order the store returns them)
RUN_FLAGS = ("--judges", "inputs/judges.yaml", "--in-flight", "1")
#: what each run writes: file name -> the command and its options (the run name between)
OUTPUTS = {
    "report.json": "report --format json --quiet",
    "report.txt": "report --quiet",
    "report-details.txt": "report --details --quiet",
    "report.csv": "report --format csv --quiet",
    "status.json": "status --json",
    "export.jsonl": "export",
    "export.csv": "export --format csv",
}
OURS, PROM, CLAUDE, LENIENT = (
    f"- spec: openai/sim-gpt@{SIM_URLS[0]}/v1\n  name: ours\n  price: {{input: 2.5, output: 10}}\n",
    f"- spec: openai/prometheus-7b@{SIM_URLS[1]}/v1\n  name: prom\n  protocol: prometheus\n"
    "  price: {input: 0.2, output: 0.2}\n",
    f"- spec: anthropic/sim-claude@{SIM_URLS[2]}\n  name: claude\n"
    "  price: {input: 3, output: 15}\n",
    f"- spec: openai/sim-lenient@{SIM_URLS[3]}/v1\n  name: lenient\n"
    "  price: {input: 1, output: 4}\n",
)
FLASK_MODELS = ("gpt4", "alpaca_13b", "vicuna_13b", "llama2_chat_13b")


@dataclass(frozen=True)
class Run:
    """One run: its inputs (name in inputs/ -> source, and lines kept: 0 all), the
    options of `flask-eval run`, its judges and extra outputs (as :data:`OUTPUTS`)."""

    name: str
    inputs: dict[str, tuple[Path, int]]
    args: str
    judges: str
    extra: Mapping[str, str] = field(default_factory=dict)


def runs() -> list[Run]:
    """The runs of a capture; the data of ../shared read where FLASK_EVAL_SHARED says."""
    shared = Path(os.environ.get("FLASK_EVAL_SHARED", tree().parent / "shared"))
    data = shared / "prometheus-data" / "eval" / "benchmark" / "data"
    examples = tree() / "flask_eval" / "examples"
    ex = {f: (examples / f, 0) for f in ("instances.jsonl", "model_a.jsonl", "model_b.jsonl")}
    two = "--instances inputs/instances.jsonl --responses model_a=inputs/model_a.jsonl "
    two += "--responses model_b=inputs/model_b.jsonl"
    flask4 = {
        f"{m}.jsonl": (shared / f"flask-data/model_output/outputs/{m}.jsonl", 30)
        for m in FLASK_MODELS
    }
    flask4["instances.jsonl"] = (shared / "flask-data/evaluation_set/flask_evaluation.jsonl", 30)
    four = " ".join(f"--responses {m}=inputs/{m}.jsonl" for m in FLASK_MODELS)
    agreement = {"agreement.json": "agreement --format json"}
    biggen = shared / "prometheus-data/BiGGen-Bench/sample_responses.json"

    def eval_set(name: str, file: str, limit: int) -> Run:
        ref = f" --reference gpt4=inputs/{file}"
        return Run(
            name,
            {file: (data / file, 0)},
            f"--prometheus-set inputs/{file} --limit {limit}",
            OURS,
            {
                "report-reference.json": "report --format json --quiet" + ref,
                "agreement.json": "agreement --format json" + ref,
            },
        )

    ensemble = {
        **agreement,
        "report-ensemble.json": "report --format json --quiet --ensemble mean:2",
    }
    return [
        Run("flask", ex, two, OURS + PROM + CLAUDE + LENIENT, ensemble),
        Run(
            "biggen",
            {"biggen.json": (biggen, 0)},
            "--biggen inputs/biggen.json",
            PROM + CLAUDE,
            agreement,
        ),
        Run("pairwise", ex, two + " --pairwise all", OURS + PROM, agreement),
        Run(
            "pairwise-flask",
            flask4,
            f"--instances inputs/instances.jsonl --pairwise all {four}",
            OURS + PROM,
            agreement,
        ),
        Run(
            "autoj",
            {"autoj.json": (data / "autoj_pairwise.json", 0)},
            "--pairwise-set inputs/autoj.json",
            OURS,
        ),
        Run(
            "hhh",
            {"hhh.json": (data / "hhh_alignment_eval.json", 0)},
            "--pairwise-set inputs/hhh.json",
            OURS,
        ),
        eval_set("mt-bench", "mt_bench_eval.json", 60),
        eval_set("vicuna", "vicuna_eval.json", 20),
    ]
