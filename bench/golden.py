"""Golden outputs: capture what a tree's public commands write, compare two captures.

    PYTHONPATH=$TREE .venv/bin/python -m bench.golden capture OUTDIR [--scale] [--postgres URL]
    PYTHONPATH=$TREE .venv/bin/python -m bench.golden reopen OUTDIR_BEFORE OUTDIR_AFTER
    .venv/bin/python -m bench.golden compare DIR_BEFORE DIR_AFTER

``capture`` makes the runs of bench/golden_runs.py with `flask-eval run` (in this process:
click's CliRunner on the command $TREE/pyproject.toml names ``flask-eval``) against
`flask-eval simulate` (one process per judge, fixed ports and seed), then writes each
run's outputs into OUTDIR/<run>/: reports (json, table, --details, csv, html with its
figures, csv files), status, exports (jsonl, csv), the bundle, the bundle imported into a
new store and reported, agreement and reference reports where the run has them. Runs:
``flask`` (shipped examples, four judges), ``biggen``, ``pairwise`` (examples: win
rates, BT ratings, LC win rate), ``pairwise-flask`` (4 FLASK models), ``autoj``, ``hhh``
(labelled pairwise sets), ``mt-bench``, ``vicuna`` (Prometheus eval sets, GPT-4 as
reference). A run whose data (../shared) is missing is skipped and named in
OUTDIR/golden.json. Inputs are copied into OUTDIR/<run>/inputs and named relative to the
run's folder, so no absolute path enters a run. The SQLite stores stay in OUTDIR/stores/.
``--scale`` adds the 1M-judgment store of bench/report_bench.py's builder (SQLite, and
PostgreSQL with ``--postgres ADMIN_URL``: database ``golden_<OUTDIR name>``) and its
reports. Two captures must use the same simulator ports (GOLDEN_SIM_PORT, default 18765:
the judges' URLs are in the reports and the runs' fingerprints), so one at a time.

``reopen`` copies BEFORE's stores (SQLite files; PostgreSQL by CREATE DATABASE ...
TEMPLATE, BEFORE's stay as they are) and writes their outputs with the current code into
OUTDIR_AFTER, laid out as a capture: ``compare BEFORE AFTER`` then checks that a store
written before opens, migrates and reports the same. ``compare`` prints each differing
file with the head of a unified diff and exits 1 if any differ (golden.json, stores/ and
inputs/ are not compared; against a reopen, neither are run.txt files).

Deterministic by construction, not by hiding: each run is made with ``--in-flight 1`` and
FLASK_EVAL_CALLS_PER_MESSAGE=10000 (its calls one at a time, in plan order: the order
rows are written in decides which call writes a prompt-cache prefix and which reads it,
hence cached tokens and costs, and the pairwise report's LC and style-controlled fits
read their games in the store's order); each judge has its own simulator (its own prompt
cache), which answers from hashes of the prompt and its seed, with no latency and no
random faults; N/A answers come only from the ``lenient`` judge on FLASK's skills, which
allow N/A (elsewhere an N/A is sent back with a format reminder, and where such calls
land among the others, hence a float sum of costs, depends on timing). Normalizations,
applied by ``compare`` to both sides (the files on disk stay raw):

- N1 a timestamp (an ISO date with a time: a bundle row's created_at/updated_at, the HTML
  page's "Generated" line, status) -> ``<TIME>``;
- N2 a bundle (gzip; its header holds the file name) is compared decompressed, and in its
  rows ``call.latency_ms`` (wall-clock) -> null, ``judgment.lease_until`` -> null, the
  trailer's ``sha256`` (over those) -> ``<SHA>``; call rows sorted by their content and
  their uids (uuid4) -> ``uid-N`` in that order, in the judgments' ``call_uid`` too;
- N3 the capture's own folder and the tree's path in any text -> ``<OUTDIR>``, ``<TREE>``;
- N4 "in 1.2 s" durations in run.txt (the run command's messages) -> ``in <S> s``.

Nothing else: scores, counts, costs, tokens, labels, fingerprints and ids are compared as
written, images (PNG, SVG) byte for byte.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any

from bench.golden_compare import MANIFEST, compare
from bench.golden_runs import NA_FLAGS, OUTPUTS, RUN_FLAGS, SIM_FLAGS, SIM_URLS, Run, runs, tree


def _entry_point() -> Any:
    """The click command the `flask-eval` script runs, as the tree's pyproject.toml names it
    (the installed metadata may be another tree's)."""
    target = "flask_eval.cli:main"
    pyproject = tree() / "pyproject.toml"
    if pyproject.exists():
        target = tomllib.loads(pyproject.read_text())["project"]["scripts"]["flask-eval"]
    module, _, attr = target.partition(":")
    return getattr(import_module(module), attr)


@dataclass
class Cli:
    """`flask-eval` in this process against one store, from one working directory."""

    database_url: str
    cwd: Path

    def __call__(self, *args: str, check: bool = True) -> tuple[int, str]:
        from click.testing import CliRunner

        env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("FLASK_EVAL_")}
        env |= {
            "FLASK_EVAL_DATABASE_URL": self.database_url,
            "OPENAI_API_KEY": "sk-golden",
            "ANTHROPIC_API_KEY": "sk-golden",
            # one message for the whole run (10,000 calls at most): its calls made one at a
            # time (``--in-flight 1``), in the order planned
            "FLASK_EVAL_CALLS_PER_MESSAGE": "10000",
        }
        saved = os.getcwd()
        os.chdir(self.cwd)
        try:
            result = CliRunner().invoke(_entry_point(), list(args), env=env, prog_name="flask-eval")
        finally:
            os.chdir(saved)
        if check and result.exit_code != 0:
            raise RuntimeError(
                f"flask-eval {' '.join(args)}: exit {result.exit_code}\n"
                f"{result.stderr[-2000:]}{result.exception!r}"
            )
        return result.exit_code, result.stdout


