"""Benchmark: the full report (all breakdowns and bootstrap intervals) over 1M judgments.

Builds a store of about 1,000,000 judgments (1,740 instances x 15 models x 15 judges x
~2.56 skills per instance; ~94% scored, ~4% N/A, ~2% failed), inserted directly into the
Core tables, then times the report on SQLite and on PostgreSQL:

    .venv/bin/python bench/report_bench.py [--sqlite-only] [--postgres URL] [--keep DIR]

Writes bench/results/report_bench.json and prints one summary line.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from flask_eval.core.types import DOMAINS  # noqa: E402
from flask_eval.rubrics import codec  # noqa: E402
from flask_eval.rubrics.skills import load_default  # noqa: E402
from flask_eval.storage.models import INSTANCE, INSTANCE_DOMAIN, RESPONSE, RUN  # noqa: E402
from flask_eval.storage.store import Store  # noqa: E402

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
RESULTS = ROOT / "bench" / "results" / "report_bench.json"
LIMIT_SECONDS = 5.0
REPEATS = 5  # timed runs after a warm-up; the best is reported, all are kept
RUN_NAME = "bench-report"


def machine() -> dict[str, Any]:
    """nproc, the CPU model line of /proc/cpuinfo (with family and model) and versions."""
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key in ("model name", "cpu family", "model", "cpu MHz") and key not in info:
                info[key] = value.strip()
    except OSError:
        pass
    import sqlite3

    return {
        "nproc": os.cpu_count(),
        "cpu": info.get("model name", "unknown"),
        "cpu_family": info.get("cpu family"),
        "cpu_model": info.get("model"),
        "cpu_mhz": info.get("cpu MHz"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "sqlite": sqlite3.sqlite_version,
    }


def make_data(
    instances: int = 1740, models: int = 15, judges: int = 15, seed: int = 0
) -> dict[str, Any]:
    """Synthetic inputs of FLASK's shape; judgments as numpy columns."""
    rng = np.random.default_rng(seed)
    skillset = load_default()
    skills = np.array(skillset.names, dtype=object)
    ids = [str(i + 1) for i in range(instances)]
    n_skills = rng.choice([2, 3], size=instances, p=[0.44, 0.56])
    inst_skills = [list(rng.choice(len(skills), size=k, replace=False)) for k in n_skills]
    difficulty = rng.integers(1, 6, size=instances)
    inst_domains = [
        list(rng.choice(len(DOMAINS), size=k, replace=False))
        for k in rng.choice([1, 2], size=instances, p=[0.6, 0.4])
    ]
    model_names = [f"model-{m:02d}" for m in range(models)]
    judge_names = [f"openai/judge-{j:02d}" for j in range(judges)]
    quality = rng.normal(3.4, 0.4, size=models)
    bias = rng.normal(0.0, 0.3, size=judges)
    hardness = rng.normal(0.0, 0.5, size=instances)

    pair_inst = np.repeat(np.arange(instances), n_skills)  # (instance, skill) pairs
    pair_skill = np.concatenate(inst_skills)
    p = len(pair_inst)
    m_idx = np.repeat(np.arange(models), judges * p)
    j_idx = np.tile(np.repeat(np.arange(judges), p), models)
    i_idx = np.tile(pair_inst, models * judges)
    s_idx = np.tile(pair_skill, models * judges)
    pos = np.tile(np.arange(p), models * judges)
    response = rng.normal(0.0, 0.6, size=(models, p))  # how good each response is
    latent = quality[m_idx] - 0.15 * difficulty[i_idx] - hardness[i_idx] + response[m_idx, pos]
    score = np.clip(np.rint(latent + bias[j_idx] + rng.normal(0, 0.7, size=len(m_idx))), 1, 5)
    u = rng.random(len(m_idx))
    status = np.where(u < 0.02, "failed", "done")
    na = (u >= 0.02) & (u < 0.06)
    return {
        "skillset": skillset,
        "ids": ids,
        "skills": skills,
        "inst_skills": inst_skills,
        "difficulty": difficulty,
        "inst_domains": inst_domains,
        "models": model_names,
        "judges": judge_names,
        "columns": {
            "model": np.array(model_names, dtype=object)[m_idx],
            "judge": np.array(judge_names, dtype=object)[j_idx],
            "instance_id": np.array(ids, dtype=object)[i_idx],
            "skill": skills[s_idx],
            "status": status,
            "score": np.where((status == "done") & ~na, score, -1).astype(int),
        },
    }


