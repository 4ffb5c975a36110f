"""Benchmark: the ledger at 1M and 10M judgments on PostgreSQL (issue 24).

Builds a store of N judgments with SQL (``generate_series``, ``INSERT ... SELECT`` straight
into the schema ``Store(url)`` creates): FLASK's shape (15 models x 15 judges x ~2.56
skills per instance; instances scaled to reach N), 97% done (4% of them N/A), 1% failed on
their answer (unparseable), 1% failed without one (timeout, rate limit, provider error),
0.8% pending, 0.2% running; one paid call per (model, instance, judge) answered. Then times
what reads and writes it:

    PYTHONPATH=. .venv/bin/python bench/ledger_bench.py --judgments 10000000 [--keep]
        [--db NAME] [--delete] [--postgres ADMIN_URL]

``status`` (app.progress.run_status: what `flask-eval status RUN` prints), the report
(app.report.build_report + JSON, as `flask-eval report RUN --format json`), the live view's
counts (storage.live.judge_counts), pages of judgments (storage.judgment_pages), a worker's
claim of 96 rows and, with ``--delete``, `runs delete` of the run while a worker writes to
another run (its slowest write is reported). Writes bench/results/ledger.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.report_bench import machine, time_report  # noqa: E402
from flask_eval.core.errors import Status  # noqa: E402
from flask_eval.core.types import DOMAINS  # noqa: E402
from flask_eval.rubrics import codec  # noqa: E402
from flask_eval.rubrics.skills import load_default  # noqa: E402
from flask_eval.storage.store import Store  # noqa: E402

ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
RESULTS = ROOT / "bench" / "results" / "ledger.json"
RUN_NAME = "bench-ledger"
OTHER = "bench-ledger-other"
MODELS, JUDGES = 15, 15
ROWS_PER_INSTANCE = MODELS * JUDGES * 2.56
LIMITS = {"report": 15.0, "status": 1.0}


def run_config(instances: int) -> str:
    skillset = load_default()
    models = [f"model-{m:02d}" for m in range(MODELS)]
    return json.dumps(
        {
            "judges": [
                {
                    "name": f"openai/judge-{j:02d}",
                    "spec": f"openai/judge-{j:02d}",
                    "price": {"input": 1.0, "output": 2.0},
                }
                for j in range(JUDGES)
            ],
            "mode": "instance",
            "skills": codec.to_data(skillset),
            "instances_path": "synthetic",
            "responses": {m: "synthetic" for m in models},
            "coverage": {m: [instances] * 2 for m in models},
        },
        sort_keys=True,
    )


def _secondary_indexes(conn: Any) -> list[tuple[str, str]]:
    """(drop, create) statements of the judgment table's secondary indexes/constraints."""
    out = []
    for name, definition in conn.exec_driver_sql(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = 'judgment'::regclass AND contype = 'u'"
    ):
        out.append(
            (
                f"ALTER TABLE judgment DROP CONSTRAINT {name}",
                f"ALTER TABLE judgment ADD CONSTRAINT {name} {definition}",
            )
        )
    for name, definition in conn.exec_driver_sql(
        "SELECT i.indexname, i.indexdef FROM pg_indexes AS i WHERE i.tablename = 'judgment' "
        "AND i.indexname NOT IN (SELECT conname FROM pg_constraint "
        "WHERE conrelid = 'judgment'::regclass)"
    ):
        out.append((f"DROP INDEX {name}", str(definition)))
    return out


