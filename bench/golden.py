"""Golden outputs: capture what a tree's public commands write, compare two captures.

    PYTHONPATH=$TREE .venv/bin/python -m bench.golden capture OUTDIR [--scale] [--postgres URL]
    PYTHONPATH=$TREE .venv/bin/python -m bench.golden reopen OUTDIR_BEFORE OUTDIR_AFTER
    .venv/bin/python -m bench.golden compare DIR_BEFORE DIR_AFTER

``capture`` runs fixed runs with `flask-eval run` (in this process, click's CliRunner on
the ``flask-eval`` script that $TREE/pyproject.toml names) against the judge simulator
(`flask-eval simulate`, one process, fixed port and seed), then writes each run's outputs
into OUTDIR/<run>/ (:data:`OUTPUTS`: reports in every format, exports, the bundle, the
bundle imported into a new store and reported). The runs: ``flask`` (the shipped
examples, two judges), ``biggen``, ``pairwise`` (examples: win rates, BT ratings, LC win
rate), ``pairwise-flask`` (4 FLASK models), ``autoj`` and ``hhh`` (labelled pairwise
sets), ``mt-bench`` and ``vicuna`` (Prometheus eval sets, with GPT-4 as a reference). A run
whose data (../shared) is missing is skipped and listed in OUTDIR/golden.json. Inputs are
copied into OUTDIR/<run>/inputs and named relative to the run's folder, so no absolute
path enters a run's configuration. The stores stay in OUTDIR/stores/ (SQLite files).
``--scale`` adds the 1M-judgment store of bench/report_bench.py (SQLite, and PostgreSQL
with ``--postgres ADMIN_URL`` as database ``golden_<OUTDIR name>``) and its reports.

``reopen`` copies BEFORE's stores (SQLite files; PostgreSQL by CREATE DATABASE ...
TEMPLATE) and writes their outputs with the current code into OUTDIR_AFTER, laid out as a
capture, so ``compare BEFORE AFTER`` checks that an old store opens, migrates, reports the
same. ``compare`` prints each differing file with the head of a unified diff; exit 1 if
any differ. It skips golden.json, stores/ and run.txt files where one side is a reopen.

Normalizations, applied by ``compare`` to both sides (the files on disk stay raw):

- N1 a timestamp (ISO date with a time, e.g. a bundle row's created_at, the HTML page's
  "Generated" line) -> ``<TIME>``;
- N2 a bundle (gzip) is compared decompressed (the gzip header holds the file name), and
  in its rows: ``call.latency_ms`` (wall-clock latency) -> null; call uids (uuid4) ->
  ``uid-N`` numbered in order of appearance; ``judgment.lease_until`` -> null; the
  trailer's ``sha256`` (a hash over those fields) -> ``<SHA>``;
- N3 the capture's own folder (OUTDIR) and tree ($TREE) in any text -> ``<OUTDIR>``,
  ``<TREE>``;
- N4 "in 1.2 s" durations in run.txt (the run command's own messages) -> ``in <S> s``.

Nothing else: scores, counts, costs, tokens, labels, fingerprints, ids are compared as
written. Bytes of images (PNG, SVG) are compared as written. The simulator answers from
hashes of the prompt and its seed, with no latency and no random faults, so two captures
of one tree are identical after these normalizations (checked: docs in
/work/notes-helpers/golden.md is the place of the figures).
"""

from __future__ import annotations

import argparse
import difflib
import gzip
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
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any

