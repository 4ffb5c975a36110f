"""Simulated score tables for the calibration and regression-gate benchmarks
(``bench/calibration_coverage.py``, ``bench/gate_bench.py``), scored in-process by
:func:`simulator.quality.judged_score`, the function the simulator's server answers with.

The layout is FLASK's evaluation set (``../shared/flask-data``: each instance with its
own skills, difficulty and domains) or, with ``synthetic=True``, 1,740 instances of
three skills drawn from FLASK's twelve. A model under test's level on a cell is what
``simulator.generate`` gives its response to the instance (the instance's level, or its
own level on that skill when ``SimConfig.skill_levels`` plants one); a judge's score of
the cell is ``judged_score`` of that level with the judge's traits, the prompt standing
in for the judge's prompt being the instance's instruction.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from flask_eval.core.types import DIFFICULTY_LABELS, DOMAINS
from flask_eval.report.breakdown import Aggregation, Breakdown, report_breakdown
from flask_eval.report.scores import NONE, SCORED, ScoreTable
from flask_eval.rubrics.skills import load_default
from flask_eval.simulator import generate
from flask_eval.simulator.config import JudgeTraits, SimConfig
from flask_eval.simulator.quality import judged_score

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

REPO = Path(__file__).resolve().parents[1]
FLASK = Path(os.environ.get("FLASK_EVAL_FLASK_DATA", REPO.parent / "shared" / "flask-data"))
EVALUATION_SET = Path("evaluation_set") / "flask_evaluation.jsonl"
SYNTHETIC_INSTANCES = 1740
#: words of every judged response (the benchmarks' judges have no length preference)
WORDS = 100


@dataclass(frozen=True)
class Layout:
    """Instances with their skills, difficulty level (0: unknown) and domains."""

    ids: tuple[str, ...]
    prompts: tuple[str, ...]
    skills: tuple[tuple[str, ...], ...]
    difficulty: tuple[int, ...]
    domains: tuple[tuple[str, ...], ...]
    source: str


def flask_layout(root: Path = FLASK) -> Layout | None:
    """FLASK's 1,740 instances (None: the data is absent)."""
    path = root / EVALUATION_SET
    if not path.is_file():
        return None
    rows = [json.loads(line) for line in path.read_text().splitlines() if line]
    level = {label: i + 1 for i, label in enumerate(DIFFICULTY_LABELS)}
    return Layout(
        ids=tuple(str(r["idx"]) for r in rows),
        prompts=tuple(str(r["instruction"]) for r in rows),
        skills=tuple(tuple(r["skill"]) for r in rows),
        difficulty=tuple(level.get(r["difficulty"], 0) for r in rows),
        domains=tuple(tuple(d for d in r["domain"] if d in DOMAINS) for r in rows),
        source=f"FLASK evaluation set ({len(rows):,} instances)",
    )


def synthetic_layout(seed: int = 0) -> Layout:
    """1,740 instances of three skills each (uniform over FLASK's twelve), a difficulty
    level and a domain each."""
    rng = random.Random(seed)
    names = load_default().names
    n = SYNTHETIC_INSTANCES
    return Layout(
        ids=tuple(str(i + 1) for i in range(n)),
        prompts=tuple(f"Synthetic instruction {i + 1}." for i in range(n)),
        skills=tuple(tuple(rng.sample(names, 3)) for _ in range(n)),
        difficulty=tuple(rng.randint(1, 5) for _ in range(n)),
        domains=tuple((rng.choice(DOMAINS),) for _ in range(n)),
        source=f"synthetic ({n:,} instances x 3 skills)",
    )


def layout(synthetic: bool, root: Path = FLASK) -> Layout | None:
    """The synthetic layout, or FLASK's from ``root`` (None: absent, and said so)."""
    found = synthetic_layout() if synthetic else flask_layout(root)
    if found is None:
        print("FLASK data not available (../shared/flask-data): use --synthetic")
    return found


@dataclass(frozen=True)
class Cells:
    """One row per (model, instance, skill) of ``models`` over ``layout``."""

    layout: Layout
    models: tuple[str, ...]
    skills: tuple[str, ...]
    model: IntArray
    instance: IntArray
    skill: IntArray

    @property
    def n(self) -> int:
        return len(self.model)


