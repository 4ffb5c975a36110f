"""Calibration against real people's labels: does the PPI++ interval of
:func:`report.ppi.ppi_mean` cover what every label says, when only 5% are labelled?

    PYTHONPATH=$PWD .venv/bin/python bench/calibration_real.py [--samples 500]
        [--share 0.05] [--seed 0] [--lam L] [--out results.json]

Data (Prometheus's evaluation files, ``../shared/prometheus-data``, or where
FLASK_EVAL_PROMETHEUS_DATA says; a set whose files are missing is skipped and named):

- Auto-J's pairwise test set (1,392 pairs): the people are its human labels (response 1
  better, response 2 better, tie), the judge Auto-J's predictions shipped with its
  evaluation code (``autoj_utils/pairwise_example_output.jsonl``, same order). Estimands:
  the people's share of each verdict, and response 1's win rate (a tie counting half).
- MT-Bench and Vicuna Bench (320 graded responses each): the people are GPT-4's first
  1-5 score of each record; the judges are the judge simulator (its 1-5 score of the
  record's Prometheus prompt, computed in-process) and, as a strong judge, the mean of
  GPT-4's other two scores. Estimand: the people's mean score.

For each estimand, ``--samples`` random draws (without replacement) of ``--share`` of the
items get their label; the rest keep only the judge's score. Reported: the share of draws
whose 95% PPI++ interval covers the value over all labels (and the same with the normal
quantile, as ppi_py's interval); the people-only interval's coverage on the same labels;
whether the judge's own t interval (over every item, the judge alone) covers it (one
figure, it does not depend on the draw); the mean widths; the mean effective number of
labels and weight of the judge; the judge's Pearson correlation with the people.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from flask_eval.producer.judge_eval_sets import prometheus_data_dir
from flask_eval.report.ppi import CROSS_FIT, IN_SAMPLE, Tuning, ppi_mean
from flask_eval.rubrics.protocol import PROMETHEUS_SYSTEM
from flask_eval.simulator import formats
from flask_eval.simulator.answer import judge_scores
from flask_eval.simulator.config import SimConfig

REPO = Path(__file__).resolve().parent.parent
CONFIDENCE = 0.95
SIM_JUDGE = "simulated-judge"
AUTOJ = "eval/benchmark/data/autoj_pairwise.json"
AUTOJ_OUT = "eval/benchmark/autoj_utils/pairwise_example_output.jsonl"
GRADED = {"MT-Bench": "eval/benchmark/data/mt_bench_eval.json"}
GRADED["Vicuna Bench"] = "eval/benchmark/data/vicuna_eval.json"


def data_dir() -> Path:
    """Prometheus's data (``producer.judge_eval_sets.prometheus_data_dir``)."""
    return prometheus_data_dir()


@dataclass(frozen=True)
class Estimand:
    """One estimand of one set: the people's value of every item and the judge's."""

    set: str
    estimand: str
    judge: str
    people: np.ndarray
    scores: np.ndarray


@dataclass(frozen=True)
class Row:
    set: str
    estimand: str
    judge: str
    items: int
    labels: int
    samples: int
    truth: float  # the people's value over every item
    judge_mean: float  # the judge's own value over every item
    pearson: float  # the judge's correlation with the people, over every item
    coverage: float  # PPI++ (t quantile)
    coverage_z: float  # PPI++ with the normal quantile (ppi_py's interval)
    coverage_people: float  # the people-only t interval on the same labels
    judge_covers: bool  # the judge's own t interval over every item
    width: float  # mean width of the PPI++ interval
    width_people: float  # mean width of the people-only interval
    width_judge: float
    ess: float  # mean effective number of labels
    lam: float  # mean weight of the judge
    degenerate: int  # draws whose labels all agree (no variance: a zero-width interval)