def _run_config(data: dict[str, Any]) -> str:
    return json.dumps(
        {
            "judges": data["judges"],
            "mode": "instance",
            "skills": codec.to_data(data["skillset"]),
            "instances_path": "synthetic",
            "responses": {m: "synthetic" for m in data["models"]},
            "coverage": {m: [len(data["ids"])] * 2 for m in data["models"]},
        }
    )


def _judgment_rows(data: dict[str, Any], run_id: int) -> Iterator[tuple[Any, ...]]:
    cols = data["columns"]
    for model, judge, iid, skill, status, score in zip(
        cols["model"],
        cols["judge"],
        cols["instance_id"],
        cols["skill"],
        cols["status"],
        cols["score"].tolist(),
        strict=True,
    ):
        yield (run_id, model, iid, skill, judge, status, None if score < 0 else score)


def build(store: Store, data: dict[str, Any]) -> int:
    """Insert the run, its inputs and ~1M judgments; returns the run id."""
    now = datetime.now(UTC)
    with store.engine.begin() as conn:
        run_id = int(
            conn.execute(
                RUN.insert()
                .values(
                    name=RUN_NAME,
                    fingerprint="0" * 64,
                    mode="instance",
                    config=_run_config(data),
                    created_at=now,
                )
                .returning(RUN.c.id)
            ).scalar_one()
        )
        skills = data["skills"]
        conn.execute(
            INSTANCE.insert(),
            [
                {
                    "run_id": run_id,
                    "instance_id": iid,
                    "instruction": f"question {iid}",
                    "answer": f"answer {iid}",
                    "skills": json.dumps([skills[s] for s in data["inst_skills"][k]]),
                    "difficulty": int(data["difficulty"][k]),
                }
                for k, iid in enumerate(data["ids"])
            ],
        )
        conn.execute(
            INSTANCE_DOMAIN.insert(),
            [
                {"run_id": run_id, "instance_id": iid, "domain": DOMAINS[d]}
                for k, iid in enumerate(data["ids"])
                for d in data["inst_domains"][k]
            ],
        )
        conn.execute(
            RESPONSE.insert(),
            [
                {"run_id": run_id, "model": m, "instance_id": iid, "text": "response"}
                for m in data["models"]
                for iid in data["ids"]
            ],
        )
    names = ("run_id", "model", "instance_id", "criterion", "judge", "status", "score")
    if store.dialect == "postgresql":
        raw = store.engine.raw_connection()
        try:
            cur = raw.cursor()
            stamp = now.isoformat()
            buf = io.StringIO()
            for row in _judgment_rows(data, run_id):
                buf.write(
                    "\t".join("\\N" if v is None else str(v) for v in row)
                    + f"\t\t0\t0\t0\t{stamp}\t{stamp}\n"
                )
            cols = ", ".join(
                (*names, "model_b", "claims", "asks", "requests", "created_at", "updated_at")
            )
            with cast(Any, cur).copy(f"COPY judgment ({cols}) FROM STDIN") as copy:
                copy.write(buf.getvalue())
            raw.commit()
        finally:
            raw.close()
        # what autovacuum does to a long-lived ledger: hint bits, visibility map, statistics
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE judgment")
            conn.exec_driver_sql("ANALYZE")
    else:
        raw = store.engine.raw_connection()
        try:
            cur = raw.cursor()
            cur.execute("BEGIN")
            cols = ", ".join(
                (*names, "model_b", "claims", "asks", "requests", "created_at", "updated_at")
            )
            stamp = now.isoformat(sep=" ")
            cast(Any, cur).executemany(
                f"INSERT INTO judgment ({cols}) VALUES (?, ?, ?, ?, ?, ?, ?, '', 0, 0, 0, ?, ?)",
                ((*row, stamp, stamp) for row in _judgment_rows(data, run_id)),
            )
            cur.execute("COMMIT")
            cur.execute("ANALYZE")
        finally:
            raw.close()
    return run_id