SHARED = Path(os.environ.get("FLASK_EVAL_SHARED", "/work/shared"))
SIM_PORT = int(os.environ.get("GOLDEN_SIM_PORT", "18765"))
#: one simulator per judge (its prompt cache its own: which call writes a shared prefix
#: and which reads it would depend on how the judges' calls interleave)
SIM_URLS = [f"http://127.0.0.1:{SIM_PORT + k}" for k in range(3)]
SIM_FLAGS = ("--seed", "7", "--na-rate", "0.05", "--position-bias", "0.2")
MANIFEST = "golden.json"
#: one call at a time: the rows are written in the order they were planned (the pairwise
#: report's LC and style fits read them in the order the store returns them)
RUN_FLAGS = ("--judges", "inputs/judges.yaml", "--in-flight", "1")
#: what each run writes: file name -> the command's arguments after the run name
OUTPUTS: dict[str, tuple[str, ...]] = {
    "report.json": ("report", "--format", "json", "--quiet"),
    "report.txt": ("report", "--quiet"),
    "report-details.txt": ("report", "--details", "--quiet"),
    "report.csv": ("report", "--format", "csv", "--quiet"),
    "status.json": ("status", "--json"),
    "export.jsonl": ("export",),
    "export.csv": ("export", "--format", "csv"),
}
TIME_RE = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?")
DURATION_RE = re.compile(r"\bin \d+(\.\d+)? s\b")


def _judges(*entries: str) -> str:
    return "".join(entries)


OURS = (
    f"- spec: openai/sim-gpt@{SIM_URLS[0]}/v1\n  name: ours\n  price: {{input: 2.5, output: 10}}\n"
)
PROM = (
    f"- spec: openai/prometheus-7b@{SIM_URLS[1]}/v1\n  name: prom\n  protocol: prometheus\n"
    "  price: {input: 0.2, output: 0.2}\n"
)
CLAUDE = (
    f"- spec: anthropic/sim-claude@{SIM_URLS[2]}\n  name: claude\n"
    "  price: {input: 3, output: 15}\n"
)
PROM_DATA = SHARED / "prometheus-data" / "eval" / "benchmark" / "data"
FLASK_MODELS = ("gpt4", "alpaca_13b", "vicuna_13b", "llama2_chat_13b")


@dataclass(frozen=True)
class Run:
    """One run: its inputs (name in inputs/ -> source, and lines kept: 0 all), the
    arguments of `flask-eval run` and extra outputs (file -> arguments after the name)."""

    name: str
    inputs: dict[str, tuple[Path, int]]
    args: tuple[str, ...]
    judges: str
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def runs(examples: Path) -> list[Run]:
    ex = {f: (examples / f, 0) for f in ("instances.jsonl", "model_a.jsonl", "model_b.jsonl")}
    two = (
        "--responses",
        "model_a=inputs/model_a.jsonl",
        "--responses",
        "model_b=inputs/model_b.jsonl",
    )
    outputs = SHARED / "flask-data" / "model_output" / "outputs"
    flask4 = {f"{m}.jsonl": (outputs / f"{m}.jsonl", 30) for m in FLASK_MODELS}
    flask4["instances.jsonl"] = (SHARED / "flask-data/evaluation_set/flask_evaluation.jsonl", 30)
    agreement = {"agreement.json": ("agreement", "--format", "json")}

    def eval_set(name: str, file: str, limit: str) -> Run:
        ref = ("--reference", f"gpt4=inputs/{file}")
        return Run(
            name,
            {file: (PROM_DATA / file, 0)},
            ("--prometheus-set", f"inputs/{file}", "--limit", limit),
            OURS,
            {
                "report-reference.json": ("report", "--format", "json", "--quiet", *ref),
                "agreement.json": ("agreement", "--format", "json", *ref),
            },
        )

    return [
        Run(
            "flask",
            ex,
            ("--instances", "inputs/instances.jsonl", *two),
            OURS + PROM + CLAUDE,
            {
                **agreement,
                "report-ensemble.json": (
                    "report",
                    "--format",
                    "json",
                    "--quiet",
                    "--ensemble",
                    "mean:2",
                ),
            },
        ),
        Run(
            "biggen",
            {"biggen.json": (SHARED / "prometheus-data/BiGGen-Bench/sample_responses.json", 0)},
            ("--biggen", "inputs/biggen.json"),
            PROM + CLAUDE,
            agreement,
        ),
        Run(
            "pairwise",
            ex,
            ("--instances", "inputs/instances.jsonl", *two, "--pairwise", "all"),
            OURS + PROM,
            agreement,
        ),
        Run(
            "pairwise-flask",
            flask4,
            (
                "--instances",
                "inputs/instances.jsonl",
                "--pairwise",
                "all",
                *[a for m in FLASK_MODELS for a in ("--responses", f"{m}=inputs/{m}.jsonl")],
            ),
            OURS + PROM,
            agreement,
        ),
        Run(
            "autoj",
            {"autoj.json": (PROM_DATA / "autoj_pairwise.json", 0)},
            ("--pairwise-set", "inputs/autoj.json"),
            OURS,
        ),
        Run(
            "hhh",
            {"hhh.json": (PROM_DATA / "hhh_alignment_eval.json", 0)},
            ("--pairwise-set", "inputs/hhh.json"),
            OURS,
        ),
        eval_set("mt-bench", "mt_bench_eval.json", "60"),
        eval_set("vicuna", "vicuna_eval.json", "20"),
    ]