def build(store: Store, name: str, instances: int) -> int:
    """The run ``name`` of ``instances`` instances and its ledger; returns its id."""
    skills = load_default().names
    with store.engine.begin() as conn:
        empty = conn.exec_driver_sql("SELECT NOT EXISTS (SELECT 1 FROM judgment)").scalar()
        indexes = _secondary_indexes(conn) if empty else []
        conn.exec_driver_sql("SET LOCAL maintenance_work_mem = '1GB'")
        conn.exec_driver_sql("SET LOCAL work_mem = '256MB'")
        conn.exec_driver_sql("SELECT setseed(0.24)")
        run_id = int(
            conn.exec_driver_sql(
                "INSERT INTO run (name, fingerprint, mode, config, created_at) "
                "VALUES (%(n)s, repeat('0', 64), 'instance', %(c)s, now()) RETURNING id",
                {"n": name, "c": run_config(instances)},
            ).scalar_one()
        )
        p = {"run": run_id, "n": instances, "skills": list(skills), "domains": list(DOMAINS)}
        # each instance: 2 or 3 consecutive skills from a spread start, one or two domains
        conn.exec_driver_sql(
            """
            CREATE TEMP TABLE crit ON COMMIT DROP AS
            SELECT i::text AS iid, (%(skills)s::text[])[1 + (i * 7 + k) %% 12] AS skill
            FROM generate_series(1, %(n)s) AS i, generate_series(0, 2) AS k
            WHERE k < 2 OR i %% 25 < 14""",
            p,
        )
        conn.exec_driver_sql(
            """
            INSERT INTO instance (run_id, instance_id, instruction, answer, skills, difficulty,
                                  system_prompt, rubrics)
            SELECT %(run)s, iid, 'question ' || iid || ' ' || repeat('about a river ', 20),
                   'answer ' || iid, json_agg(skill)::text, 1 + iid::int %% 5, '', '{}'
            FROM crit GROUP BY iid""",
            p,
        )
        conn.exec_driver_sql(
            """
            INSERT INTO instance_domain (run_id, instance_id, domain)
            SELECT DISTINCT %(run)s, i::text, (%(domains)s::text[])[1 + (i * 3 + k) %% 10]
            FROM generate_series(1, %(n)s) AS i, generate_series(0, 1) AS k
            WHERE k = 0 OR i %% 5 < 2""",
            p,
        )
        conn.exec_driver_sql(
            """
            INSERT INTO response (run_id, model, instance_id, text)
            SELECT %(run)s, 'model-' || lpad(m::text, 2, '0'), i::text,
                   'response ' || repeat('the stone falls ', 30)
            FROM generate_series(0, 14) AS m, generate_series(1, %(n)s) AS i""",
            p,
        )
        conn.exec_driver_sql(
            """
            CREATE TEMP TABLE cell ON COMMIT DROP AS
            SELECT 'model-' || lpad(m::text, 2, '0') AS model, m, j, i::text AS iid,
                   'openai/judge-' || lpad(j::text, 2, '0') AS judge, random() AS u,
                   md5(%(run)s || '|' || m || '|' || i || '|' || j) AS uid
            FROM generate_series(0, 14) AS m, generate_series(0, 14) AS j,
                 generate_series(1, %(n)s) AS i""",
            p,
        )
        for drop, _ in indexes:
            conn.exec_driver_sql(drop)
        conn.exec_driver_sql(
            f"""
            INSERT INTO judgment (run_id, model, model_b, instance_id, criterion, judge,
                status, score, rationale, reason, detail, call_uid, claims, asks, requests,
                lease_until, created_at, updated_at)
            SELECT %(run)s, c.model, '', c.iid, k.skill, c.judge, x.status,
                   CASE WHEN x.status = 'done' AND x.v >= 0.04 THEN least(5, greatest(1,
                        round(3 + (c.m %% 5 - 2) * 0.3 + (c.j %% 3 - 1) * 0.3
                              + (x.v - 0.5) * 3)))::int END,
                   CASE WHEN x.status = 'done' THEN 'The response ' || c.iid
                        || repeat(' covers the point well but misses a step;', 3) END,
                   CASE WHEN x.status = 'failed' THEN (CASE WHEN c.u >= 0.02 THEN 'unparseable'
                        WHEN c.u < 0.013 THEN 'timeout' WHEN c.u < 0.016 THEN 'rate_limited'
                        ELSE 'provider_error' END) END,
                   CASE WHEN x.status = 'failed' THEN 'no answer: ' || c.judge END,
                   CASE WHEN c.u >= 0.02 THEN c.uid END,
                   CASE WHEN c.u >= 0.008 THEN 1 ELSE 0 END,
                   CASE WHEN c.u >= 0.02 THEN 1 ELSE 0 END,
                   CASE WHEN c.u >= 0.01 THEN 1 ELSE 0 END,
                   CASE WHEN x.status = 'running' THEN now() + interval '1 hour' END,
                   now() - interval '1 day', now() - interval '1 hour' * c.u
            FROM cell AS c JOIN crit AS k ON k.iid = c.iid,
            LATERAL (SELECT random() + 0 * c.u AS v) AS r,  -- per row (correlated)
            LATERAL (SELECT r.v, CASE
                WHEN c.u < 0.008 THEN '{Status.PENDING.value}'
                WHEN c.u < 0.01 THEN '{Status.RUNNING.value}'
                WHEN c.u < 0.02 OR r.v >= 0.99 THEN '{Status.FAILED.value}'
                ELSE '{Status.DONE.value}' END AS status) AS x""",
            p,
        )
        conn.exec_driver_sql(
            """
            INSERT INTO call (uid, cache_key, run_id, judge, raw, parsed, finish,
                prompt_tokens, completion_tokens, cost, latency_ms, created_at,
                cached_tokens, cache_write_tokens, batch)
            SELECT uid, uid, %(run)s, judge,
                   '{"scores": [' || repeat('{"score": 4, "why": "fine"}, ', 8) || ']}',
                   true, 'stop', 900 + (u * 400)::int, 200, 0.0011, 800,
                   now() - interval '1 hour' * u, 0, 0, false
            FROM cell WHERE u >= 0.02""",
            p,
        )
        for _, create in indexes:
            conn.exec_driver_sql(create)
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE")  # what autovacuum does to a long-lived ledger
    return run_id