def write_files(cli: Cli, name: str, specs: Mapping[str, str], out: Path) -> None:
    """Each command of ``specs`` on run ``name``: its output (with the exit code when not
    0) into its file."""
    for file, spec in specs.items():
        command, *options = spec.split()
        code, text = cli(command, name, *options, check=False)
        (out / file).write_text(text if code == 0 else f"exit {code}\n{text}", encoding="utf-8")


def write_outputs(cli: Cli, run: Run | None, name: str, out: Path) -> None:
    """Every output of run ``name`` into ``out`` (reports, exports, the bundle, the bundle
    imported into a new store and reported)."""
    write_files(cli, name, {**OUTPUTS, **(run.extra if run is not None else {})}, out)
    for fmt in ("html", "csv"):
        cli("report", name, "--format", fmt, "--out", str(out / f"report-{fmt}"), "--quiet")
    cli("export", name, "--bundle", str(out / "bundle.gz"))
    imported = out / "imported.db"
    imported.unlink(missing_ok=True)
    again = Cli(f"sqlite:///{imported}", cli.cwd)
    again("import", str(out / "bundle.gz"))
    (out / "report-imported.json").write_text(
        again("report", name, "--format", "json", "--quiet")[1], encoding="utf-8"
    )
    for leftover in out.glob("imported.db*"):
        leftover.unlink()


