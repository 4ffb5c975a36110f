"""The regression gate of `flask-eval compare` on simulated pairs of runs: how often an
A/A pair (the same model judged twice) fails it, and how often a true drop does::

    PYTHONPATH=$PWD .venv/bin/python bench/compare_gate.py [--reps 300] [--seed 0]

Model: instance quality q ~ N(3.2, 0.8); each instance has two of four criteria (two
abilities), a difficulty level 1-5 and one of four domains; each of two judges scores a
criterion round(q - drop + e), e ~ N(0, 0.8) fresh on each side, clipped to 1..5. BASE
and NEW share the instances and their quality; NEW's judges draw new noise (and NEW's
scores are lowered by ``drop``). Each comparison tests every key of the report (overall,
skills, abilities, domains, difficulty, skill x difficulty) with Holm's correction, as
`report.compare.compare` does for the command.
"""

from __future__ import annotations

import argparse

import numpy as np

from flask_eval.report.compare import CompareSettings, Pair, compare
from flask_eval.report.dimensions import report_breakdown
from flask_eval.report.scores import InstanceGroups, ScoreTable, build

SKILLS = ("Factuality", "Readability", "Comprehension", "Completeness")
BREAKDOWN = report_breakdown({s: "A" if k < 2 else "B" for k, s in enumerate(SKILLS)})
JUDGES = ("j1", "j2")
#: (instances, drop) of each line of the table
CASES = ((60, 0.0), (200, 0.0), (60, 0.3), (200, 0.15), (200, 0.3))


def pair_of_tables(rng: np.random.Generator, n: int, drop: float) -> tuple[ScoreTable, ScoreTable]:
    quality = rng.normal(3.2, 0.8, n)
    names = [f"i{i}" for i in range(n)]
    cells = [("m", names[i], s) for i in range(n) for s in rng.choice(SKILLS, 2, replace=False)]
    which = np.repeat(np.arange(n), 2)
    groups = InstanceGroups(
        {x: 1 + i % 5 for i, x in enumerate(names)},
        {x: (f"d{i % 4}",) for i, x in enumerate(names)},
    )
    state = np.ones((len(cells), len(JUDGES)), dtype=np.int8)

    def side(shift: float) -> ScoreTable:
        noise = rng.normal(0, 0.8, state.shape)
        score = np.clip(np.rint(quality[which][:, None] - shift + noise), 1, 5)
        return build(cells, JUDGES, state, score, groups)

    return side(0.0), side(drop)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=300, help="comparisons per line")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print("| instances | true drop | min-effect | gate failed | tests | overall MDE |")
    print("|---|---|---|---|---|---|")
    for min_effect in (0.0, 0.1):
        settings = CompareSettings(min_effect=min_effect)
        for n, drop in CASES:
            failed, tests, mde = 0, 0, []
            for _ in range(args.reps):
                base, new = pair_of_tables(rng, n, drop)
                result = compare(base, new, [Pair("m", "m")], BREAKDOWN, settings)
                failed += result.gate_failed
                tests = result.tests
                mde.append(result.rows[0].mde)
            print(
                f"| {n} | {drop:g} | {min_effect:g} | {failed}/{args.reps} "
                f"({failed / args.reps:.1%}) | {tests} | {np.nanmedian(mde):.3f} |"
            )


if __name__ == "__main__":
    main()