def best(fn: Callable[[], Any], repeats: int = 3) -> tuple[float, Any]:
    """(best seconds of ``repeats`` calls after a warm-up, the last result)."""
    out = fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - started)
    return round(min(times), 4), out


def measure(store: Store, replicates: int) -> dict[str, Any]:
    from flask_eval.app.progress import run_status
    from flask_eval.storage import live
    from flask_eval.storage.judgment_pages import JudgmentQuery, judgment_page

    info = store.find_run(RUN_NAME)
    assert info is not None
    out: dict[str, Any] = {}
    out["status"], counts = best(lambda: run_status(store, info))
    out["total"] = counts.counts.total
    out["live_counts"], _ = best(lambda: live.judge_counts(store, info.id, 60.0))
    cell = {"model": "model-07", "judge": "openai/judge-11"}
    pages = {
        "cell": JudgmentQuery(**cell),
        "skill x difficulty cell": JudgmentQuery(**cell, criterion="harmlessness", difficulty=5),
        "failed of a cell": JudgmentQuery(**cell, status=Status.FAILED.value),
        "failed in the run": JudgmentQuery(status=Status.FAILED.value),
        "search in a cell": JudgmentQuery(**cell, search="question 17"),
    }
    out["pages"] = {}
    for label, q in pages.items():
        seconds, page = best(lambda q=q: judgment_page(store, info.id, q), repeats=5)
        after = page.next_after or 0  # the next page too
        nxt, _ = best(lambda q=q, a=after: judgment_page(store, info.id, q, after=a), 5)
        out["pages"][label] = {"first": seconds, "next": nxt}
    with store.engine.connect() as conn:
        ids = [
            int(r[0])
            for r in conn.exec_driver_sql(
                "SELECT id FROM judgment WHERE run_id = %(r)s AND status = 'pending' "
                "ORDER BY id LIMIT 960",
                {"r": info.id},
            )
        ]
    claims = []
    for k in range(0, len(ids), 96):
        started = time.perf_counter()
        got = store.claim_contexts(info.id, ids[k : k + 96], 600.0)
        claims.append(time.perf_counter() - started)
        store.release([c.id for c in got])
    out["claim_96"] = round(min(claims), 4)
    started = time.perf_counter()
    report = time_report(store, RUN_NAME, replicates, 0)
    out["report"] = report["seconds"]
    out["report_first"] = round(time.perf_counter() - started, 3)
    out["report_phases"] = report["phases"]
    return out


