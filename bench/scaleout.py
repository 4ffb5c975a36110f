"""Issue 24: scale-out to 8 worker processes against one PostgreSQL, and what each call costs.

`python -m bench.scale scaleout` runs 1, 2, 4 and 8 worker processes (64 in flight each,
2,000 ms latency, 1,024 calls per process) and, over the window from the producer's start
to the last judgment written, reads:

- the workers' CPU (every process of their session, /proc, boot left out), the producer's
  (wait4) and the simulator's (its own process, on the same 2 cores);
- PostgreSQL's CPU: the backends connected to the run's database (sampled every 0.25 s
  from /proc; what the figures use), and, as a cross-check only, the whole server (the
  postmaster and all its children, live and reaped) less the rate of an idle window
  before the run: on a server others load this is noise, even negative;
- pg_stat_database of the run's database (commits, rows inserted/updated); the WAL its
  relations' records take (pg_walinspect over the window) and the whole server's;
- Redis: commands processed and CPU (INFO), less the idle window's rate.

Knobs (env): SCALEOUT_PROCESSES (default "1,2,4,8"), SCALEOUT_CALLS (per process, 1024),
SCALEOUT_IN_FLIGHT (64), SCALEOUT_LATENCY_MS (2000), SCALEOUT_IDLE_S (4).
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

import psycopg
import redis

from bench.harness import (
    POSTGRES_URL,
    REDIS_URL,
    Workers,
    env_for,
    fresh_postgres,
    run_cli,
    write_result,
)
from bench.scaleout_probes import (
    BackendPoller,
    Counters,
    RedisMonitor,
    WalWatcher,
    _cpu,
    _stat,
    session_cpu,
)
from flask_eval.producer.synthetic import write_inputs
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import SimProcess, spawn_simulator
from flask_eval.storage.store import Store

CALLS_PER_MESSAGE = 64  # core.settings' default, which these runs use
JUDGE = "openai/sim-gpt@{openai}"


def _db_stats(admin: psycopg.Connection[Any], dbname: str) -> dict[str, int]:
    cols = ("xact_commit", "tup_inserted", "tup_updated", "tup_fetched", "blks_hit", "blks_read")
    row = admin.execute(
        f"select {', '.join(cols)} from pg_stat_database where datname = %s", (dbname,)
    ).fetchone()
    assert row is not None
    return dict(zip(cols, map(int, row), strict=True))


def _postmaster(admin: psycopg.Connection[Any]) -> int:
    row = admin.execute("select pg_backend_pid()").fetchone()
    assert row is not None
    f = _stat(row[0])
    assert f is not None
    return int(f[1])


def table_sizes(db: str) -> dict[str, Any]:
    """Bytes on disk (heap + indexes + TOAST) per row of the ledger's big tables."""
    out: dict[str, Any] = {}
    with psycopg.connect(db, autocommit=True) as c:
        c.execute("vacuum analyze")
        for table in ("judgment", "call", "instance", "response", "instance_domain"):
            n, size = c.execute(
                f'select count(*), pg_total_relation_size(\'"{table}"\') from "{table}"'
            ).fetchone() or (0, 0)
            out[table] = {"rows": n, "bytes": size, "bytes_per_row": round(size / max(n, 1))}
        raw, rationale = c.execute(
            "select (select avg(octet_length(raw)) from call),"
            " (select avg(octet_length(rationale)) from judgment)"
        ).fetchone() or (0, 0)
        out["avg_call_raw_bytes"] = round(float(raw or 0))
        out["avg_judgment_rationale_bytes"] = round(float(rationale or 0))
        row = c.execute("select pg_database_size(current_database())").fetchone()
        out["database_bytes"] = row[0] if row else 0
    return out


