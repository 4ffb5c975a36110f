"""Benchmark: people's ratings on a 1M-judgment store (SQLite and PostgreSQL).

Builds a store of ``--judgments`` machine judgments with SQL (one run: 10 models x 10
judges x 3 criteria per instance, instances scaled to reach N, all done), then plans
``--raters`` raters x ``--items`` items x ``--criteria`` criteria of that run through
``storage.ratings.plan_ratings`` (in a random queue order), ranks them all anew
(``set_ranks``), and times what a rater's
page does: ``next_item`` (the claim of the next item, a holder of its own each time) and
``submit`` (the rating of the item just served) and ``progress`` (the rater's counts in
the run, which a page shows), ``--ops`` claims of any run's item and as many of the
run's (``next_item_run``), raters in turn:

    PYTHONPATH=. .venv/bin/python bench/people_bench.py [--judgments 1000000]
        [--raters 3] [--items 20000] [--criteria 3] [--ops 200]
        [--postgres ADMIN_URL [--db bench_people] [--keep]] [--sqlite PATH]

Without ``--postgres`` the store is a SQLite file (``--sqlite``, default a temporary
one). Prints a table (median, p95, max in ms; targets: next item < 100 ms, a rating
stored < 50 ms) and writes bench/results/people.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from flask_eval.storage import ratings  # noqa: E402
from flask_eval.storage.store import Store  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "people.json"
MODELS, JUDGES, CRITERIA = 10, 10, 3
TARGETS_MS = {"next_item": 100.0, "next_item_run": 100.0, "submit": 50.0, "progress": None}
WARM_UP = 5


def _fill(store: Store, judgments: int) -> int:
    """The run and its machine ledger (all done), made in SQL; the run's id."""
    now = datetime.now(UTC)
    per_instance = MODELS * JUDGES * CRITERIA
    config = {"judges": [f"openai/judge-{j}" for j in range(JUDGES)], "mode": "instance"}
    series = (
        "generate_series(0, :n - 1) AS s(x)"
        if store.dialect == "postgresql"
        else "(WITH RECURSIVE s(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM s WHERE x < :n - 1)"
        " SELECT x FROM s) AS s"
    )
    with store.engine.begin() as conn:
        run_id = conn.execute(
            _sql(
                "INSERT INTO run (name, fingerprint, mode, config, created_at) "
                "VALUES ('bench-people', :f, 'instance', :c, :now) RETURNING id"
            ),
            {"f": "0" * 64, "c": json.dumps(config), "now": now},
        ).scalar_one()
        conn.execute(
            _sql(
                "INSERT INTO judgment (run_id, model, model_b, instance_id, criterion, judge, "
                "status, score, claims, asks, requests, created_at, updated_at) "
                "SELECT :run, 'model-' || CAST((x / :jc) % :models AS TEXT), '', "
                "CAST(x / :per AS TEXT), 'criterion-' || CAST(x % :c AS TEXT), "
                "'openai/judge-' || CAST((x / :c) % :judges AS TEXT), 'done', 1 + x % 5, "
                f"1, 1, 1, :now, :now FROM {series}"
            ),
            {
                "run": run_id,
                "n": judgments,
                "jc": JUDGES * CRITERIA,
                "models": MODELS,
                "per": per_instance,
                "c": CRITERIA,
                "judges": JUDGES,
                "now": now,
            },
        )
    store._after_bulk_load()
    return int(run_id)


def _sql(text: str) -> Any:
    from sqlalchemy import text as sql_text

    return sql_text(text)