def _jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def autoj(root: Path) -> list[Estimand]:
    """Auto-J's pairwise set: human labels against Auto-J's predictions (0 = response 1
    better, 1 = response 2 better, 2 = tie)."""
    rows, outputs = _jsonl(root / AUTOJ), _jsonl(root / AUTOJ_OUT)
    if len(rows) != len(outputs):
        raise SystemExit(f"{root / AUTOJ_OUT}: {len(outputs)} predictions for {len(rows)} rows")
    labels = np.array([int(str(r["label"])) for r in rows])
    judged = np.array([int(str(o["output"])) for o in outputs])
    out = []
    for verdict, name in ((0, "share: response 1 better"), (1, "share: response 2 better")):
        out.append(Estimand("Auto-J", name, "Auto-J", labels == verdict, judged == verdict))
    out.append(Estimand("Auto-J", "share: tie", "Auto-J", labels == 2, judged == 2))
    win = np.array([1.0, 0.0, 0.5])
    out.append(Estimand("Auto-J", "win rate of response 1", "Auto-J", win[labels], win[judged]))
    return [
        Estimand(e.set, e.estimand, e.judge, e.people.astype(float), e.scores.astype(float))
        for e in out
    ]


def simulator_score(instruction: str, config: SimConfig) -> int:
    """The judge simulator's 1-5 score of a Prometheus prompt: the score of its rubric's
    criterion (the prompt as a dialect sends it: the system prompt, then the user's)."""
    prompt = f"{PROMETHEUS_SYSTEM}\n{instruction}"
    parts = formats.parts(prompt)
    if parts is None or not parts.criteria:
        raise SystemExit("a record's instruction is not a Prometheus prompt with a rubric")
    criterion = parts.criteria[0]
    score = judge_scores(prompt, SIM_JUDGE, [criterion], config)[criterion]
    if score is None:
        raise SystemExit("the simulator scored a Prometheus criterion N/A")
    return score


def graded(name: str, path: Path) -> list[Estimand]:
    """MT-Bench or Vicuna Bench: GPT-4's first score against the simulator and against
    the mean of GPT-4's other two."""
    records = json.loads(path.read_text())
    config = SimConfig()
    people = np.array([float(r["gpt4_score"][0]) for r in records])
    sim = np.array([float(simulator_score(r["instruction"], config)) for r in records])
    strong = np.array([float(np.mean(r["gpt4_score"][1:])) for r in records])
    estimand = "mean score (GPT-4's first)"
    return [
        Estimand(name, estimand, "judge simulator", people, sim),
        Estimand(name, estimand, "GPT-4's other two (mean)", people, strong),
    ]


def _t_half(values: np.ndarray) -> float:
    n = len(values)
    q = float(stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1))
    return q * float(values.std(ddof=1)) / float(np.sqrt(n))


def evaluate(
    e: Estimand,
    share: float,
    samples: int,
    rng: np.random.Generator,
    lam: float | Tuning | None = None,
) -> Row:
    """Coverage of ``samples`` random draws of ``share`` of the items labelled (``lam``:
    the judge's weight, as :func:`report.ppi.ppi_mean` takes it; None: its default)."""
    n_items = len(e.people)
    labels = max(2, round(share * n_items))
    truth = float(e.people.mean())
    z = float(stats.norm.ppf(0.5 + CONFIDENCE / 2))
    covered = covered_z = covered_people = degenerate = 0
    widths, widths_people, ess, lams = [], [], [], []
    for _ in range(samples):
        mask = np.zeros(n_items, dtype=bool)
        mask[rng.choice(n_items, labels, replace=False)] = True
        got = ppi_mean(
            e.people[mask], e.scores[mask], e.scores[~mask], confidence=CONFIDENCE, lam=lam
        )
        covered += got.low <= truth <= got.high
        covered_z += abs(got.estimate - truth) <= z * got.se
        covered_people += got.classical_low <= truth <= got.classical_high
        degenerate += bool(np.all(e.people[mask] == e.people[mask][0]))
        widths.append(got.high - got.low)
        widths_people.append(got.classical_high - got.classical_low)
        ess.append(got.ess)
        lams.append(got.lam)
    judge_mean = float(e.scores.mean())
    judge_half = _t_half(e.scores)
    return Row(
        set=e.set,
        estimand=e.estimand,
        judge=e.judge,
        items=n_items,
        labels=labels,
        samples=samples,
        truth=truth,
        judge_mean=judge_mean,
        pearson=float(stats.pearsonr(e.people, e.scores).statistic),
        coverage=covered / samples,
        coverage_z=covered_z / samples,
        coverage_people=covered_people / samples,
        judge_covers=bool(abs(judge_mean - truth) <= judge_half),
        width=float(np.mean(widths)),
        width_people=float(np.mean(widths_people)),
        width_judge=2 * judge_half,
        ess=float(np.nanmean(ess)),
        lam=float(np.mean(lams)),
        degenerate=degenerate,
    )