def _entry_point() -> Any:
    """The click command the `flask-eval` script runs, as the tree's pyproject.toml names it
    (the installed metadata may be another tree's)."""
    tree = Path(import_module("flask_eval").__path__[0]).resolve().parent
    target = "flask_eval.cli:main"
    pyproject = tree / "pyproject.toml"
    if pyproject.exists():
        target = tomllib.loads(pyproject.read_text())["project"]["scripts"]["flask-eval"]
    module, _, attr = target.partition(":")
    return getattr(import_module(module), attr)


def tree() -> Path:
    return Path(import_module("flask_eval").__path__[0]).resolve().parent


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


def write_outputs(cli: Cli, run: Run | None, name: str, out: Path) -> None:
    """Every output of run ``name`` into ``out`` (reports, exports, the bundle, the bundle
    imported into a new store and reported)."""
    extra = run.extra if run is not None else {}
    for file, args in {**OUTPUTS, **extra}.items():
        code, text = cli(args[0], name, *args[1:], check=False)
        (out / file).write_text(text if code == 0 else f"exit {code}\n{text}", encoding="utf-8")
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
    examples = tree() / "flask_eval" / "examples"
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
        for run in runs(examples):
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
            code, text = cli("run", *run.args, *RUN_FLAGS, "--run", run.name, check=False)
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
        for file, args in SCALE_OUTPUTS.items():
            (out / file).write_text(cli(args[0], SCALE_RUN, *args[1:])[1], encoding="utf-8")
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
            copy = after / "stores" / Path(url.removeprefix("sqlite:///")).name
            shutil.copyfile(url.removeprefix("sqlite:///"), copy)
            url = f"sqlite:///{copy}"
        else:
            name = _pg_name(after, f"_{key}")
            source = url.rsplit("/", 1)[1]
            _pg(
                store["admin"],
                f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)',
                f'CREATE DATABASE "{name}" TEMPLATE "{source}"',
            )
            url = _sibling(store["admin"], name)
        out = after / key
        out.mkdir(parents=True, exist_ok=True)
        if (before / key / "inputs").is_dir():
            shutil.copytree(before / key / "inputs", out / "inputs", dirs_exist_ok=True)
        cli = Cli(url, out)
        if store["run"] == SCALE_RUN:
            for file, args in SCALE_OUTPUTS.items():
                (out / file).write_text(cli(args[0], SCALE_RUN, *args[1:])[1], encoding="utf-8")
        else:
            write_outputs(cli, next((r for r in runs(Path()) if r.name == key), None), key, out)
        mine["stores"][key] = {"url": url, "run": store["run"], "admin": store.get("admin")}
        mine["runs"][key] = {"seconds": round(time.perf_counter() - started, 1)}
        print(f"reopened {key}: {mine['runs'][key]['seconds']} s", flush=True)
    (after / MANIFEST).write_text(json.dumps(mine, indent=2) + "\n")
    return 0


def normalize(path: Path, data: bytes, roots: Sequence[tuple[str, str]]) -> bytes:
    """The file's bytes with N1-N4 applied (see the module docstring); images as they are."""
    if path.suffix == ".gz":
        return _bundle(gzip.decompress(data).decode("utf-8"), roots).encode()
    if path.suffix in (".png", ".db"):
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    return _text(text, roots, durations=path.name == "run.txt").encode()


