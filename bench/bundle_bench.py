"""Benchmark: `export --bundle` and `import` of the report benchmark's run of ~1,000,000
judgments (bench/report_bench.py builds it), each command in a fresh process, with its
peak memory (max RSS) so that streaming shows: a bundle neither writes nor loads with the
run in memory.

    .venv/bin/python bench/bundle_bench.py [--postgres URL] [--instances N]

Writes bench/results/bundle_bench.json and prints one summary line per step.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.report_bench import RUN_NAME, load, make_data, postgres_database  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "bundle_bench.json"


def timed(args: list[str], url: str) -> dict[str, Any]:
    """`flask-eval ARGS` in a fresh process: seconds and its peak RSS (MiB)."""
    env = {**os.environ, "FLASK_EVAL_DATABASE_URL": url, "FLASK_EVAL_BROKER_URL": ""}
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "flask_eval", *args], env=env, cwd=ROOT)
    _, code, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(code)
    if proc.returncode != 0:
        raise SystemExit(f"flask-eval {' '.join(args)} exited {proc.returncode}")
    seconds = time.perf_counter() - started
    return {
        "seconds": round(seconds, 1),
        "max_rss_mib": round(usage.ru_maxrss / 1024),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", default=None, help="also import into PostgreSQL (URL)")
    parser.add_argument("--instances", type=int, default=1740, help="1,740: ~1M judgments")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        source = f"sqlite:///{tmp}/source.db"
        results["build"] = load(source, make_data(instances=args.instances))
        bundle = Path(tmp) / "run.bundle"
        results["export"] = timed(["export", RUN_NAME, "--bundle", str(bundle)], source)
        results["bundle_bytes"] = bundle.stat().st_size
        results["import_sqlite"] = timed(["import", str(bundle)], f"sqlite:///{tmp}/t.db")
        if args.postgres:
            with postgres_database(args.postgres) as url:
                results["import_postgres"] = timed(["import", str(bundle)], url)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    for step, figures in results.items():
        print(f"{step}: {figures}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
