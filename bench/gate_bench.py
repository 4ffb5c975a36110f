"""False alarms and power of the regression gate (`flask-eval compare --gate`), measured
with ``report.compare.compare``, the function the command runs, on simulated runs:

    PYTHONPATH=$PWD .venv/bin/python bench/gate_bench.py [--trials 200] [--drop 0.2]
        [--skill "Logical Correctness"] [--level 3.0] [--noise 0.5] [--synthetic]
        [--out FILE]

Cells are FLASK's instances with their own skills (``../shared/flask-data``; without it
the script stops, or use ``--synthetic``: 1,740 instances x 3 skills), answered by one
simulated model under test at ``--level`` (each trial generates its responses with its
own seed: ``simulator.generate``'s per-instance levels). One judge with ``--noise``
scores them (``simulator.quality.judged_score``, what the simulator answers).

- A/A: BASE and NEW are the same responses judged twice, with different simulator
  seeds. A false alarm is a trial whose gate fails: any key of any dimension (overall,
  skill, ability, domain, difficulty, skill x difficulty: one family) significantly
  lower in NEW.
- Power: NEW's responses have ``--drop`` planted on ``--skill`` (``SimConfig.skill_levels``,
  at every instance having that skill), judged with NEW's seed. Detected: that skill's
  row is a significant regression.

Both with Holm (family-wise error) and Benjamini-Hochberg (false discovery rate), alpha
0.05 (``--alpha``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from bench import sim_cells
from flask_eval.report.compare import REGRESSION, CompareSettings, Pair, compare
from flask_eval.report.paired import BH, HOLM
from flask_eval.simulator.config import JudgeTraits, SimConfig

MODEL = "model-under-test"
JUDGE = "judge"


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--drop", type=float, default=0.2)
    p.add_argument("--skill", default="Logical Correctness")
    p.add_argument("--level", type=float, default=3.0)
    p.add_argument("--noise", type=float, default=0.5, help="the judge's noise")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--synthetic", action="store_true", help="the synthetic layout")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = _args(argv)
    started = time.perf_counter()
    lay = sim_cells.layout(a.synthetic)
    if lay is None:
        return 0
    c = sim_cells.cells(lay, (MODEL,))
    planted = np.flatnonzero(np.asarray(c.skills)[c.skill] == a.skill)
    if not len(planted):
        print(f"no instance has the skill {a.skill!r}")
        return 2
    traits = JudgeTraits(noise=a.noise)
    breakdown = sim_cells.breakdown()
    settings = {m: CompareSettings(alpha=a.alpha, correction=m) for m in (HOLM, BH)}
    alarms = {m: 0 for m in settings}
    detected = {m: 0 for m in settings}
    other_alarms = {m: 0 for m in settings}  # power trials: a regression elsewhere
    effects, tests = [], 0
    for t in range(a.trials):
        seed = a.seed * 100_000 + t
        cfg = SimConfig(seed=seed, generators={MODEL: a.level})
        dropped = SimConfig(
            seed=seed,
            generators={MODEL: a.level},
            skill_levels={MODEL: {a.skill: a.level - a.drop}},
        )
        level = sim_cells.levels(c, cfg)
        level_new = level.copy()
        level_new[planted] = sim_cells.levels(c, dropped)[planted]
        base = sim_cells.judge(c, level, JUDGE, traits, f"{seed}/1")
        again = sim_cells.judge(c, level, JUDGE, traits, f"{seed}/2")
        worse = again.copy()
        worse[planted] = sim_cells.judge(c, level_new, JUDGE, traits, f"{seed}/2", planted)[planted]
        base_t = sim_cells.table(c, {JUDGE: base})
        pair = [Pair(MODEL, MODEL)]
        for method, s in settings.items():
            aa = compare(base_t, sim_cells.table(c, {JUDGE: again}), pair, breakdown, s)
            alarms[method] += aa.gate_failed
            tests = aa.tests
            power = compare(base_t, sim_cells.table(c, {JUDGE: worse}), pair, breakdown, s)
            row = next(r for r in power.rows if r.dimension == "skill" and r.key == a.skill)
            detected[method] += row.verdict == REGRESSION
            other_alarms[method] += any(
                r.dimension == "skill" and r.key != a.skill for r in power.regressions
            )
            if method == HOLM:
                effects.append((row.effect, row.se, row.n, row.mde))
    seconds = time.perf_counter() - started
    results = {
        m: {
            "false_alarm_rate": alarms[m] / a.trials,
            "power": detected[m] / a.trials,
            "other_skill_alarm_rate_in_power_trials": other_alarms[m] / a.trials,
        }
        for m in settings
    }
    effect = statistics.mean(e[0] for e in effects)
    se = statistics.mean(e[1] for e in effects)
    n = effects[0][2]
    mde = statistics.mean(e[3] for e in effects)
    print(
        f"{lay.source}; one model at {a.level}; judge noise {a.noise}; {tests} tests per "
        f"comparison; {a.trials} trials; drop {a.drop} on {a.skill} ({n} instances): mean "
        f"measured effect {effect:+.3f} (se {se:.3f}, MDE at Holm's first step "
        f"{mde:.3f}); {seconds:.0f} s\n"
    )
    print(
        "| correction | A/A: any significant regression | power: drop detected on the skill "
        "| power trials: another skill flagged |"
    )
    print("|---|---|---|---|")
    for m, r in results.items():
        print(
            f"| {m} | {r['false_alarm_rate']:.1%} | {r['power']:.1%} | "
            f"{r['other_skill_alarm_rate_in_power_trials']:.1%} |"
        )
    sim_cells.write_results(
        a.out,
        a,
        lay.source,
        tests_per_comparison=tests,
        planted_instances=n,
        mean_effect=effect,
        mean_se=se,
        mean_mde=mde,
        seconds=seconds,
        results=results,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
