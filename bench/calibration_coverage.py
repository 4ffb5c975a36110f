"""Coverage of calibrated judge means (`flask-eval report --calibrate`): do the PPI++
intervals of ``report.calibration.calibrate`` cover what people would say, when people
labelled a 5% random sample of the cells?

    PYTHONPATH=$PWD .venv/bin/python bench/calibration_coverage.py [--samples 500]
        [--share 0.05] [--noises 0,0.5,1] [--spread 0] [--synthetic] [--out FILE]

Cells are FLASK's instances with their own skills (``../shared/flask-data``; without it
the script stops, or use ``--synthetic``: 1,740 instances x 3 skills), answered by two
simulated models under test (``--levels 3.5,3.0``: each cell's level is what
``simulator.generate`` gives, plus ``--spread`` times a per-instance normal effect shared
by the models: harder and easier instances). People are an unbiased simulated rater
(``--people-noise``) scoring every cell: their full-label mean per model and skill is
the truth. Judges have a bias of ``--bias`` and the noise of each ``--noises`` value.
All scores come from ``simulator.quality.judged_score``, what the simulator answers.

Each of ``--samples`` random label samples (uniform over cells) keeps the people's scores
of ``--share`` of the cells; ``calibrate`` then estimates each judge's, model's and
skill's people mean. Reported per judge, over every (model, skill) and sample: coverage
of the truth by the calibrated 95% interval, by the people-only interval (the labels
alone) and by the raw judge interval (the judge's own mean, t interval over its cells);
the width ratio people-only / calibrated; the effective number of labels (ESS / n);
rho, the correlation of the judge's and the people's scores within a model and skill;
and PPI's expected width ratio 1 / sqrt(1 - rho^2).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

from bench import sim_cells
from flask_eval.report.calibration import CalibrationSettings, calibrate
from flask_eval.simulator.config import JudgeTraits, SimConfig
from flask_eval.simulator.quality import gaussian

PEOPLE = "human/people"
MODELS = ("model-a", "model-b")


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--samples", type=int, default=500)
    p.add_argument("--share", type=float, default=0.05, help="labelled share of the cells")
    p.add_argument("--levels", default="3.5,3.0", help="the two models' levels")
    p.add_argument("--bias", type=float, default=0.5, help="the judges' bias")
    p.add_argument("--noises", default="0,0.5,1.0", help="one judge per noise value")
    p.add_argument("--people-noise", type=float, default=0.3)
    p.add_argument("--spread", type=float, default=0.0, help="sd of an instance effect")
    p.add_argument("--synthetic", action="store_true", help="the synthetic layout")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path)
    return p.parse_args(argv)


def _t_interval(x: np.ndarray) -> tuple[float, float]:
    half = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
    return float(x.mean() - half), float(x.mean() + half)


def main(argv: list[str] | None = None) -> int:
    a = _args(argv)
    started = time.perf_counter()
    lay = sim_cells.layout(a.synthetic)
    if lay is None:
        return 0
    levels_of = dict(zip(MODELS, (float(x) for x in a.levels.split(",")), strict=True))
    cfg = SimConfig(seed=a.seed, generators=levels_of)
    c = sim_cells.cells(lay, MODELS)
    level = sim_cells.levels(c, cfg)
    if a.spread:
        effect = np.array([gaussian("instance", str(a.seed), p) for p in lay.prompts])
        level = np.clip(level + a.spread * effect[c.instance], 1, 5)
    seed = str(a.seed)
    people = sim_cells.judge(c, level, PEOPLE, JudgeTraits(noise=a.people_noise), seed)
    noises = [float(x) for x in a.noises.split(",")]
    judges = {f"judge-noise-{n:g}": JudgeTraits(bias=a.bias, noise=n) for n in noises}
    scores = {j: sim_cells.judge(c, level, j, t, seed) for j, t in judges.items()}
    full = sim_cells.table(c, {PEOPLE: people, **scores})
    members = sim_cells.members(full, ("skill",))
    keys = [
        (m, key, cells[c.model[cells] == mi])
        for key_dim, key, cells in members
        for mi, m in enumerate(MODELS)
        if key_dim == "skill"
    ]
    truth = {(m, key): float(people[cells].mean()) for m, key, cells in keys}
    rho = {
        j: float(np.mean([np.corrcoef(people[cl], s[cl])[0, 1] for _, _, cl in keys]))
        for j, s in scores.items()
    }
    raw_cover = {
        j: float(
            np.mean(
                [
                    lo <= truth[(m, key)] <= hi
                    for m, key, cl in keys
                    for lo, hi in [_t_interval(s[cl])]
                ]
            )
        )
        for j, s in scores.items()
    }
    rng = np.random.default_rng(a.seed)
    n_label = round(a.share * c.n)
    tally = {
        j: {"cover": 0, "people_cover": 0, "ratio": 0.0, "ess": 0.0, "n": 0, "sized": 0}
        for j in judges
    }
    settings = CalibrationSettings()
    by_key: dict[tuple[str, str, str], list[int]] = {}
    for _ in range(a.samples):
        chosen = rng.choice(c.n, size=n_label, replace=False)
        labels = np.full(c.n, np.nan)
        labels[chosen] = people[chosen]
        t = sim_cells.table(c, {PEOPLE: labels, **scores})
        result = calibrate(t, [PEOPLE], list(judges), members, settings)
        for row in result.rows:
            k = tally[row.judge]
            true = truth[(row.model, row.key)]
            k["n"] += 1
            k["cover"] += row.low <= true <= row.high
            per_key = by_key.setdefault((row.judge, row.model, row.key), [0, 0, 0])
            per_key[0] += 1
            per_key[1] += row.low <= true <= row.high
            per_key[2] += row.labelled
            k["people_cover"] += row.people_low <= true <= row.people_high
            width, people_width = row.high - row.low, row.people_high - row.people_low
            if width > 0 and people_width > 0:  # a few equal labels: zero width
                k["ratio"] += people_width / width
                k["ess"] += row.ess / row.labelled
                k["sized"] += 1
    results = []
    for j, traits in judges.items():
        k = tally[j]
        keyed = [
            (v[1] / v[0], v[2] / v[0], m, key) for (jj, m, key), v in by_key.items() if jj == j
        ]
        worst = min(keyed)
        results.append(
            {
                "judge": j,
                "bias": traits.bias,
                "noise": traits.noise,
                "rho": rho[j],
                "coverage_calibrated": k["cover"] / k["n"],
                "coverage_people_only": k["people_cover"] / k["n"],
                "coverage_raw_judge": raw_cover[j],
                "width_ratio_people_over_calibrated": k["ratio"] / max(k["sized"], 1),
                "ppi_expected_ratio": 1 / math.sqrt(1 - rho[j] ** 2),
                "ess_over_n": k["ess"] / max(k["sized"], 1),
                "intervals": k["n"],
                "lowest_key_coverage": worst[0],
                "lowest_key": f"{worst[2]} {worst[3]} (mean {worst[1]:.1f} labels)",
                "per_key": [
                    {"model": m, "key": key, "coverage": cov, "mean_labels": lab}
                    for cov, lab, m, key in sorted(keyed, key=lambda x: (x[2], x[3]))
                ],
            }
        )
    seconds = time.perf_counter() - started
    print(
        f"{lay.source}; models {levels_of}; people noise {a.people_noise}; spread "
        f"{a.spread}; {a.samples} samples of {n_label} labels ({a.share:.0%}); "
        f"{len(keys)} model x skill keys; {seconds:.0f} s\n"
    )
    print(
        "| judge | rho | calibrated coverage | lowest key's (key, labels) | people-only "
        "coverage | raw judge coverage | width people/calibrated | PPI 1/sqrt(1-rho^2) | ESS/n |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| bias {r['bias']:+g}, noise {r['noise']:g} | {r['rho']:.2f} | "
            f"{r['coverage_calibrated']:.1%} | {r['lowest_key_coverage']:.1%} "
            f"({r['lowest_key']}) | {r['coverage_people_only']:.1%} | "
            f"{r['coverage_raw_judge']:.1%} | {r['width_ratio_people_over_calibrated']:.2f} | "
            f"{r['ppi_expected_ratio']:.2f} | {r['ess_over_n']:.2f} |"
        )
    sim_cells.write_results(a.out, a, lay.source, seconds=seconds, results=results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
