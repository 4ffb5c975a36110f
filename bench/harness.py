"""Shared machinery of the benchmarks: services, worker processes, CPU accounting.

Everything runs on this machine: Redis and PostgreSQL as configured, the simulator in
its own process (so it does not steal the client's CPU), workers as real processes.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import redis

from flask_eval.workers.processes import WorkerGroup

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
REDIS_URL = os.environ.get("FLASK_EVAL_BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
POSTGRES_URL = os.environ.get(
    "FLASK_EVAL_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
#: the prefix of the databases fresh_postgres() creates (a shared server: one per user)
PG_PREFIX = os.environ.get("FLASK_EVAL_BENCH_PG_PREFIX", "flask_eval_bench_")


def machine() -> dict[str, Any]:
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {"cores": os.cpu_count(), "cpu": cpu, "python": platform.python_version()}


def write_result(name: str, result: dict[str, Any], summary: str) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": name,
        "machine": machine(),
        "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        **result,
    }
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=2) + "\n")
    print(f"{name}: {summary}", flush=True)


@contextmanager
def fresh_postgres() -> Iterator[str]:
    name = f"{PG_PREFIX}{uuid.uuid4().hex[:8]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield POSTGRES_URL.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def env_for(database_url: str, broker: bool = True, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FLASK_EVAL_", "OPENAI_", "ANTHROPIC_"))
    }
    env.update(
        FLASK_EVAL_DATABASE_URL=database_url,
        OPENAI_API_KEY="sk-bench",
        ANTHROPIC_API_KEY="sk-bench",
    )
    if broker:
        env.update(
            FLASK_EVAL_BROKER_URL=REDIS_URL, FLASK_EVAL_QUEUE=f"bench-{uuid.uuid4().hex[:8]}"
        )
        redis.Redis.from_url(REDIS_URL).flushdb()
    env.update(extra)
    return env


@dataclass
class Cpu:
    user: float = 0.0
    system: float = 0.0

    @property
    def total(self) -> float:
        return self.user + self.system


def run_cli(
    args: Sequence[str], env: Mapping[str, str]
) -> tuple[subprocess.CompletedProcess[str], Cpu]:
    """Run `flask-eval ARGS`; its CPU is the change in this process's reaped-children time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        [sys.executable, "-m", "flask_eval", *args],
        env=dict(env),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):  # 1: finished with failures, which a benchmark counts
        raise RuntimeError(
            f"flask-eval {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
        )
    return proc, Cpu(after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime)


class Workers:
    """`flask-eval worker --processes P` as a process group, with its CPU accounted."""

    def __init__(
        self, env: Mapping[str, str], processes: int, in_flight: int, log: Path | None = None
    ) -> None:
        self.group = WorkerGroup(env, processes, in_flight, "WARNING", log, cwd=REPO)
        self.proc = self.group.proc
        self.queue = env["FLASK_EVAL_QUEUE"]
        self._wait_ready(processes)

    def _wait_ready(self, processes: int, timeout: float = 60) -> None:
        client = redis.Redis.from_url(REDIS_URL)
        deadline = time.monotonic() + timeout
        while not client.exists(f"_kombu.binding.{self.queue}"):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("workers did not start")
            time.sleep(0.2)
        time.sleep(1.0 + 0.5 * processes)  # let every process finish booting

    def stop(self) -> Cpu:
        """SIGTERM (warm shutdown), then the CPU the whole tree used."""
        user, system = self.group.stop(timeout=300)
        return Cpu(user, system)