def table(rows: Sequence[Row]) -> str:
    """The rows as a Markdown table."""
    head = (
        "| set | estimand | judge | N | labels | truth | judge's mean | r | PPI++ coverage "
        "| (z) | people-only coverage | judge's interval covers | PPI++ width "
        "| people-only width | ESS | lambda |"
    )
    lines = [head, "|" + "---|" * 16]
    for r in rows:
        lines.append(
            f"| {r.set} | {r.estimand} | {r.judge} | {r.items} | {r.labels} | {r.truth:.3f} "
            f"| {r.judge_mean:.3f} | {r.pearson:.2f} | **{r.coverage:.1%}** "
            f"| {r.coverage_z:.1%} | {r.coverage_people:.1%} "
            f"| {'yes' if r.judge_covers else 'no'} | {r.width:.3f} | {r.width_people:.3f} "
            f"| {r.ess:.1f} | {r.lam:.2f} |"
        )
    return "\n".join(lines)


def estimands(root: Path) -> tuple[list[Estimand], list[str]]:
    """Every estimand whose files are present, and the sets skipped."""
    found: list[Estimand] = []
    skipped: list[str] = []
    if (root / AUTOJ).is_file() and (root / AUTOJ_OUT).is_file():
        found += autoj(root)
    else:
        skipped.append(f"Auto-J: missing {root / AUTOJ} or {root / AUTOJ_OUT}")
    for name, rel in GRADED.items():
        if (root / rel).is_file():
            found += graded(name, root / rel)
        else:
            skipped.append(f"{name}: missing {root / rel}")
    return found, skipped


def _lam(text: str) -> float | Tuning:
    if text in (CROSS_FIT, IN_SAMPLE):
        return CROSS_FIT if text == CROSS_FIT else IN_SAMPLE
    return float(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=500, help="label draws per estimand")
    parser.add_argument("--share", type=float, default=0.05, help="share of items labelled")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--lam",
        type=_lam,
        default=None,
        help="the judge's weight: a number, cross-fit (the default) or in-sample",
    )
    parser.add_argument("--data", type=Path, default=None, help="Prometheus's data folder")
    parser.add_argument("--out", type=Path, default=None, help="write the rows as JSON")
    args = parser.parse_args(argv)
    root = args.data or data_dir()
    started = time.perf_counter()
    found, skipped = estimands(root)
    for reason in skipped:
        print(f"skip {reason}")
    if not found:
        print("no data: nothing measured")
        return 0
    rng = np.random.default_rng(args.seed)
    rows = [evaluate(e, args.share, args.samples, rng, args.lam) for e in found]
    print(table(rows))
    seconds = time.perf_counter() - started
    print(f"{args.samples} draws per estimand, seed {args.seed}, {seconds:.1f} s")
    if args.out is not None:
        result = {
            "samples": args.samples,
            "share": args.share,
            "seed": args.seed,
            "lam": CROSS_FIT if args.lam is None else args.lam,
            "confidence": CONFIDENCE,
            "skipped": skipped,
            "rows": [asdict(r) for r in rows],
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
