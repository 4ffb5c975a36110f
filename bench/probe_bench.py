"""Judge probes against known truth: the judge simulator's judges are given a position
bias, a length preference, an injection susceptibility and a self-preference, and real
probe runs (``flask-eval probe`` through the Python API: the planner, the in-process
executor, the simulator over HTTP, the ledger, the card) must find them::

    PYTHONPATH=$PWD .venv/bin/python -m bench.probe_bench recover [--sample 1000]
    PYTHONPATH=$PWD .venv/bin/python -m bench.probe_bench null [--seeds 100] [--sample 100]
        [--keep DIR]

Data: FLASK's 1,740 instances (``../shared/flask-data``, or FLASK_EVAL_FLASK_DATA); two
simulated models under test (level 3, families ``acme`` and ``zeta``) answer them through
``generate`` once, and each probe run samples ``--sample`` instances of them.

- ``recover``: judge ``biased`` (length preference 0.4 points per doubling, injection
  susceptibility 0.3, position bias 0.2, self-preference 0.3, family ``acme``) beside
  ``plain`` (no trait, family ``zeta``) and ``ref`` (no trait, family ``omega``, of no
  model: the reference of self-preference), in an absolute probe run (every probe) and
  a pairwise one (the swap); every answer judged at level 3 (its signature's), so no
  effect is cut off by the scale's ends; the card's estimates, their intervals'
  half-widths and whether each interval covers the configured value.
- ``null``: two judges without any bias but with per-request jitter (sampling noise,
  0.6 points: a twin draws it anew, so every probe shows chance effects) on ``--seeds``
  seeds (the simulator's and the sample's); how many cards (absolute and pairwise runs)
  show at least one significant effect after the card's Holm correction, for each judge
  and for the card as a whole.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.sim_cells import EVALUATION_SET, FLASK
from flask_eval import api
from flask_eval.app.probe_card import load_card
from flask_eval.report.probe_types import Card, Effect
from flask_eval.simulator.config import JudgeTraits, SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage.store import Store

MODELS = {"m-acme": 3.0, "m-zeta": 3.0}
FAMILIES = {"m-acme": "acme", "m-zeta": "zeta"}
BIASED = JudgeTraits(
    length_preference=0.4, injection=0.3, position_bias=0.2, self_preference=0.3, family="acme"
)
PLAIN = JudgeTraits(family="zeta")
#: a judge of a family no model here belongs to: the reference self-preference is
#: measured against
REF = JudgeTraits(family="omega")
#: what each configured trait is on the card: (probe, the value the card should find)
TRUTH = {
    "length per doubling": BIASED.length_preference,
    "inject-score obeyed": BIASED.injection,
    "inject-instruction obeyed": BIASED.injection,
    "swap": BIASED.position_bias,
    "self": BIASED.self_preference,
}
JITTER = JudgeTraits(jitter=0.6)


@contextmanager
def _workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="probe-bench-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _responses(work: Path, sim_url: str, db: str, level: int | None = None) -> dict[str, str]:
    """The simulated models' answers to every FLASK instance, one file per model (their
    signed level set to ``level`` when given: every answer then judged at that level, far
    enough from the scale's ends that no trait's effect is cut off by them)."""
    _point_at(sim_url)
    rows = api.generate(
        str(FLASK / EVALUATION_SET),
        models=[f"{m}=openai/{m}" for m in MODELS],
        database_url=db,
    )
    out = {}
    for model in MODELS:
        path = work / f"{model}.jsonl"
        path.write_text(
            "".join(
                json.dumps({"question_id": r["instance_id"], "text": _level(r["text"], level)})
                + "\n"
                for r in rows
                if r["model"] == model
            )
        )
        out[model] = str(path)
    return out


def _level(text: str, level: int | None) -> str:
    """``text`` with the level its signature gives set to ``level`` (None: as it is)."""
    return (
        text if level is None else re.sub(r"level [1-5] of 5", f"level {level} of 5", text, count=1)
    )


def _point_at(sim_url: str) -> None:
    """The judges' and models' provider: the simulator at ``sim_url``."""
    os.environ["OPENAI_BASE_URL"] = sim_url
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench")


def _families(judges: dict[str, JudgeTraits]) -> tuple[str, ...]:
    named = {**FAMILIES, **{j: t.family for j, t in judges.items() if t.family}}
    return tuple(f"{name}={family}" for name, family in named.items())


def _probe(
    db: str, responses: dict[str, str], judges: dict[str, JudgeTraits], **options: Any
) -> Card:
    name = options.pop("run_name")
    api.judge(
        str(FLASK / EVALUATION_SET),
        responses,
        judges=[f"{j}=openai/{j}" for j in judges],
        run_name=name,
        database_url=db,
        **options,
    )
    store = Store(db)
    try:
        return load_card(store, name)
    finally:
        store.close()


def _effects(card: Card) -> dict[tuple[str, str], Effect]:
    return {(e.judge, e.probe): e for c in card.cards for e in c.effects}


def recover(sample: int) -> list[dict[str, Any]]:
    judges = {"biased": BIASED, "plain": PLAIN, "ref": REF}
    config = SimConfig(generators=MODELS, model_families=FAMILIES, judges=judges)
    rows = []
    with _workdir() as work, running_simulator(config) as sim:
        db = f"sqlite:///{work / 'bench.db'}"
        responses = _responses(work, sim.openai_base_url, db, level=3)
        started = time.perf_counter()
        absolute = _probe(
            db, responses, judges, run_name="abs", probes=("all",), sample=sample,
            families=_families(judges),
        )  # fmt: skip
        pairwise = _probe(
            db, responses, {"biased": BIASED}, run_name="pw", probes=("swap",),
            pairwise="all", sample=sample,
        )  # fmt: skip
        seconds = time.perf_counter() - started
    found = {**_effects(absolute), **_effects(pairwise)}
    for (judge, probe), effect in sorted(found.items()):
        truth = TRUTH.get(probe, 0.0) if judge == "biased" else 0.0
        changed = probe.startswith(("length+", "inject-score", "inject-instr"))
        if judge == "biased" and changed and probe not in TRUTH:
            truth = float("nan")  # a score change: its size depends on the levels
        rows.append(
            {
                "judge": judge,
                "probe": probe,
                "truth": truth,
                "estimate": round(effect.estimate, 4),
                "low": round(effect.low, 4),
                "high": round(effect.high, 4),
                "half_width": round((effect.high - effect.low) / 2, 4),
                "covers": effect.low <= truth <= effect.high if truth == truth else None,
                "significant": effect.significant,
                "items": effect.items,
                "instances": effect.clusters,
            }
        )
    print(f"# {sample} instances sampled; both probe runs in {seconds:.0f} s")
    return rows


def _judged(db: str) -> bool:
    """Whether ``db`` holds both probe runs of a seed, every judgment done."""
    if not Path(db.removeprefix("sqlite:///")).is_file():
        return False
    store = Store(db)
    try:
        runs = [store.find_run(name) for name in ("abs", "pw")]
        return all(r is not None and not store.open_rows(r.id, limit=1) for r in runs)
    finally:
        store.close()


def _seed_cards(db: str) -> list[Card]:
    store = Store(db)
    try:
        return [load_card(store, name) for name in ("abs", "pw")]
    finally:
        store.close()


def null(seeds: int, sample: int, keep: Path | None) -> dict[str, Any]:
    """``seeds`` seeds of two unbiased judges with jitter; each seed's ledger kept in
    ``keep`` when given (a seed judged there before is read again, not judged again)."""
    judges = {"j-acme": JudgeTraits(jitter=0.6, family="acme")}
    judges["j-zeta"] = JudgeTraits(jitter=0.6, family="zeta")
    alarms = {kind: {j: 0 for j in (*judges, "card")} for kind in ("absolute", "pairwise")}
    tests = {"absolute": 0, "pairwise": 0}
    started = time.perf_counter()
    with _workdir() as scratch:
        work = keep or scratch
        work.mkdir(parents=True, exist_ok=True)
        responses: dict[str, str] | None = None
        for seed in range(seeds):
            db = f"sqlite:///{work / f'null-{seed}.db'}"
            if not _judged(db):
                if responses is None:  # the answers judged on every seed, made once
                    config = SimConfig(generators=MODELS, model_families=FAMILIES)
                    with running_simulator(config) as sim:
                        gen = f"sqlite:///{scratch / 'gen.db'}"
                        responses = _responses(scratch, sim.openai_base_url, gen)
                with running_simulator(SimConfig(judges=judges, seed=seed)) as sim:
                    _point_at(sim.openai_base_url)
                    _probe(
                        db, responses, judges, run_name="abs", probes=("all",), sample=sample,
                        seed=seed, families=_families(judges),
                    )  # fmt: skip
                    _probe(
                        db, responses, judges, run_name="pw", pairwise="all", sample=sample,
                        seed=seed, probes=("swap", "style", "inject", "length"),
                    )  # fmt: skip
            for kind, card in zip(("absolute", "pairwise"), _seed_cards(db), strict=True):
                tests[kind] = max(tests[kind], sum(len(c.effects) for c in card.cards))
                for c in card.cards:
                    alarms[kind][c.judge] += any(e.significant for e in c.effects)
                alarms[kind]["card"] += any(e.significant for c in card.cards for e in c.effects)
            print(f"seed {seed}: {alarms}", flush=True)
    return {
        "seeds": seeds,
        "sample": sample,
        "effects_per_card": tests,
        "cards_with_an_alarm": alarms,
        "seconds": round(time.perf_counter() - started),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("recover", "null"))
    parser.add_argument("--sample", type=int, default=None)
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument(
        "--keep", type=Path, default=None, help="null: keep each seed's ledger in this folder"
    )
    args = parser.parse_args()
    if not (FLASK / EVALUATION_SET).is_file():
        raise SystemExit(f"FLASK's instances are not at {FLASK / EVALUATION_SET}")
    if args.what == "recover":
        rows = recover(args.sample or 1000)
        print("| judge | probe | truth | estimate [95% CI] | half-width | covers | instances |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            truth = "-" if r["truth"] != r["truth"] else f"{r['truth']:g}"
            print(
                f"| {r['judge']} | {r['probe']} | {truth} | {r['estimate']:+.3f} "
                f"[{r['low']:+.3f}, {r['high']:+.3f}] | {r['half_width']:.3f} | "
                f"{'-' if r['covers'] is None else ('yes' if r['covers'] else 'NO')} | "
                f"{r['instances']} |"
            )
    else:
        print(json.dumps(null(args.seeds, args.sample or 100, args.keep), indent=2))


if __name__ == "__main__":
    main()
