"""Coverage of the People section's bootstrap intervals: simulated data sets of a judge's
and two raters' 1-5 scores with a known population correlation between the judge's score
and the people's mean; the share of data sets whose 95% interval (instances resampled,
:func:`report.people.people_report`) contains it, for Pearson's r, Spearman's rho and
Kendall's tau-b::

    PYTHONPATH=$PWD .venv/bin/python bench/people_coverage.py [--datasets 300]
        [--replicates 1000] [--instances 40] [--seed 0]

Model: instance effect u ~ N(0, 1), two criteria per instance, an item's quality
z = 0.7 u + 0.71 v (v ~ N(0, 1)); the judge scores round(3 + 1.3 (0.8 z + 0.6 e)), each
rater round(3 + 1.3 (0.85 z + 0.53 e)) (e ~ N(0, 1) fresh each time), clipped to 1..5;
rater b leaves 30% of items unrated. The population values are those of one sample of
400,000 items of the same model (Monte Carlo error about 0.002).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

from flask_eval.report.people import PeopleSettings, people_report
from flask_eval.report.people_data import ScoreRow

CRITERIA = ("correctness", "helpfulness")
NAMES = ("pearson", "spearman", "kendall_tau_b")


def _scores(rng: np.random.Generator, z: np.ndarray, weight: float) -> np.ndarray:
    noise = rng.standard_normal(len(z))
    latent = weight * z + np.sqrt(1 - weight**2) * noise
    scores: np.ndarray = np.clip(np.round(3 + 1.3 * latent), 1, 5)
    return scores


def _draw(rng: np.random.Generator, instances: int) -> tuple[np.ndarray, ...]:
    """(instance of each item, judge scores, rater a, rater b with NaN for unrated)."""
    u = np.repeat(rng.standard_normal(instances), len(CRITERIA))
    z = 0.7 * u + np.sqrt(1 - 0.49) * rng.standard_normal(len(u))
    judge, a, b = _scores(rng, z, 0.8), _scores(rng, z, 0.85), _scores(rng, z, 0.85)
    b[rng.random(len(b)) < 0.3] = np.nan
    return np.repeat(np.arange(instances), len(CRITERIA)), judge, a, b


def population(seed: int = 12345, items: int = 400_000) -> dict[str, float]:
    """The population correlations of the judge's score and the people's mean."""
    rng = np.random.default_rng(seed)
    _, judge, a, b = _draw(rng, items // len(CRITERIA))
    people = np.nanmean(np.stack([a, b]), axis=0)
    return {
        "pearson": float(stats.pearsonr(judge, people).statistic),
        "spearman": float(stats.spearmanr(judge, people).statistic),
        "kendall_tau_b": float(stats.kendalltau(judge, people).statistic),
    }


def correlated_rows(rng: np.random.Generator, instances: int) -> list[ScoreRow]:
    """One simulated data set as the section's rows."""
    instance, judge, a, b = _draw(rng, instances)
    rows = []
    for n, iid in enumerate(instance.tolist()):
        item = ("model", "", f"{iid:04d}", CRITERIA[n % len(CRITERIA)])
        rows.append(ScoreRow("judge", *item, float(judge[n])))
        rows.append(ScoreRow("human/a", *item, float(a[n])))
        if not np.isnan(b[n]):
            rows.append(ScoreRow("human/b", *item, float(b[n])))
    return rows


def coverage(
    datasets: int = 300, replicates: int = 1000, instances: int = 40, seed: int = 0
) -> tuple[float, dict[str, float]]:
    """(Pearson's coverage, every statistic's coverage) over ``datasets`` data sets."""
    truth = population()
    rng = np.random.default_rng(seed)
    hits = dict.fromkeys(NAMES, 0)
    for k in range(datasets):
        rows = correlated_rows(rng, instances)
        report = people_report(rows, PeopleSettings(replicates=replicates, seed=seed + k))
        assert report is not None
        (row,) = [v for v in report.versus if v.dimension == "overall"]
        for name, ci in zip(NAMES, (row.pearson_ci, row.spearman_ci, row.kendall_ci), strict=True):
            if ci is not None and ci[0] <= truth[name] <= ci[1]:
                hits[name] += 1
    shares = {name: hits[name] / datasets for name in NAMES}
    return shares["pearson"], shares


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=int, default=300)
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--instances", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    truth = population()
    _, shares = coverage(args.datasets, args.replicates, args.instances, args.seed)
    seconds = time.perf_counter() - started
    print(
        f"people bootstrap coverage (95% percentile, instances resampled): {args.datasets} "
        f"data sets x {args.instances} instances x {len(CRITERIA)} criteria, "
        f"{args.replicates} replicates; {seconds:.1f} s"
    )
    for name in NAMES:
        print(f"  {name:<14} population {truth[name]:.4f}  coverage {shares[name]:.3f}")


if __name__ == "__main__":
    main()