@contextmanager
def simulators(logs: Path) -> Iterator[None]:
    """`flask-eval simulate` on each of SIM_URLS (output into ``logs``), until the block
    ends."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for url in SIM_URLS:
            port = url.rsplit(":", 1)[1]
            log = logs / f"simulator-{port}.log"
            cmd = [sys.executable, "-m", "flask_eval", "simulate", "--port", port, *SIM_FLAGS]
            cmd += NA_FLAGS if url == SIM_URLS[-1] else ()
            with log.open("wb") as out:
                procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT))
            deadline = time.monotonic() + 120
            while "listening on" not in log.read_text(errors="replace"):
                if procs[-1].poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the simulator on {port} did not start: see {log}")
                time.sleep(0.1)
        yield
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)


def _copy_input(src: Path, dst: Path, lines: int) -> None:
    if lines:
        with src.open(encoding="utf-8") as f:
            dst.write_text("".join(line for _, line in zip(range(lines), f, strict=False)))
    else:
        shutil.copyfile(src, dst)


def capture(outdir: Path, scale: bool, postgres: str | None, only: Sequence[str] = ()) -> int:
    stores = outdir / "stores"
    stores.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {
        "kind": "capture",
        "outdir": str(outdir),
        "tree": str(tree()),
        "runs": {},
        "skipped": {},
        "stores": {},
    }
    with simulators(stores):
        for run in runs():
            if only and run.name not in only:
                continue
            missing = [str(p) for p, _ in run.inputs.values() if not p.exists()]
            if missing:
                manifest["skipped"][run.name] = f"missing {', '.join(missing)}"
                print(f"skip {run.name}: missing {missing[0]}")
                continue
            started = time.perf_counter()
            out = outdir / run.name
            (out / "inputs").mkdir(parents=True, exist_ok=True)
            for file, (src, lines) in run.inputs.items():
                _copy_input(src, out / "inputs" / file, lines)
            (out / "inputs" / "judges.yaml").write_text(run.judges)
            db = stores / f"{run.name}.db"
            db.unlink(missing_ok=True)
            cli = Cli(f"sqlite:///{db}", out)
            code, text = cli("run", *run.args.split(), *RUN_FLAGS, "--run", run.name, check=False)
            (out / "run.txt").write_text(f"exit {code}\n{text}", encoding="utf-8")
            write_outputs(cli, run, run.name, out)
            seconds = round(time.perf_counter() - started, 1)
            manifest["runs"][run.name] = {"seconds": seconds, "run_exit": code}
            manifest["stores"][run.name] = {"url": f"sqlite:///{db}", "run": run.name}
            print(f"{run.name}: exit {code}, {seconds} s", flush=True)
    if scale:
        manifest["stores"] |= capture_scale(outdir, postgres, manifest["runs"])
    (outdir / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    listed = [f"{name}: {s['url']} (run {s['run']})" for name, s in manifest["stores"].items()]
    (stores / "README").write_text(
        "Stores written by this capture; `python -m bench.golden reopen "
        f"{outdir} AFTER` re-opens copies of them with the current code.\n"
        + "\n".join(listed)
        + "\n"
    )
    return 0


SCALE_RUN = "bench-report"
SCALE_OUTPUTS = {k: OUTPUTS[k] for k in ("report.json", "report.txt")}


def _pg(admin_url: str, *statements: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True, connect_timeout=10) as conn:
        for sql in statements:
            conn.execute(sql.encode())


def _pg_name(outdir: Path, suffix: str = "") -> str:
    return re.sub(r"[^a-z0-9_]", "_", f"golden_{outdir.name}{suffix}".lower())[:60]


def _sibling(admin_url: str, database: str) -> str:
    return f"{admin_url.rsplit('/', 1)[0]}/{database}"


def capture_scale(outdir: Path, postgres: str | None, timings: dict[str, Any]) -> dict[str, Any]:
    """The 1M-judgment store of bench/report_bench.py, built by its builder, and its
    reports; the stores stay (a SQLite file, a PostgreSQL database)."""
    report_bench = import_module("bench.report_bench")
    data = report_bench.make_data()
    urls = {"scale-sqlite": f"sqlite:///{outdir / 'stores' / 'scale.db'}"}
    (outdir / "stores" / "scale.db").unlink(missing_ok=True)
    stores: dict[str, Any] = {}
    if postgres:
        name = _pg_name(outdir)
        _pg(postgres, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
        urls["scale-postgresql"] = _sibling(postgres, name)
    for key, url in urls.items():
        started = time.perf_counter()
        report_bench.load(url, data)
        built = time.perf_counter()
        out = outdir / key
        out.mkdir(parents=True, exist_ok=True)
        cli = Cli(url, out)
        write_files(cli, SCALE_RUN, SCALE_OUTPUTS, out)
        timings[key] = {
            "build_seconds": round(built - started, 1),
            "report_seconds": round(time.perf_counter() - built, 1),
        }
        stores[key] = {
            "url": url,
            "run": SCALE_RUN,
            "admin": postgres if "postgres" in key else None,
        }
        print(f"{key}: {timings[key]}", flush=True)
    return stores


def reopen(before: Path, after: Path) -> int:
    """Copies of BEFORE's stores opened with this code; their outputs into AFTER."""
    manifest = json.loads((before / MANIFEST).read_text())
    (after / "stores").mkdir(parents=True, exist_ok=True)
    mine: dict[str, Any] = {
        "kind": "reopen",
        "outdir": str(after),
        "tree": str(tree()),
        "before": str(before),
        "runs": {},
        "stores": {},
    }
    for key, store in manifest["stores"].items():
        started = time.perf_counter()
        url: str = store["url"]
        if url.startswith("sqlite:///"):
            source = Path(url.removeprefix("sqlite:///"))
            copy = after / "stores" / source.name
            for suffix in ("", "-wal", "-shm"):  # a store another process left open has a WAL
                if Path(f"{source}{suffix}").exists():
                    shutil.copyfile(f"{source}{suffix}", f"{copy}{suffix}")
            url = f"sqlite:///{copy}"
        else:
            name = _pg_name(after, f"_{key}")
            _pg(
                store["admin"],
                f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)',
                f'CREATE DATABASE "{name}" TEMPLATE "{url.rsplit("/", 1)[1]}"',
            )
            url = _sibling(store["admin"], name)
        out = after / key
        out.mkdir(parents=True, exist_ok=True)
        if (before / key / "inputs").is_dir():
            shutil.copytree(before / key / "inputs", out / "inputs", dirs_exist_ok=True)
        cli = Cli(url, out)
        if store["run"] == SCALE_RUN:
            write_files(cli, SCALE_RUN, SCALE_OUTPUTS, out)
        else:
            write_outputs(cli, next((r for r in runs() if r.name == key), None), key, out)
        mine["stores"][key] = {"url": url, "run": store["run"], "admin": store.get("admin")}
        mine["runs"][key] = {"seconds": round(time.perf_counter() - started, 1)}
        print(f"reopened {key}: {mine['runs'][key]['seconds']} s", flush=True)
    (after / MANIFEST).write_text(json.dumps(mine, indent=2) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.golden", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    cap = sub.add_parser("capture", help="run the fixed runs, write their outputs into OUTDIR")
    cap.add_argument("outdir", type=Path)
    cap.add_argument("--scale", action="store_true", help="also the 1M-judgment stores")
    cap.add_argument("--postgres", help="PostgreSQL admin URL for --scale (else SQLite only)")
    cap.add_argument("--only", action="append", default=[], help="only this run (repeatable)")
    for name, text in (("compare", "compare two captures"), ("reopen", "re-open BEFORE's stores")):
        p = sub.add_parser(name, help=text)
        p.add_argument("before", type=Path)
        p.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    if args.command == "capture":
        return capture(args.outdir.resolve(), args.scale, args.postgres, args.only)
    if args.command == "reopen":
        return reopen(args.before.resolve(), args.after.resolve())
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
