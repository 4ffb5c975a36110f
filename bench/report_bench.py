"""Benchmark: the full report (all breakdowns and bootstrap intervals) over 1M judgments.

Builds a store of about 1,000,000 judgments (1,740 instances x 15 models x 15 judges x
~2.56 skills per instance; ~94% scored, ~4% N/A, ~2% failed), inserted directly into the
Core tables, then times the report on SQLite and on PostgreSQL:

    .venv/bin/python bench/report_bench.py [--sqlite-only] [--postgres URL] [--keep DIR]

Writes bench/results/report_bench.json and prints one summary line.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from producer.schema import DOMAINS  # noqa: E402
from rubrics import codec  # noqa: E402
from rubrics.skills import load_default  # noqa: E402
from storage.models import INSTANCE, INSTANCE_DOMAIN, RESPONSE, RUN  # noqa: E402
from storage.store import Store  # noqa: E402

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
RESULTS = ROOT / "bench" / "results" / "report_bench.json"
LIMIT_SECONDS = 5.0
RUN_NAME = "bench-report"


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "python": platform.python_version()}


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
    names = ("run_id", "model", "instance_id", "skill", "judge", "status", "score")
    if store.dialect == "postgresql":
        raw = store.engine.raw_connection()
        try:
            cur = raw.cursor()
            stamp = now.isoformat()
            buf = io.StringIO()
            for row in _judgment_rows(data, run_id):
                buf.write(
                    "\t".join("\\N" if v is None else str(v) for v in row)
                    + f"\t0\t{stamp}\t{stamp}\n"
                )
            cols = ", ".join((*names, "attempts", "created_at", "updated_at"))
            with cur.copy(f"COPY judgment ({cols}) FROM STDIN") as copy:  # type: ignore[attr-defined]
                copy.write(buf.getvalue())
            raw.commit()
            cur.execute("ANALYZE")
            raw.commit()
        finally:
            raw.close()
    else:
        raw = store.engine.raw_connection()
        try:
            cur = raw.cursor()
            cur.execute("BEGIN")
            cols = ", ".join((*names, "attempts", "created_at", "updated_at"))
            stamp = now.isoformat(sep=" ")
            cur.executemany(
                f"INSERT INTO judgment ({cols}) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?)",
                ((*row, stamp, stamp) for row in _judgment_rows(data, run_id)),
            )
            cur.execute("COMMIT")
            cur.execute("ANALYZE")
        finally:
            raw.close()
    return run_id


def time_report(store: Store, run_name: str, replicates: int, seed: int) -> dict[str, Any]:
    from flask_eval.cli_report import build_report

    run = store.find_run(run_name)
    assert run is not None
    started = time.perf_counter()
    report = build_report(store, run, replicates=replicates, seed=seed, progress=False)
    seconds = time.perf_counter() - started
    rows = report.rows
    with_ci = sum(1 for r in rows if r.ci_low is not None)
    return {"seconds": round(seconds, 3), "rows": len(rows), "rows_with_ci": with_ci}


@contextmanager
def postgres_database(admin_url: str) -> Iterator[str]:
    import psycopg

    name = f"flask_eval_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{admin_url.rsplit('/', 1)[0]}/{name}"
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def bench_one(url: str, data: dict[str, Any], replicates: int, seed: int) -> dict[str, Any]:
    store = Store(url)
    try:
        started = time.perf_counter()
        build(store, data)
        build_seconds = time.perf_counter() - started
        time_report(store, RUN_NAME, replicates, seed)  # warm the caches once
        result = time_report(store, RUN_NAME, replicates, seed)
        result["build_seconds"] = round(build_seconds, 1)
        return result
    finally:
        store.close()


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
    if not args.postgres_only:
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{tmp}/bench.db"
            results["backends"]["sqlite"] = bench_one(url, data, args.replicates, args.seed)
    if not args.sqlite_only:
        with postgres_database(args.postgres) as url:
            results["backends"]["postgresql"] = bench_one(url, data, args.replicates, args.seed)
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