def timed_delete(store: Store) -> dict[str, Any]:
    """`runs delete` of the big run while a worker writes a row of another run every 0.1 s."""
    big, other = store.find_run(RUN_NAME), store.find_run(OTHER)
    assert big is not None and other is not None
    with store.engine.connect() as conn:
        ids = [
            int(r[0])
            for r in conn.exec_driver_sql(
                "SELECT id FROM judgment WHERE run_id = %(r)s AND status = 'pending' ORDER BY id",
                {"r": other.id},
            )
        ]
    stop, writes = threading.Event(), []

    def worker() -> None:
        for row in itertools.cycle(ids):
            if stop.is_set():
                break
            started = time.perf_counter()  # a claim, then the row given back: two writes
            store.release([c.id for c in store.claim_contexts(other.id, [row], 60.0)])
            writes.append(time.perf_counter() - started)
            time.sleep(0.1)

    thread = threading.Thread(target=worker)
    thread.start()
    started = time.perf_counter()
    store.delete_run(big.id)
    seconds = time.perf_counter() - started
    stop.set()
    thread.join()
    return {
        "seconds": round(seconds, 2),
        "worker_writes": len(writes),
        "slowest_worker_write": round(max(writes, default=0.0), 3),
    }


def main(argv: list[str] | None = None) -> int:
    import psycopg

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judgments", type=int, default=1_000_000)
    parser.add_argument("--postgres", default=ADMIN, help="admin URL of PostgreSQL")
    parser.add_argument("--db", help="database name (default hl_ledger_<judgments>)")
    parser.add_argument("--keep", action="store_true", help="keep (and reuse) the database")
    parser.add_argument("--delete", action="store_true", help="time `runs delete` at the end")
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    name = args.db or f"hl_ledger_{args.judgments}"
    url = f"{args.postgres.rsplit('/', 1)[0]}/{name}"
    with psycopg.connect(args.postgres, autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            admin.execute(f'CREATE DATABASE "{name}"')
    store = Store(url)
    result: dict[str, Any] = {"judgments_asked": args.judgments, "machine": machine()}
    try:
        if store.find_run(RUN_NAME) is None:
            started = time.perf_counter()
            build(store, RUN_NAME, max(1, round(args.judgments / ROWS_PER_INSTANCE)))
            build(store, OTHER, 20)
            result["build_seconds"] = round(time.perf_counter() - started, 1)
            print(f"built in {result['build_seconds']} s", flush=True)
        result |= measure(store, args.replicates)
        if args.delete:
            result["delete"] = timed_delete(store)
    finally:
        store.close()
        if not args.keep:
            with psycopg.connect(args.postgres, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    saved = json.loads(out.read_text()) if out.is_file() else {}
    saved[str(result["total"])] = result
    out.write_text(json.dumps(saved, indent=2) + "\n")
    pages = max(max(p.values()) for p in result["pages"].values())
    print(
        f"{result['total']:,} judgments: status {result['status']:.3f} s, report "
        f"{result['report']:.2f} s, live counts {result['live_counts']:.3f} s, worst page "
        f"{pages * 1000:.1f} ms, claim of 96 {result['claim_96'] * 1000:.1f} ms"
        + (f", delete {result['delete']}" if "delete" in result else "")
    )
    ok = result["report"] <= LIMITS["report"] and result["status"] <= LIMITS["status"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