def _plan(store: Store, run_id: int, judgments: int, raters: int, items: int, criteria: int) -> int:
    """``items`` (model, instance) pages for each rater, in a random order; items made."""
    instances = max(1, judgments // (MODELS * JUDGES * CRITERIA))
    pages = [(f"model-{m}", str(i)) for i in range(instances) for m in range(MODELS)]
    rng = random.Random(36)
    names = tuple(f"criterion-{c}" for c in range(criteria))
    planned = [
        ratings.PlannedRating(f"human/rater-{r}", m, "", i, names, rng.random(), False)
        for r in range(raters)
        for m, i in pages[:items]
    ]
    return ratings.plan_ratings(store, run_id, planned)


def _rerank(store: Store, run_id: int, raters: int, items: int) -> None:
    """Every item ranked anew (as a queue ordered by the judges' disagreement is)."""
    rng = random.Random(37)
    with store.engine.connect() as conn:
        keys = conn.execute(
            _sql("SELECT judge, model, model_b, instance_id FROM rating_item WHERE run_id = :r"),
            {"r": run_id},
        ).all()
    ratings.set_ranks(store, run_id, {tuple(k): rng.random() for k in keys})


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return (time.perf_counter() - start) * 1000, out


def _measure(store: Store, run_id: int, raters: int, ops: int) -> dict[str, list[float]]:
    """``ops`` claims of any run's item (``next_item``) and ``ops`` of the run's
    (``next_item_run``), alternately, each item then rated (``submit``, twice ``ops``) and
    the rater's progress in the run read; raters in turn (a few first, untimed)."""
    times: dict[str, list[float]] = {op: [] for op in TARGETS_MS}
    value = json.dumps({"seconds": 12.5, "source": "workspace"})
    for k in range(2 * (WARM_UP + ops)):
        judge, holder = f"human/rater-{k % raters}", f"session-{k}"
        claim, scope = ("next_item", None) if k % 2 == 0 else ("next_item_run", run_id)
        ms_next, item = _timed(partial(ratings.next_item, store, judge, holder, 1800.0, scope))
        if item is None:
            raise SystemExit(f"{judge} has no item left: plan more (--items)")
        scores = dict.fromkeys(item.criteria, 1 + k % 5)
        submit = partial(ratings.submit, store, item.id, judge, scores, {}, value)
        ms_submit, stored = _timed(submit)
        if not stored:
            raise SystemExit(f"item {item.id} was not stored")
        ms_progress, _ = _timed(partial(ratings.progress, store, judge, run_id))
        if k >= 2 * WARM_UP:
            times[claim].append(ms_next)
            times["submit"].append(ms_submit)
            times["progress"].append(ms_progress)
    return times


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
    return {
        "median_ms": round(statistics.median(ordered), 2),
        "p95_ms": round(p95, 2),
        "max_ms": round(ordered[-1], 2),
    }


def bench(
    url: str, judgments: int, raters: int, items: int, criteria: int, ops: int
) -> dict[str, Any]:
    """Build the store at ``url`` and time it; the figures."""
    store = Store(url)
    try:
        start = time.perf_counter()
        run_id = _fill(store, judgments)
        filled = time.perf_counter() - start
        start = time.perf_counter()
        made = _plan(store, run_id, judgments, raters, items, criteria)
        planned = time.perf_counter() - start
        start = time.perf_counter()
        _rerank(store, run_id, raters, items)
        reranked = time.perf_counter() - start
        times = _measure(store, run_id, raters, ops)
    finally:
        store.close()
    return {
        "backend": store.dialect,
        "judgments": judgments,
        "people_rows": made * criteria,
        "items": made,
        "fill_seconds": round(filled, 1),
        "plan_seconds": round(planned, 1),
        "set_ranks_seconds": round(reranked, 1),
        "ops": ops,
        **{op: summary(t) for op, t in times.items()},
    }


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        f"{'backend':<11} {'judgments':>10} {'items':>7} {'operation':<13} "
        f"{'median ms':>9} {'p95 ms':>7} {'max ms':>7} {'target ms':>9}"
    ]
    for r in results:
        for op, target in TARGETS_MS.items():
            s = r[op]
            lines.append(
                f"{r['backend']:<11} {r['judgments']:>10,} {r['items']:>7,} {op:<13} "
                f"{s['median_ms']:>9.2f} {s['p95_ms']:>7.2f} {s['max_ms']:>7.2f} "
                f"{'-' if target is None else f'{target:.0f}':>9}"
            )
    return "\n".join(lines)


def _postgres(
    admin: str, name: str, keep: bool, run: Callable[[str], dict[str, Any]]
) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        return run(admin.rsplit("/", 1)[0] + "/" + name)
    finally:
        if not keep:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judgments", type=int, default=1_000_000)
    parser.add_argument("--raters", type=int, default=3)
    parser.add_argument("--items", type=int, default=20_000, help="items per rater")
    parser.add_argument("--criteria", type=int, default=3, help="criteria per item (<= 3)")
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument("--postgres", help="admin URL of PostgreSQL (default: SQLite)")
    parser.add_argument("--db", default="bench_people", help="the PostgreSQL database made")
    parser.add_argument("--keep", action="store_true", help="keep the PostgreSQL database")
    parser.add_argument("--sqlite", help="SQLite file made (default: a temporary one)")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    criteria = min(args.criteria, CRITERIA)

    def run(url: str) -> dict[str, Any]:
        return bench(url, args.judgments, args.raters, args.items, criteria, args.ops)

    if args.postgres:
        result = _postgres(args.postgres, args.db, args.keep, run)
    elif args.sqlite:
        result = run(f"sqlite:///{args.sqlite}")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            result = run(f"sqlite:///{Path(tmp) / 'people.db'}")
    print(table([result]))
    print(
        f"fill {result['fill_seconds']} s, plan {result['plan_seconds']} s, "
        f"set_ranks {result['set_ranks_seconds']} s"
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
