"""Benchmark: `flask-eval view`'s pages over the report benchmark's 1,000,000 judgments.

Builds (or reuses) the store of bench/report_bench.py, serves the viewer's application
in-process and times whole HTTP responses (queries, template, transfer over loopback):

- the run page on a first visit (no snapshot: the page says the report is being computed
  and the viewer's refresher computes it beside; the time until the page shows the
  leaderboard is measured too), warm (the snapshot read: the ledger fingerprint, the body
  and one judge's figures) and stale (the ledger moved on: the last snapshot is served
  while the current one is computed);
- pages of judgments under the filters a drill-down uses, first and next page;
- one judgment in full, the comparison page, the runs list.

    .venv/bin/python bench/view_bench.py [--sqlite-only] [--postgres URL]
        [--sqlite-path FILE] [--postgres-db URL]   # reuse a store built before

Writes bench/results/view_bench.json and prints a summary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aiohttp.test_utils import TestClient, TestServer  # noqa: E402

from bench.report_bench import (  # noqa: E402
    DEFAULT_POSTGRES,
    RUN_NAME,
    load,
    machine,
    make_data,
    postgres_database,
)
from flask_eval.storage.models import REPORT_SNAPSHOT  # noqa: E402
from flask_eval.storage.store import Store  # noqa: E402
from flask_eval.viewer.server import make_app  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "view_bench.json"
RUN_PAGE_LIMIT = 1.0
JUDGMENTS_LIMIT = 0.2
REPEATS = 5
RUN = f"/runs/{RUN_NAME}"

#: the filters of a drill-down (a leaderboard cell, a figure's cell, failures, search)
FILTERS: dict[str, dict[str, str]] = {
    "all": {},
    "leaderboard cell (model x judge)": {"model": "model-07", "judge": "openai/judge-11"},
    "skill cell": {
        "model": "model-07",
        "judge": "openai/judge-11",
        "criterion": "Logical Correctness",
    },
    "ability cell": {
        "model": "model-07",
        "judge": "openai/judge-11",
        "ability": "Problem Handling",
    },
    "domain cell": {"model": "model-07", "judge": "openai/judge-11", "domain": "Coding"},
    "skill x difficulty cell": {
        "model": "model-07",
        "judge": "openai/judge-11",
        "criterion": "Logical Correctness",
        "difficulty": "4",
    },
    "failed": {"status": "failed"},
    "failed of a cell": {"model": "model-07", "judge": "openai/judge-11", "status": "failed"},
    "N/A of a judge": {"judge": "openai/judge-03", "status": "na"},
    "search": {"q": "question 17"},
    "search in a cell": {"q": "question 17", "model": "model-07", "judge": "openai/judge-11"},
    "search, no match": {"q": "no such text", "model": "model-07", "judge": "openai/judge-11"},
}


async def _get(client: TestClient[Any, Any], path: str) -> tuple[float, str]:
    started = time.perf_counter()
    resp = await client.get(path)
    text = await resp.text()
    seconds = time.perf_counter() - started
    if resp.status != 200:
        raise RuntimeError(f"GET {path}: {resp.status} {text[:300]}")
    return seconds, text


async def _best(client: TestClient[Any, Any], path: str) -> dict[str, Any]:
    times = [(await _get(client, path))[0] for _ in range(REPEATS)]
    return {
        "best": round(min(times), 4),
        "median": round(statistics.median(times), 4),
        "all": [round(t, 4) for t in times],
    }


def _next(html: str) -> str | None:
    marker = 'id="next" href="'
    at = html.find(marker)
    if at < 0:
        return None
    return html[at + len(marker) : html.index('"', at + len(marker))].replace("&amp;", "&")


def cold_phases(store: Store) -> dict[str, float]:
    """Where a cold run page's time goes: the full report, drawing the page's data and
    figures, writing the snapshot."""
    from flask_eval.app import browse
    from flask_eval.app.report import build_report
    from flask_eval.storage import snapshots
    from flask_eval.viewer import body

    run = browse.find_run(store, RUN_NAME)
    t0 = time.perf_counter()
    report = build_report(store, run, progress=False)
    t1 = time.perf_counter()
    page, parts = body.render(report)
    t2 = time.perf_counter()
    snapshots.put_snapshots(store, run.id, "bench", {"bench": page, **parts})
    t3 = time.perf_counter()
    size = len(json.dumps(page)) + sum(len(json.dumps(p)) for p in parts.values())
    with store.engine.begin() as conn:
        conn.execute(REPORT_SNAPSHOT.delete())
    return {
        "report": round(t1 - t0, 3),
        "render": round(t2 - t1, 3),
        "snapshot_write": round(t3 - t2, 3),
        "json_bytes": size,
    }


async def _stale(store: Store, client: TestClient[Any, Any]) -> dict[str, Any]:
    """The run page after the ledger moved on (one judgment failed -> pending, then
    back): the last snapshot is served, marked as of when it was made."""
    from sqlalchemy import select, update

    from flask_eval.storage.models import JUDGMENT

    with store.engine.begin() as conn:
        row = conn.execute(
            select(JUDGMENT.c.id).where(JUDGMENT.c.status == "failed").limit(1)
        ).scalar_one()
        conn.execute(update(JUDGMENT).where(JUDGMENT.c.id == row).values(status="pending"))
    try:
        timed = await _best(client, RUN)
        if 'id="stale"' not in (await _get(client, RUN))[1]:
            raise RuntimeError("the page after a change of the ledger was not marked stale")
        return timed
    finally:
        with store.engine.begin() as conn:
            conn.execute(update(JUDGMENT).where(JUDGMENT.c.id == row).values(status="failed"))
        # the ledger as it was: wait until the page is current again, so that no report
        # is being computed beside the pages timed next
        while 'id="stale"' in (await _get(client, RUN))[1]:
            await asyncio.sleep(0.1)


async def measure(url: str) -> dict[str, Any]:
    store = Store(url)
    out: dict[str, Any] = {}
    try:
        out["cold_phases"] = cold_phases(store)
        async with TestClient(TestServer(make_app(store))) as client:
            firsts, readies = [], []
            for _ in range(2):
                with store.engine.begin() as conn:
                    conn.execute(REPORT_SNAPSHOT.delete())
                started = time.perf_counter()
                seconds, html = await _get(client, RUN)
                if 'id="computing"' not in html:
                    raise RuntimeError("a first visit did not say the report is being computed")
                while 'id="leaderboard"' not in html:
                    await asyncio.sleep(0.05)
                    html = (await _get(client, RUN))[1]
                firsts.append(seconds)
                readies.append(time.perf_counter() - started)
            out["run_page_first_visit"] = {
                "best": round(min(firsts), 3),
                "all": [round(c, 3) for c in firsts],
            }
            out["run_page_ready_after"] = {
                "best": round(min(readies), 3),
                "all": [round(c, 3) for c in readies],
            }
            out["run_page_warm"] = await _best(client, RUN)
            out["run_page_warm_other_judge"] = await _best(client, f"{RUN}?judge=openai/judge-09")
            out["run_page_stale"] = await _stale(store, client)
            pages: dict[str, Any] = {}
            for name, params in FILTERS.items():
                path = f"{RUN}/judgments" + (f"?{urlencode(params)}" if params else "")
                first = await _best(client, path)
                _, html = await _get(client, path)
                nxt = _next(html)
                second = await _best(client, nxt) if nxt else None
                pages[name] = {"first": first, "next": second, "rows": html.count("/judgments/")}
            out["judgments_pages"] = pages
            worst = max(
                max(p["first"]["best"], (p["next"] or {"best": 0})["best"]) for p in pages.values()
            )
            out["judgments_page_worst"] = round(worst, 4)
            out["judgment_detail"] = await _best(client, f"{RUN}/judgments/123457")
            out["compare"] = await _best(client, f"{RUN}/compare?instance=17")
            out["runs_list"] = await _best(client, "/")
    finally:
        store.close()
    out["ok"] = (
        out["run_page_warm"]["best"] < RUN_PAGE_LIMIT
        and out["run_page_first_visit"]["best"] < RUN_PAGE_LIMIT
        and out["run_page_stale"]["best"] < RUN_PAGE_LIMIT
        and out["judgments_page_worst"] < JUDGMENTS_LIMIT
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="admin URL of PostgreSQL")
    parser.add_argument("--sqlite-only", action="store_true")
    parser.add_argument("--postgres-only", action="store_true")
    parser.add_argument("--sqlite-path", help="a SQLite store built before (kept)")
    parser.add_argument("--postgres-db", help="a PostgreSQL store built before (kept)")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    results: dict[str, Any] = {
        "limits": {"run_page_seconds": RUN_PAGE_LIMIT, "judgments_page_seconds": JUDGMENTS_LIMIT},
        "machine": machine(),
        "backends": {},
    }
    data: dict[str, Any] | None = None
    with ExitStack() as stack:
        urls: dict[str, str] = {}
        if not args.postgres_only:
            path = args.sqlite_path
            if path is None:
                path = f"{stack.enter_context(tempfile.TemporaryDirectory())}/bench.db"
            urls["sqlite"] = f"sqlite:///{path}"
            if not Path(path).exists():
                data = data or make_data()
                results["backends"]["sqlite"] = load(urls["sqlite"], data)
        if not args.sqlite_only:
            if args.postgres_db:
                urls["postgresql"] = args.postgres_db
            else:
                urls["postgresql"] = stack.enter_context(postgres_database(args.postgres))
                data = data or make_data()
                results["backends"]["postgresql"] = load(urls["postgresql"], data)
        data = None
        for name, url in urls.items():
            results["backends"].setdefault(name, {}).update(asyncio.run(measure(url)))
    results["ok"] = all(b["ok"] for b in results["backends"].values())
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    for name, b in results["backends"].items():
        print(
            f"{name}: run page first visit {b['run_page_first_visit']['best'] * 1000:.0f} ms "
            f"(its report ready after {b['run_page_ready_after']['best']:.2f} s), warm "
            f"{b['run_page_warm']['best'] * 1000:.0f} ms, stale "
            f"{b['run_page_stale']['best'] * 1000:.0f} ms; judgments pages worst "
            f"{b['judgments_page_worst'] * 1000:.0f} ms; judgment "
            f"{b['judgment_detail']['best'] * 1000:.0f} ms; runs list "
            f"{b['runs_list']['best'] * 1000:.0f} ms"
        )
    print(
        f"[limits: run page {RUN_PAGE_LIMIT:.0f} s, judgments page "
        f"{JUDGMENTS_LIMIT * 1000:.0f} ms: {'ok' if results['ok'] else 'TOO SLOW'}] on "
        f"{results['machine']['nproc']} x {results['machine']['cpu']}"
    )
    return 0 if results["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
