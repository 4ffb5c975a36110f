"""How long `runs delete` takes, and how long it holds other writers back:
`python -m bench.delete_run [--judgments 13968] [--others 67616] [--database URL]`.

Builds a store like the one of issue 20's report (81,584 judgments in all, every one done
and pointing at its paid answer; a fifth of the deleted run's answers also replayed by
another run through the answer cache; statistics analyzed, as autovacuum keeps them in a
store in use), then deletes the run of ``--judgments`` judgments
while a thread keeps writing outcomes of another run, and reports the delete's wall time
and the slowest of those writes. Default database: a fresh PostgreSQL one.
"""

from __future__ import annotations

import argparse
import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from bench.harness import fresh_postgres, write_result
from flask_eval.core.errors import Status
from flask_eval.core.types import Instance, JudgeConfig, Response, ResponseSet
from flask_eval.rubrics.skills import load_default
from flask_eval.storage.records import CallRecord, Outcome
from flask_eval.storage.store import Store

JUDGES = ("openai/j1", "anthropic/j2")
MODELS = ("m1", "m2")
#: judgments per instance: 3 skills x 2 models x 2 judges
PER_INSTANCE = 3 * len(MODELS) * len(JUDGES)


def make_run(store: Store, name: str, judgments: int) -> int:
    skills = load_default().names
    n = max(1, judgments // PER_INSTANCE)
    instances = [
        Instance(
            id=str(i),
            instruction=f"{name} question {i}",
            answer=f"answer {i}",
            skills=tuple(skills[(i + k) % len(skills)] for k in range(3)),
            difficulty=1,
        )
        for i in range(n)
    ]
    sets = [
        ResponseSet(m, f"{m}.jsonl", tuple(Response(m, str(i), f"{m} says {i}") for i in range(n)))
        for m in MODELS
    ]
    config = {"judges": [JudgeConfig(j, j).to_data() for j in JUDGES], "mode": "instance"}
    run, _ = store.create_run(
        name=name,
        fingerprint=uuid.uuid4().hex,
        mode="instance",
        config=config,
        instances=instances,
        response_sets=sets,
        judges=list(JUDGES),
    )
    return run.id


def judge_all(store: Store, run_id: int, reuse: list[str] | None = None) -> list[str]:
    """Every row done, one paid answer per instance call (3 rows); ``reuse``: answers of
    another run some rows point at instead (the answer cache). Returns this run's uids."""
    rows = store.open_rows(run_id)
    uids: list[str] = []
    for start in range(0, len(rows), 3000):
        chunk = rows[start : start + 3000]
        calls, outcomes = [], []
        for k in range(0, len(chunk), 3):
            uid = uuid.uuid4().hex
            uids.append(uid)
            calls.append(
                CallRecord(
                    uid,
                    uuid.uuid4().hex,
                    run_id,
                    chunk[k].judge,
                    "raw " * 50,
                    True,
                    "stop",
                    500,
                    80,
                    0.001,
                    900.0,
                )
            )
            pointed = reuse.pop() if reuse else uid
            outcomes += [
                Outcome(r.id, Status.DONE, score=3, rationale="ok", call_uid=pointed)
                for r in chunk[k : k + 3]
            ]
        store.write(calls, outcomes)
    return uids


@contextlib.contextmanager
def writer_latencies(store: Store, run_id: int) -> Iterator[list[float]]:
    """A thread that keeps finishing rows of ``run_id`` (a worker of another run)."""
    rows = [r.id for r in store.open_rows(run_id)]
    seen: list[float] = []
    stop = threading.Event()

    def work() -> None:
        for i in rows:
            if stop.is_set():
                return
            started = time.perf_counter()
            store.claim_contexts(run_id, [i], 600)
            store.write((), [Outcome(i, Status.DONE, score=4)])
            seen.append(time.perf_counter() - started)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join()


def measure(url: str, judgments: int, others: int) -> dict[str, Any]:
    store = Store(url)
    target = make_run(store, "deleted", judgments)
    uids = judge_all(store, target)
    made, k = 0, 0
    while others - made >= PER_INSTANCE:  # runs of the deleted one's size
        size = min(judgments, others - made) // PER_INSTANCE * PER_INSTANCE
        other = make_run(store, f"other{k}", size)
        judge_all(store, other, reuse=uids[: len(uids) // 5] if k == 0 else None)
        made, k = made + size, k + 1
    live = make_run(store, "live", 2_400)
    if store.dialect == "postgresql":  # statistics as autovacuum keeps them in a used store
        with store.engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")
    planned = store.count_open(target) + len(store.open_rows(live))
    with writer_latencies(store, live) as seen:
        time.sleep(0.5)
        started = time.perf_counter()
        store.delete_run(target)
        took = time.perf_counter() - started
        time.sleep(0.5)
    store.close()
    return {
        "database": store.dialect,
        "judgments": judgments,
        "other_judgments": made,
        "planned": planned,
        "delete_seconds": round(took, 3),
        "writes_during": len(seen),
        "slowest_write_seconds": round(max(seen, default=0.0), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judgments", type=int, default=13_968)
    parser.add_argument("--others", type=int, default=81_584 - 13_968)
    parser.add_argument("--database", default=None, help="default: a fresh PostgreSQL database")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        url = args.database or stack.enter_context(fresh_postgres())
        result = measure(url, args.judgments, args.others)
    write_result(
        f"delete_run_{result['database']}",
        result,
        f"deleted {result['judgments']} judgments (among {result['other_judgments']} others) "
        f"in {result['delete_seconds']} s; slowest concurrent write "
        f"{result['slowest_write_seconds']} s",
    )


if __name__ == "__main__":
    main()