def _text(text: str, roots: Sequence[tuple[str, str]], durations: bool = False) -> str:
    for root, token in roots:  # N3
        text = text.replace(root, token)
    text = TIME_RE.sub("<TIME>", text)  # N1
    return DURATION_RE.sub("in <S> s", text) if durations else text  # N4


def _bundle(text: str, roots: Sequence[tuple[str, str]]) -> str:
    """N2: a bundle's volatile columns blanked, its call rows sorted, its call uids
    numbered in that order; then N1 and N3."""
    lines = text.splitlines()
    columns: dict[str, list[str]] = json.loads(lines[0]).get("tables", {})
    blank = {("call", "latency_ms"), ("judgment", "lease_until")}
    rows: list[Any] = []
    for line in lines[1:]:
        row = json.loads(line)
        if isinstance(row, list) and row and row[0] in columns:
            for i, col in enumerate(columns[row[0]], start=1):
                if (row[0], col) in blank and i < len(row):
                    row[i] = None
        elif isinstance(row, dict) and "sha256" in row:
            row["sha256"] = "<SHA>"
        rows.append(row)
    uid_at = {
        t: cols.index(c) + 1
        for t, cols in columns.items()
        for c in ("uid", "call_uid")
        if c in cols
    }
    calls = sorted(
        (r for r in rows if isinstance(r, list) and r[:1] == ["call"]),
        key=lambda r: json.dumps(r[: uid_at["call"]] + r[uid_at["call"] + 1 :]),
    )
    uids = {r[uid_at["call"]]: f"uid-{n}" for n, r in enumerate(calls)} if calls else {}
    at_call = iter(calls)
    out = [lines[0]]
    for row in rows:
        if isinstance(row, list) and row[:1] == ["call"]:
            row = next(at_call)
        if isinstance(row, list) and row[:1] and row[0] in uid_at:
            i = uid_at[row[0]]
            row[i] = uids.get(row[i], row[i])
        out.append(json.dumps(row, ensure_ascii=False))
    return _text("\n".join(out) + "\n", roots)


def _files(root: Path) -> set[str]:
    skip = {MANIFEST}
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file()
        and str(p.relative_to(root)) not in skip
        and p.relative_to(root).parts[0] != "stores"
        and "inputs" not in p.relative_to(root).parts
    }


def _roots(root: Path) -> list[tuple[str, str]]:
    found = [(str(root.resolve()), "<OUTDIR>")]
    manifest = root / MANIFEST
    if manifest.exists():
        doc = json.loads(manifest.read_text())
        found = [(doc["outdir"], "<OUTDIR>"), *found, (doc["tree"], "<TREE>")]
    return found


def compare(before: Path, after: Path, head: int = 12) -> int:
    kinds = [
        json.loads((d / MANIFEST).read_text()).get("kind") if (d / MANIFEST).exists() else None
        for d in (before, after)
    ]
    left, right = _files(before), _files(after)
    if "reopen" in kinds:  # a reopen has no run of its own
        left = {f for f in left if not f.endswith("run.txt")}
        right = {f for f in right if not f.endswith("run.txt")}
        if kinds[1] == "reopen":
            left = {f for f in left if f.split("/")[0] in {g.split("/")[0] for g in right}}
    differ = 0
    for name in sorted(left | right):
        if name not in right or name not in left:
            print(f"ONLY IN {'BEFORE' if name in left else 'AFTER'}: {name}")
            differ += 1
            continue
        a = normalize(Path(name), (before / name).read_bytes(), _roots(before))
        b = normalize(Path(name), (after / name).read_bytes(), _roots(after))
        if a == b:
            continue
        differ += 1
        print(f"DIFFERS: {name}")
        try:
            diff = difflib.unified_diff(
                a.decode().splitlines(),
                b.decode().splitlines(),
                "before/" + name,
                "after/" + name,
                lineterm="",
                n=1,
            )
            for line in list(diff)[:head]:
                print("    " + line[:300])
        except UnicodeDecodeError:
            print(f"    binary: {len(a)} vs {len(b)} bytes")
    total = len(left | right)
    print(f"{total - differ} of {total} files identical" + (f", {differ} differ" if differ else ""))
    return 1 if differ else 0


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