def queued_bytes(tmp: Path, sim: SimProcess, calls: int = 1024) -> dict[str, Any]:
    """Redis memory for a queue of messages no worker takes (the producer's backlog)."""
    with fresh_postgres() as db:
        env = env_for(db)
        instances, responses = write_inputs(tmp / "queued", calls // 2, models=("m0", "m1"))
        args = ["run", "--instances", str(instances), "--run", "q", "--no-wait", "--quiet"]
        for resp in responses:
            args += ["--responses", resp]
        run_cli([*args, "--judge", JUDGE.format(openai=sim.openai_base_url)], env)
        r = redis.Redis.from_url(REDIS_URL)
        keys: dict[str, tuple[str, int, int]] = {}  # name: (type, length, bytes)
        for k in r.scan_iter():
            t = r.type(k)
            kind = t.decode() if isinstance(t, bytes) else str(t)
            n = int(r.llen(k)) if kind == "list" else 0
            keys[k.decode(errors="replace") if isinstance(k, bytes) else str(k)] = (
                kind,
                n,
                int(r.memory_usage(k, samples=0) or 0),
            )
        r.flushdb()
    messages = sum(n for _, n, _ in keys.values())
    total = sum(b for _, n, b in keys.values() if n)
    return {
        "calls": calls,
        "messages": messages,
        "keys": keys,
        "bytes_per_message": round(total / max(messages, 1)),
        "bytes_per_call": round(total / calls, 1),
    }


def one(
    tmp: Path, sim: SimProcess, processes: int, per_process: int, in_flight: int, idle: float
) -> dict[str, Any]:
    calls_planned = per_process * processes
    instances, responses = write_inputs(
        tmp / f"p{processes}", calls_planned // 2, models=("m0", "m1")
    )
    args = ["run", "--instances", str(instances), "--run", "bench", "--no-wait", "--quiet"]
    for resp in responses:
        args += ["--responses", resp]
    args += ["--judge", JUDGE.format(openai=sim.openai_base_url)]
    r = redis.Redis.from_url(REDIS_URL)
    with fresh_postgres() as db, psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        dbname = db.rsplit("/", 1)[1]
        pm = _postmaster(admin)
        env = env_for(db)
        i0 = Counters.read(admin, pm, r)
        time.sleep(idle)
        background = Counters.read(admin, pm, r).minus(i0)
        workers = Workers(env, processes, in_flight)
        monitor = RedisMonitor(REDIS_URL)
        sim.reset_stats()
        c0 = Counters.read(admin, pm, r)
        wal = WalWatcher(db, c0.lsn)
        poller = BackendPoller(dbname, exclude={wal.pid})
        poller.start()
        w0, s0, d0 = session_cpu(workers.proc.pid), _sim_cpu(sim), _db_stats(admin, dbname)
        _, producer = run_cli(args, env)
        # the simulator first (the ledger's count would add its own load on the run's
        # database, which is measured), then the ledger for the last writes
        while int(sim.stats()["requests"]) < calls_planned:
            time.sleep(0.5)
        store = Store(db)
        run = store.find_run("bench")
        assert run is not None
        while store.count_open(run.id):
            time.sleep(0.1)
        w1, s1, d1 = session_cpu(workers.proc.pid), _sim_cpu(sim), _db_stats(admin, dbname)
        backends_cpu = poller.stop()
        c1 = Counters.read(admin, pm, r)
        redis_db = monitor.stop()
        wal_db = wal.stop(c1.lsn)
        workers.stop()
        store.close()
        with psycopg.connect(db) as c:
            calls, span = c.execute(
                "select count(*), extract(epoch from max(created_at) - min(created_at)) from call"
            ).fetchone() or (0, 0)
            (judgments,) = c.execute(
                "select count(*) from judgment where status = 'done'"
            ).fetchone() or (0,)
        sizes = table_sizes(db) if processes == max(_processes()) else None
    window = c1.minus(c0)
    secs = window["seconds"]
    bg = {k: v / background["seconds"] for k, v in background.items() if k != "seconds"}
    pg_wide = window["pg_cpu"] - bg["pg_cpu"] * secs
    redis_cmds = sum(redis_db.values())  # the run's Redis database only (MONITOR)
    redis_wide = window["redis_commands"] - bg["redis_commands"] * secs
    redis_cpu = window["redis_cpu"] - bg["redis_cpu"] * secs
    wal_wide = window["wal_bytes"] - bg["wal_bytes"] * secs
    worker, sim_cpu = w1 - w0, s1 - s0
    db_delta = {k: d1[k] - d0[k] for k in d0}
    ms = 1000 / max(calls, 1)
    pg = backends_cpu
    total_cpu = worker + producer.total + sim_cpu + pg + redis_cpu
    return {
        "processes": processes,
        "in_flight_per_process": in_flight,
        "calls": calls,
        "judgments": judgments,
        "window_seconds": round(secs, 2),
        "calls_per_second": round(calls / secs, 1),
        "calls_per_second_steady": round((calls - 1) / float(span), 1) if span else None,
        "judgments_per_second": round(judgments / secs, 1),
        "ideal_calls_per_second": round(processes * in_flight / (sim.config.latency_ms / 1000), 1),
        "max_in_flight_at_simulator": sim.stats().get("max_in_flight"),
        "cpu_seconds": {
            "workers": round(worker, 2),
            "producer": round(producer.total, 2),
            "simulator": round(sim_cpu, 2),
            "postgres_run_db_backends": round(pg, 2),
            "postgres_server_wide_minus_idle": round(pg_wide, 2),
            "redis": round(redis_cpu, 2),
            "total": round(total_cpu, 2),
        },
        "cpu_share_of_2_cores": round(total_cpu / (2 * secs), 3),
        "cpu_share_without_simulator": round((total_cpu - sim_cpu) / (2 * secs), 3),
        "per_call": {
            "worker_cpu_ms": round(worker * ms, 3),
            "producer_cpu_ms": round(producer.total * ms, 3),
            "simulator_cpu_ms": round(sim_cpu * ms, 3),
            "postgres_run_db_backends_cpu_ms": round(pg * ms, 3),
            "postgres_server_wide_minus_idle_cpu_ms": round(pg_wide * ms, 3),
            "redis_cpu_ms": round(redis_cpu * ms, 4),
            "redis_commands_run_db": round(redis_cmds / max(calls, 1), 3),
            "redis_commands_server_wide_minus_idle": round(redis_wide / max(calls, 1), 3),
            "wal_bytes_run_db": None if wal_db is None else round(wal_db / max(calls, 1)),
            "wal_bytes_server_wide_minus_idle": round(wal_wide / max(calls, 1)),
            "pg_commits": round(db_delta["xact_commit"] / max(calls, 1), 3),
        },
        "per_judgment": {
            "postgres_run_db_backends_cpu_ms": round(pg * 1000 / max(judgments, 1), 4),
            "wal_bytes_run_db": None if wal_db is None else round(wal_db / max(judgments, 1)),
            "rows_updated": round(db_delta["tup_updated"] / max(judgments, 1), 2),
        },
        "messages": math.ceil(calls / CALLS_PER_MESSAGE),
        "redis_commands_per_message": round(redis_cmds / max(calls / CALLS_PER_MESSAGE, 1), 1),
        "redis_commands_by_name": dict(redis_db.most_common()),
        "pg_stat_database_delta": db_delta,
        "max_backends_on_run_db": poller.max_backends,
        "background_per_second": {k: round(v, 3) for k, v in bg.items()},
        **({"table_sizes": sizes} if sizes else {}),
    }


def _sim_cpu(sim: SimProcess) -> float:
    assert sim.pid is not None
    f = _stat(sim.pid)
    assert f is not None
    return _cpu(f)


def _processes() -> tuple[int, ...]:
    return tuple(int(p) for p in os.environ.get("SCALEOUT_PROCESSES", "1,2,4,8").split(","))


def scaleout(tmp: Path) -> dict[str, Any]:
    per_process = int(os.environ.get("SCALEOUT_CALLS", "1024"))
    in_flight = int(os.environ.get("SCALEOUT_IN_FLIGHT", "64"))
    latency = float(os.environ.get("SCALEOUT_LATENCY_MS", "2000"))
    idle = float(os.environ.get("SCALEOUT_IDLE_S", "4"))
    runs: dict[int, dict[str, Any]] = {}
    with spawn_simulator(SimConfig(latency_ms=latency)) as sim:
        queued = queued_bytes(tmp, sim)
        for p in _processes():
            runs[p] = one(tmp, sim, p, per_process, in_flight, idle)
            print(
                f"  {p} processes: {runs[p]['calls_per_second_steady']} calls/s, "
                f"per call {runs[p]['per_call']}",
                flush=True,
            )
    return {
        "latency_ms": latency,
        "calls_per_message": CALLS_PER_MESSAGE,
        "queued": queued,
        "runs": runs,
    }


def run(tmp: Path) -> None:
    """`python -m bench.scale scaleout`: bench/results/scaleout.json and one line."""
    result = scaleout(tmp)
    runs = result["runs"]
    base = runs[min(runs)]["calls_per_second_steady"]
    ratios = {p: round(r["calls_per_second_steady"] / base, 3) for p, r in runs.items()}
    costs = {
        p: (r["per_call"]["worker_cpu_ms"], r["per_call"]["postgres_run_db_backends_cpu_ms"])
        for p, r in runs.items()
    }
    write_result(
        "scaleout",
        {**result, "ratios": ratios, "ideal_per_process": 32.0},
        f"throughput ratios vs 1 process: {ratios} (calls/s: "
        f"{ {p: r['calls_per_second_steady'] for p, r in runs.items()} }); worker / PG CPU "
        f"ms per call: {costs}",
    )