def cells(lay: Layout, models: Sequence[str]) -> Cells:
    names = load_default().names
    index = {s: k for k, s in enumerate(names)}
    m, i, s = [], [], []
    for mi in range(len(models)):
        for ii, skills in enumerate(lay.skills):
            for skill in skills:
                m.append(mi)
                i.append(ii)
                s.append(index[skill])
    return Cells(lay, tuple(models), tuple(names), _ints(m), _ints(i), _ints(s))


def _ints(values: Sequence[int]) -> IntArray:
    return np.asarray(values, dtype=np.int64)


def levels(c: Cells, config: SimConfig) -> FloatArray:
    """Each cell's level: the model's response's level on the cell's skill
    (``simulator.generate``; the models must be in ``config.generators``)."""
    out = np.empty(c.n)
    memo: dict[tuple[int, int], tuple[int, dict[str, float]]] = {}
    for k in range(c.n):
        key = (int(c.model[k]), int(c.instance[k]))
        if key not in memo:
            model, prompt = c.models[key[0]], c.layout.prompts[key[1]]
            level = generate.instance_level(prompt, model, config)
            assert level is not None, model
            memo[key] = (level, generate.instance_skill_levels(prompt, model, config))
        level, own = memo[key]
        out[k] = own.get(c.skills[c.skill[k]], level)
    return out


def judge(
    c: Cells,
    level: FloatArray,
    name: str,
    traits: JudgeTraits,
    seed: str,
    subset: IntArray | None = None,
) -> FloatArray:
    """The scores judge ``name`` with ``traits`` gives the cells (``subset``: those only,
    NaN elsewhere), seed ``seed`` ("S" or "S/R", as the server's seeds)."""
    out = np.full(c.n, np.nan)
    todo = range(c.n) if subset is None else subset.tolist()
    prompts, skills = c.layout.prompts, c.skills
    for k in todo:
        parts = (seed, name, prompts[c.instance[k]], skills[c.skill[k]])
        out[k] = judged_score(float(level[k]), traits, WORDS, parts)
    return out


def table(c: Cells, columns: dict[str, FloatArray]) -> ScoreTable:
    """A score table of the cells with one column per judge (NaN: not scored)."""
    lay = c.layout
    names = tuple(columns)
    score = np.stack([columns[n] for n in names], axis=1)
    state = np.where(np.isnan(score), NONE, SCORED).astype(np.int8)
    member = np.zeros((len(lay.ids), len(DOMAINS)), dtype=bool)
    for i, domains in enumerate(lay.domains):
        for d in domains:
            member[i, DOMAINS.index(d)] = True
    return ScoreTable(
        models=c.models,
        instances=lay.ids,
        skills=c.skills,
        judges=names,
        model=c.model,
        instance=c.instance,
        skill=c.skill,
        state=state,
        score=score,
        difficulty=np.asarray(lay.difficulty, dtype=np.int64),
        domains=tuple(DOMAINS),
        domain_member=member,
    )


def breakdown() -> Breakdown:
    """The report's breakdown (overall, skill, ability, domain, difficulty, skill x
    difficulty), as `flask-eval report` and `flask-eval compare` use it."""
    skills = load_default()
    return report_breakdown({s: skills.ability_of(s) for s in skills.names})


def members(
    t: ScoreTable, dimensions: Sequence[str] | None = None
) -> list[tuple[str, str, IntArray]]:
    """The breakdown's (dimension, key, cells) on ``t``, of ``dimensions`` only when given."""
    found = list(Aggregation(t, breakdown()).members())
    return found if dimensions is None else [m for m in found if m[0] in dimensions]


def write_results(out: Path | None, args: object, source: str, **figures: object) -> None:
    """The benchmark's JSON at ``out`` (nothing without one): its arguments, the layout's
    source and ``figures``."""
    if out is None:
        return
    payload = {"args": {k: str(v) for k, v in vars(args).items()}, "layout": source, **figures}
    out.write_text(json.dumps(payload, indent=2) + "\n")
