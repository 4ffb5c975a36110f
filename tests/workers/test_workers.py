"""Real Redis, real Celery worker processes, real SDKs against the simulator."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval, wait_done, workers

DIMENSIONS = ("overall", "skill", "ability", "domain", "difficulty", "skill_difficulty")


def judges(sim_openai: str, sim_anthropic: str) -> list[str]:
    return [
        "--judge",
        f"openai/sim-gpt@{sim_openai}",
        "--judge",
        f"anthropic/sim-claude@{sim_anthropic}",
    ]


def test_examples_through_a_broker_and_a_worker(
    database_and_broker: tuple[str, str], tmp_path: Path
) -> None:
    """SQLite through Redis, PostgreSQL through RabbitMQ."""
    env = cli_env(*database_and_broker)
    with (
        running_simulator(SimConfig(latency_ms=20, garbage_rate=0.05, seed=5)) as sim,
        workers(env, log=tmp_path / "w.log"),
    ):
        proc = flask_eval(
            "run",
            "--instances",
            str(EXAMPLES / "instances.jsonl"),
            "--responses",
            f"model_a={EXAMPLES / 'model_a.jsonl'}",
            "--responses",
            f"model_b={EXAMPLES / 'model_b.jsonl'}",
            *judges(sim.openai_base_url, sim.anthropic_base_url),
            "--run",
            "celery",
            "--quiet",
            env=env,
            check=False,
        )
        assert "model_b: 25/27 instances answered" in proc.stderr
    st = json.loads(flask_eval("status", "celery", "--json", env=env).stdout)
    # model_a answers 27 instances, model_b 25; 2 judges; every ledger row finished
    assert st["pending"] == 0 and st["done"] + st["failed"] == st["total"]
    assert st["done"] > 0.95 * st["total"]
    assert proc.returncode == (1 if st["failed"] else 0), proc.stderr


def _subset(
    flask_data: Path, tmp_path: Path, n: int, models: tuple[str, ...]
) -> tuple[Path, list[str]]:
    src = flask_data / "evaluation_set" / "flask_evaluation.jsonl"
    instances = tmp_path / "instances.jsonl"
    with src.open() as f:
        instances.write_text("".join(itertools.islice(f, n)))
    args = []
    for m in models:  # responses to exactly those instances (ids 1..n)
        out = tmp_path / f"{m}.jsonl"
        with (flask_data / "model_output" / "outputs" / f"{m}.jsonl").open() as f:
            out.write_text("".join(itertools.islice(f, n)))
        args.append(f"{m}={out}")
    return instances, args


@pytest.mark.slow
def test_flask_subset_two_workers_two_judges_every_breakdown_present(
    postgres_url: str, redis_url: str, flask_data: Path, tmp_path: Path
) -> None:
    """Acceptance: 300 FLASK instances x 2 models x 2 judges (OpenAI + Anthropic SDKs), on
    PostgreSQL (the breakdowns' SQL is checked on both databases in tests/storage)."""
    instances, responses = _subset(flask_data, tmp_path, 300, ("gpt4", "alpaca_13b"))
    env = cli_env(postgres_url, redis_url)
    args = [a for r in responses for a in ("--responses", r)]
    with running_simulator(SimConfig(latency_ms=5, seed=11)) as sim:
        flask_eval(
            "run",
            "--instances",
            str(instances),
            *args,
            *judges(sim.openai_base_url, sim.anthropic_base_url),
            "--run",
            "flask300",
            "--no-wait",
            env=env,
        )
        with workers(env, processes=2, in_flight=64, log=tmp_path / "w.log"):
            st = wait_done(env, "flask300")
    assert st["done"] == st["total"] and st["failed"] == 0
    report = json.loads(flask_eval("report", "flask300", "--format", "json", env=env).stdout)[
        "rows"
    ]

    data = [json.loads(line) for line in instances.read_text().splitlines()]
    levels = {
        "simple lifestyle knowledge": "1",
        "advanced lifestyle knowledge": "2",
        "formal education knowledge": "3",
        "major level knowledge": "4",
        "expert level knowledge": "5",
    }
    expected = {
        "overall": {"all"},
        "skill": {s for d in data for s in d["skill"]},
        "domain": {x for d in data for x in d["domain"] if x != "-1"},
        "difficulty": {levels[d["difficulty"]] for d in data if d["difficulty"] in levels},
        "ability": set(),
    }
    from flask_eval.rubrics.skills import load_default

    expected["ability"] = {load_default().ability_of(s) for s in expected["skill"]}
    pairs = {(r["model"], r["judge"]) for r in report}
    assert len(pairs) == 4
    for pair in pairs:
        for dim, keys in expected.items():
            got = {
                r["key"]
                for r in report
                if (r["model"], r["judge"]) == pair and r["dimension"] == dim
            }
            assert got == keys, (pair, dim)


def test_tune_gc_freezes_start_up_objects_and_raises_the_young_threshold() -> None:
    code = (
        "import gc, json; from flask_eval.workers.worker import tune_gc, GC_GEN0_THRESHOLD;"
        "before = gc.get_freeze_count(); tune_gc();"
        "print(json.dumps([before, gc.get_freeze_count(), gc.get_threshold()[0], "
        "GC_GEN0_THRESHOLD]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, frozen, threshold, wanted = json.loads(out.stdout)
    assert before == 0 and frozen > 1_000  # the imports are out of the collector's sight
    assert threshold == wanted > 700
