"""Issue 24: creating a run at 10k, 100k, 1M and 10M judgments, and a bad line at the end.

`python -m bench.create_bench [--sizes 10000,100000,1000000,10000000] [--sqlite]`

Each size is a fresh PostgreSQL database (or a SQLite file with ``--sqlite``) and a Redis
queue of its own; `flask-eval run --no-wait` creates the run and enqueues its calls. What
is measured per size, from one process: wall time (judgments/s), the producer's peak
resident memory (its own ``ru_maxrss``, from ``wait4``), the ledger rows and the queued
messages it left. Then the same inputs with the last line of the last responses file made
bad: exit 2, one line naming the file and line, no run and no message. The inputs are
FLASK-shaped: up to 10,000 instances with 3 skills each, one responses file per model
(~600 characters per response), 1 judge without a price (pricing is issue 24's estimate
part: `bench.estimate_bench`). Writes bench/results/create.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis

from bench.harness import REDIS_URL, REPO, env_for, fresh_postgres, write_result
from flask_eval.core.types import DIFFICULTY_LABELS, DOMAINS
from flask_eval.producer.synthetic import WORDS
from flask_eval.rubrics.skills import load_default

INPUTS = Path(os.environ.get("FLASK_EVAL_BENCH_INPUTS", "/tmp/flask-eval-create-inputs"))
SKILLS_PER_INSTANCE = 3
MAX_INSTANCES = 10_000


def shape(judgments: int) -> tuple[int, int]:
    """(instances, models) for about ``judgments`` judgments of one judge."""
    instances = min(MAX_INSTANCES, max(1, judgments // SKILLS_PER_INSTANCE))
    return instances, max(1, round(judgments / (SKILLS_PER_INSTANCE * instances)))


def write_inputs(instances: int, models: int) -> tuple[Path, list[str]]:
    """The inputs of a size, written once and kept in ``INPUTS`` (a model's file is the
    same for every size that has it)."""
    folder = INPUTS / f"i{instances}"
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(instances)
    skills = load_default().names
    path = folder / "instances.jsonl"
    if not path.exists():
        with path.open("w") as f:
            for i in range(1, instances + 1):
                f.write(
                    json.dumps(
                        {
                            "idx": i,
                            "instruction": (
                                f"Explain {rng.choice(WORDS)} and {rng.choice(WORDS)} ({i})."
                            ),
                            "answer": " ".join(rng.choices(WORDS, k=40)),
                            "skill": rng.sample(skills, SKILLS_PER_INSTANCE),
                            "domain": rng.sample(DOMAINS, 1),
                            "difficulty": DIFFICULTY_LABELS[i % 5],
                        }
                    )
                    + "\n"
                )
    args = []
    for m in range(models):
        model = folder / f"m{m}.jsonl"
        if not model.exists():
            words = random.Random(m)
            with model.open("w") as f:
                for i in range(1, instances + 1):
                    text = " ".join(words.choices(WORDS, k=words.randint(40, 140)))
                    f.write(json.dumps({"question_id": i, "text": text}) + "\n")
        args += ["--responses", f"m{m}={model}"]
    return path, args


def run_once(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """`flask-eval ARGS` as a child under GNU time; its wall time, peak resident memory
    (time's %M, KiB), exit code and stderr."""
    start = time.perf_counter()
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "peak-kib %M", sys.executable, "-m", "flask_eval", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    lines = [
        line
        for line in proc.stderr.rstrip().splitlines()
        if not line.startswith("Command exited with")
    ]  # GNU time's own line
    peak = float(lines[-1].split()[-1]) / 1024 if lines and lines[-1].startswith("peak-kib") else 0
    err = "\n".join(lines[:-1])
    return {
        "rc": proc.returncode,
        "wall": wall,
        "peak_mb": peak,
        "stderr": err,
        "stdout": proc.stdout,
    }


def measure(judgments: int, database_url: str) -> dict[str, Any]:
    instances, models = shape(judgments)
    path, responses = write_inputs(instances, models)
    env = env_for(database_url, FLASK_EVAL_CALLS_PER_MESSAGE="512")
    queue = env["FLASK_EVAL_QUEUE"]
    args = [
        "run",
        "--instances",
        str(path),
        *responses,
        "--judge",
        "openai/bench-judge",
        "--run",
        "big",
        "--no-wait",
    ]
    one = run_once(args, env)
    if one["rc"] != 0:
        raise RuntimeError(f"run exited {one['rc']}: {one['stderr'][-2000:]}")
    rows = _rows(database_url)
    messages = redis.Redis.from_url(REDIS_URL).llen(queue)
    return {
        "judgments": rows,
        "instances": instances,
        "models": models,
        "seconds": round(one["wall"], 2),
        "judgments_per_second": round(rows / one["wall"]),
        "peak_mb": round(one["peak_mb"], 1),
        "messages": messages,
    }


def bad_last_line(judgments: int, database_url: str) -> dict[str, Any]:
    """The same inputs, the last line of the last responses file bad: nothing written."""
    instances, models = shape(judgments)
    path, responses = write_inputs(instances, models)
    last = Path(responses[-1].split("=", 1)[1])
    bad = last.with_name("bad.jsonl")
    lines = last.read_text().splitlines()
    lines[-1] = lines[-1].replace('"text"', '"txet"')
    bad.write_text("\n".join(lines) + "\n")
    responses[-1] = f"{responses[-1].split('=', 1)[0]}={bad}"
    env = env_for(database_url, FLASK_EVAL_CALLS_PER_MESSAGE="512")
    args = [
        "run",
        "--instances",
        str(path),
        *responses,
        "--judge",
        "openai/bench-judge",
        "--run",
        "bad",
        "--no-wait",
    ]
    one = run_once(args, env)
    bad.unlink()
    tables = _counts(database_url)
    return {
        "exit": one["rc"],
        "message": one["stderr"].strip().splitlines()[-1:],
        "line": len(lines),
        "rows_after": tables,
        "messages": redis.Redis.from_url(REDIS_URL).llen(env["FLASK_EVAL_QUEUE"]),
        "seconds": round(one["wall"], 2),
        "peak_mb": round(one["peak_mb"], 1),
    }


def dry_run(judgments: int, database_url: str) -> dict[str, Any]:
    """`run --dry-run` of the same inputs with a priced judge: its time, peak memory and
    the estimate's stated margin (bench.estimate_bench checks a margin against the exact
    count at 1M)."""
    instances, models = shape(judgments)
    path, responses = write_inputs(instances, models)
    env = env_for(database_url, broker=False)
    args = [
        "run",
        "--instances",
        str(path),
        *responses,
        "--judge",
        "openai/gpt-4o",
        "--run",
        "dry",
        "--dry-run",
    ]
    one = run_once(args, env)
    if one["rc"] != 0:
        raise RuntimeError(f"dry run exited {one['rc']}: {one['stderr'][-2000:]}")
    return {
        "judgments": instances * models * SKILLS_PER_INSTANCE,
        "seconds": round(one["wall"], 2),
        "peak_mb": round(one["peak_mb"], 1),
        "estimate": [line for line in one["stdout"].splitlines() if "95%" in line][:1],
    }


def _rows(url: str) -> int:
    return _counts(url).get("judgment", 0)


def _counts(url: str) -> dict[str, int]:
    from sqlalchemy import create_engine, inspect, text

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            names = inspect(conn).get_table_names()
            return {
                t: int(conn.execute(text(f'SELECT count(*) FROM "{t}"')).scalar_one())
                for t in ("run", "instance", "response", "judgment")
                if t in names
            }
    finally:
        engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default="10000,100000,1000000,10000000",
        help="sizes of the runs created ('' for none)",
    )
    parser.add_argument("--sqlite", action="store_true")
    parser.add_argument("--bad", type=int, default=0, help="also the bad-last-line case")
    parser.add_argument("--dry-run", default="", help="sizes to time `run --dry-run` at")
    ns = parser.parse_args()
    results: dict[str, Any] = {"backend": "sqlite" if ns.sqlite else "postgresql", "sizes": []}
    for size in (int(s) for s in ns.sizes.split(",") if s):
        with _database(ns.sqlite) as url:
            one = measure(size, url)
        print(f"{size:>10,}: {json.dumps(one)}", flush=True)
        results["sizes"].append(one)
    if ns.bad:
        with _database(ns.sqlite) as url:
            results["bad_last_line"] = bad_last_line(ns.bad, url)
        print(f"bad last line: {json.dumps(results['bad_last_line'])}", flush=True)
    for size in (int(s) for s in ns.dry_run.split(",") if s):
        with _database(True) as url:
            results.setdefault("dry_run", []).append(dry_run(size, url))
        print(f"dry run {size:>10,}: {json.dumps(results['dry_run'][-1])}", flush=True)
    if not results["sizes"]:
        return
    top = results["sizes"][-1]
    write_result(
        "create",
        results,
        f"{top['judgments']:,} judgments in {top['seconds']} s "
        f"({top['judgments_per_second']:,}/s), peak {top['peak_mb']} MB",
    )


def _database(sqlite: bool) -> Any:
    if not sqlite:
        return fresh_postgres()
    import contextlib
    import tempfile

    @contextlib.contextmanager
    def temp() -> Any:
        with tempfile.TemporaryDirectory() as d:
            yield f"sqlite:///{d}/store.db"

    return temp()


if __name__ == "__main__":
    main()