def time_report(store: Store, run_name: str, replicates: int, seed: int) -> dict[str, Any]:
    """Seconds for the whole report: the query, every breakdown with its bootstrap
    interval, the paired comparisons, judge agreement, and the JSON output."""
    from flask_eval.app.report import build_report
    from flask_eval.report.render import to_json

    started = time.perf_counter()
    run = store.find_run(run_name)
    assert run is not None
    phases: dict[str, float] = {}
    report = build_report(
        store, run, replicates=replicates, seed=seed, progress=False, timings=phases
    )
    built = time.perf_counter()
    text = to_json(report)
    seconds = time.perf_counter() - started
    phases["json"] = round(seconds - (built - started), 4)
    return {
        "seconds": round(seconds, 3),
        "build_seconds": round(built - started, 3),
        "json_seconds": round(seconds - (built - started), 3),
        "rows": len(report.rows),
        "rows_with_ci": sum(1 for r in report.rows if r.ci_low is not None),
        "comparisons": len(report.comparisons),
        "agreement_rows": len(report.agreement),
        "json_bytes": len(text),
        "phases": phases,
    }


@contextmanager
def postgres_database(admin_url: str) -> Iterator[str]:
    import psycopg

    name = f"flask_eval_report_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{admin_url.rsplit('/', 1)[0]}/{name}"
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def load(url: str, data: dict[str, Any]) -> dict[str, Any]:
    """Insert the benchmark data into the store at ``url``."""
    store = Store(url)
    try:
        started = time.perf_counter()
        build(store, data)
        seconds = time.perf_counter() - started
        with store.engine.connect() as conn:
            version = conn.exec_driver_sql(
                "SELECT version()" if store.dialect == "postgresql" else "SELECT sqlite_version()"
            ).scalar_one()
        return {"insert_seconds": round(seconds, 1), "server": str(version)}
    finally:
        store.close()


def measure(url: str, replicates: int, seed: int) -> dict[str, Any]:
    """One warm-up report, then REPEATS timed ones; the best, with all times and the median."""
    store = Store(url)
    try:
        time_report(store, RUN_NAME, replicates, seed)
        runs = [time_report(store, RUN_NAME, replicates, seed) for _ in range(REPEATS)]
    finally:
        store.close()
    result = min(runs, key=lambda r: float(r["seconds"]))
    result["all_seconds"] = [r["seconds"] for r in runs]
    result["median_seconds"] = sorted(r["seconds"] for r in runs)[len(runs) // 2]
    result["cli_seconds"] = cli_seconds(url)
    return result


def cli_seconds(url: str) -> float:
    """Wall time of `flask-eval report RUN --format json` in a new process (start-up,
    imports and output included), for information."""
    code = (
        "import sys; from flask_eval.cli.report import report_command; "
        f"report_command([{RUN_NAME!r}, '--format', 'json', '--quiet'])"
    )
    env = {**os.environ, "FLASK_EVAL_DATABASE_URL": url}
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, check=True
    )
    return round(time.perf_counter() - started, 3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="admin URL of PostgreSQL")
    parser.add_argument("--sqlite-only", action="store_true")
    parser.add_argument("--postgres-only", action="store_true")
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", type=int, default=15)
    parser.add_argument("--judges", type=int, default=15)
    parser.add_argument("--instances", type=int, default=1740)
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)

    data = make_data(args.instances, args.models, args.judges)
    judgments = len(data["columns"]["model"])
    results: dict[str, Any] = {
        "judgments": judgments,
        "shape": {
            "instances": args.instances,
            "models": args.models,
            "judges": args.judges,
            "skills_per_instance": round(judgments / args.instances / args.models / args.judges, 3),
        },
        "replicates": args.replicates,
        "limit_seconds": LIMIT_SECONDS,
        "machine": machine(),
        "backends": {},
    }
    with ExitStack() as stack:
        urls = {}
        if not args.postgres_only:
            tmp = stack.enter_context(tempfile.TemporaryDirectory())
            urls["sqlite"] = f"sqlite:///{tmp}/bench.db"
        if not args.sqlite_only:
            urls["postgresql"] = stack.enter_context(postgres_database(args.postgres))
        for name, url in urls.items():
            results["backends"][name] = load(url, data)
        del data  # time the report in a process that holds no more than a user's would
        gc.collect()
        for name, url in urls.items():
            results["backends"][name] |= measure(url, args.replicates, args.seed)
    results["ok"] = all(b["seconds"] <= LIMIT_SECONDS for b in results["backends"].values())
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    summary = ", ".join(f"{k} {v['seconds']:.2f} s" for k, v in results["backends"].items())
    print(
        f"report over {judgments:,} judgments (B={args.replicates}): {summary} "
        f"[limit {LIMIT_SECONDS:.0f} s: {'ok' if results['ok'] else 'TOO SLOW'}] "
        f"on {results['machine']['nproc']} x {results['machine']['cpu']}"
    )
    return 0 if results["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
