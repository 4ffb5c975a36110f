"""A bundle is untrusted input (docs/design/bundles.md, "Trust"): a line is never read
beyond its bound, whatever the file expands to; a text PostgreSQL cannot hold is refused
on every store; a judgment whose score its cited answer does not give is refused; and the
bundles of every protocol and kind of work the workers run import as they are."""

from __future__ import annotations

import gzip
import hashlib
import json
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flask_eval.app.bundle import FORMAT, MAX_ROW_BYTES, check_bundle
from flask_eval.core.errors import InputError
from flask_eval.core.files import MIB
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import SimHandle, running_simulator
from flask_eval.storage.bundle import bundle_columns
from flask_eval.storage.db import HEAD
from tests.app.test_bundle import export, forge, lines, refused, source  # noqa: F401
from tests.app.test_bundle import sim as sim  # the module's simulator (source uses it)
from tests.app.test_cost import INPUTS
from tests.conftest import EXAMPLES
from tests.helpers import REPO, cli_env, flask_eval

HEADER = {
    "format": FORMAT,
    "version": 1,
    "schema": HEAD,
    "flask_eval": "test",
    "run": "r1",
    "tables": bundle_columns(),
}


def long_line_bundle(path: Path, size: int) -> Path:
    """A bundle whose second line is ``size`` bytes long (compressed as it is written)."""
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write((json.dumps(HEADER) + "\n").encode())
        chunk = b"a" * (1 << 20)
        for _ in range(size // len(chunk)):
            out.write(chunk)
        out.write(b"\n")
    return path


def test_a_line_over_the_bound_is_refused_and_never_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader asks the decompressor for at most the bound + 1 bytes of a line."""
    path = long_line_bundle(tmp_path / "long.bundle", 4 * MAX_ROW_BYTES)
    longest = [0]

    class Counting(gzip.GzipFile):
        def readline(self, size: int | None = -1) -> bytes:
            line = super().readline(size)
            longest[0] = max(longest[0], len(line))
            return line

        def __next__(self) -> bytes:  # iterating the file: one whole line at a time
            line = super().__next__()
            longest[0] = max(longest[0], len(line))
            return line

    monkeypatch.setattr(gzip, "GzipFile", Counting)  # as app.bundle opens it
    with pytest.raises(InputError) as caught:
        check_bundle(str(path))
    assert f"{path}:2: line is longer than {MAX_ROW_BYTES} bytes" in str(caught.value)
    assert 0 < longest[0] <= MAX_ROW_BYTES + 1


def _limited() -> None:  # in the child, before it starts: 1.5 GB of address space
    limit = 1536 << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def test_a_gigabyte_line_is_refused_in_one_line_under_a_memory_limit(tmp_path: Path) -> None:
    """A ~1 MB file expanding to a 1 GiB line: one line, exit 2, within 1.5 GB."""
    path = long_line_bundle(tmp_path / "huge.bundle", 1 << 30)
    assert path.stat().st_size < 8 << 20
    env = {**cli_env(f"sqlite:///{tmp_path / 'target.db'}"), "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "flask_eval", "import", str(path)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=_limited,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert (
        proc.stderr == f"error: {path}:2: line is longer than {MAX_ROW_BYTES} bytes "
        f"({MAX_ROW_BYTES // MIB} MiB); no bundle flask-eval writes holds one: "
        "it was changed or damaged\n"
    )
    assert not (tmp_path / "target.db").exists()


@pytest.mark.parametrize(
    ("table", "column"), [("response", "text"), ("call", "raw"), ("instance", "instruction")]
)
def test_a_nul_in_a_bundle_text_is_refused_on_every_store(
    source: tuple[str, Path],  # noqa: F811
    tmp_path: Path,
    database_url: str,
    table: str,
    column: str,
) -> None:
    """PostgreSQL cannot store NUL: refused before the store is opened, on both stores
    alike (one line naming the line, exit 2, nothing written)."""
    _, bundle = source
    forged = tmp_path / "nul.bundle"
    number = forge(bundle, forged, table, lambda r: r.update({column: f"a\x00b {r[column]}"}))
    stderr = refused(database_url, "import", str(forged))
    assert stderr.startswith(f"error: {forged}:{number}: {table}.{column} contains a NUL")
    assert "r1" not in flask_eval("runs", env=cli_env(database_url), check=False).stdout


def test_json_nested_too_deeply_is_refused_in_one_line(
    source: tuple[str, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    """A row, or a JSON text in a row, nested beyond the parser's depth: one line."""
    _, bundle = source
    target = tmp_path / "target.db"
    deep_config = tmp_path / "config.bundle"
    number = forge(bundle, deep_config, "run", lambda r: r.update(config="[" * 100_000))
    stderr = refused(f"sqlite:///{target}", "import", str(deep_config))
    assert stderr.startswith(f"error: {deep_config}:{number}: run.config is not a JSON object")
    header, *rows, _ = lines(bundle)
    rows.insert(1, b"[" * 100_000 + b"\n")
    trailer = {
        "end": FORMAT,
        "rows": {},
        "sha256": hashlib.sha256(header + b"".join(rows)).hexdigest(),
    }
    deep_row = tmp_path / "row.bundle"
    deep_row.write_bytes(gzip.compress(b"".join([header, *rows, json.dumps(trailer).encode()])))
    stderr = refused(f"sqlite:///{target}", "import", str(deep_row))
    assert stderr.startswith(f"error: {deep_row}:3: not a bundle row")
    assert not target.exists()


def test_a_header_naming_an_unstorable_run_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "name.bundle"
    path.write_bytes(gzip.compress((json.dumps({**HEADER, "run": "r\x001"}) + "\n").encode()))
    target = tmp_path / "target.db"
    stderr = refused(f"sqlite:///{target}", "import", str(path))
    assert stderr.startswith(f"error: {path}:1: the bundle's run name: --run name contains a NUL")
    assert not target.exists()


def _judged(row: dict[str, Any]) -> bool:
    return row["status"] == "done" and row["score"] is not None and row["call_uid"] is not None


def _raw_of(bundle: Path, uid: str) -> str:
    header, *rows = (json.loads(line) for line in lines(bundle)[:-1])
    cols = header["tables"]["call"]
    return next(
        str(row["raw"])
        for values in rows
        if values[0] == "call" and (row := dict(zip(cols, values[1:], strict=True)))["uid"] == uid
    )


@pytest.mark.parametrize("forged_score", ["other", None], ids=["another-score", "n/a"])
def test_a_score_its_answer_does_not_give_is_refused(
    source: tuple[str, Path],  # noqa: F811
    tmp_path: Path,
    forged_score: str | None,
) -> None:
    """The answer says one score, the judgment another (or N/A): the checksum is right, the
    row's type and scale too; only re-reading the answer with the judge's protocol can
    tell, and it refuses the row naming its line."""
    _, bundle = source
    forged = tmp_path / "forged.bundle"
    seen: dict[str, Any] = {}

    def change(row: dict[str, Any]) -> None:
        seen.update(row)
        row["score"] = None if forged_score is None else 1 + row["score"] % 5

    number = forge(bundle, forged, "judgment", change, _judged)
    assert "[SCORES]" in _raw_of(bundle, seen["call_uid"])
    target = tmp_path / "target.db"
    stderr = refused(f"sqlite:///{target}", "import", str(forged))
    shown = "N/A (null)" if forged_score is None else str(1 + seen["score"] % 5)
    assert stderr.startswith(
        f"error: {forged}:{number}: judgment.score {shown} of "
        f"{seen['criterion']!r} does not follow from the answer it cites "
        f"({seen['call_uid']}): judge "
    )
    assert f"reads {seen['score']}" in stderr
    assert not target.exists()


@pytest.fixture(scope="module")
def judges_sim() -> Iterator[SimHandle]:
    with running_simulator(SimConfig(seed=5, na_rate=0.1, generators={"weak": 2.0})) as handle:
        yield handle


def round_trip(url: str, run: str, tmp_path: Path) -> None:
    """Export ``run`` as a bundle and import it into a new store: it must load whole."""
    done = json.loads(flask_eval("status", run, "--json", env=cli_env(url)).stdout)["done"]
    assert done > 0  # judgments citing their answers, to re-read
    path = tmp_path / f"{run}.bundle"
    export(url, path, run)
    target = f"sqlite:///{tmp_path / f'{run}-target.db'}"
    flask_eval("import", str(path), env=cli_env(target))
    ours = flask_eval("export", run, env=cli_env(target)).stdout
    assert ours == flask_eval("export", run, env=cli_env(url)).stdout


def test_the_bundles_of_every_protocol_and_kind_import_as_they_are(
    judges_sim: SimHandle, tmp_path: Path
) -> None:
    """Each protocol's answers (ours free and structured, Prometheus, FLASK's review),
    pairwise (ours and Prometheus's relative form), a generation and an annotation run:
    re-read, every done judgment follows from its answer."""
    url = f"sqlite:///{tmp_path / 'source.db'}"
    base = judges_sim.openai_base_url
    judges = tmp_path / "judges.yaml"
    judges.write_text(
        f"- spec: openai/sim-gpt@{base}\n  name: ours\n"
        f"- spec: openai/sim-gpt@{base}\n  name: structured\n  structured: true\n"
        f"- spec: openai/prometheus-7b@{base}\n  name: prom\n  protocol: prometheus\n"
        f"- spec: openai/gpt-4-flask@{base}\n  name: review\n  protocol: flask\n"
    )
    pair = tmp_path / "pair.yaml"
    pair.write_text(
        f"- spec: openai/sim-gpt@{base}\n  name: ours\n"
        f"- spec: openai/prometheus-7b@{base}\n  name: prom\n  protocol: prometheus\n"
    )
    env = cli_env(url, OPENAI_BASE_URL=base)
    flask_eval(
        "run", *INPUTS, "--judges", str(judges), "--run", "abs", "--quiet", env=env, check=False
    )  # a garbage answer may fail a judgment: exit 1
    flask_eval(
        "run",
        *INPUTS,
        "--judges",
        str(pair),
        "--pairwise",
        "all",
        "--run",
        "pw",
        "--quiet",
        env=env,
        check=False,
    )
    flask_eval(
        "generate",
        "--instances",
        str(EXAMPLES / "instances.jsonl"),
        "--model",
        "weak=openai/weak",
        "--out",
        str(tmp_path / "gen"),
        "--run",
        "gen",
        "--limit",
        "3",
        "--quiet",
        env=env,
    )
    flask_eval(
        "annotate",
        "--instances",
        str(EXAMPLES / "instances.jsonl"),
        "--annotator",
        "a1=openai/a1",
        "--relabel",
        "--limit",
        "3",
        "--out",
        str(tmp_path / "ann.jsonl"),
        "--run",
        "ann",
        "--quiet",
        env=env,
    )
    for run in ("abs", "pw", "gen", "ann"):
        round_trip(url, run, tmp_path)
    # and a changed verdict, or a changed response of a generation, is refused
    target = f"sqlite:///{tmp_path / 'forged.db'}"
    verdict = tmp_path / "verdict.bundle"
    forge(
        tmp_path / "pw.bundle",
        verdict,
        "judgment",
        lambda r: r.update(score={1: 2, 2: 1}.get(r["score"], 1)),
        _judged,
    )
    assert "does not follow from the answer it cites" in refused(target, "import", str(verdict))
    response = tmp_path / "response.bundle"
    forge(
        tmp_path / "gen.bundle",
        response,
        "judgment",
        lambda r: r.update(value="forged"),
        lambda r: r["status"] == "done",
    )
    assert "judgment.value of 'response' is not what the answer" in refused(
        target, "import", str(response)
    )
